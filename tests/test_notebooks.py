"""The notebooks themselves: sources earn full marks, releases fail cleanly, nbgrader agrees.

Executing notebooks takes seconds each, so those tests are marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
from nbclient import NotebookClient
from nbgrader.api import Gradebook
import pytest

from grader.course import load_course
from grader.grading import grade_part
from grader.student import LocalFunction, local_value
from layerlab.widgets import CELL, forward_pass_explorer, layer_state, state_html, state_text

ROOT = Path(__file__).resolve().parents[1]
COURSE = load_course(ROOT / "course.yml")
BUILT = list(COURSE.assignments)  # a missing source notebook fails its tests, it is not skipped
IDS = [a.id for a in BUILT]
ILLUSTRATION = "illustration"


def execute(notebook, cwd: Path, allow_errors: bool):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    )
    env.pop("MPLBACKEND", None)
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=240,
        allow_errors=allow_errors,
        record_timing=False,
        resources={"metadata": {"path": str(cwd)}},
    )
    client.execute(env=env, stderr=subprocess.DEVNULL)
    return notebook


def grade_id(cell) -> str:
    return cell.metadata.get("nbgrader", {}).get("grade_id", "")


def errors(cell) -> list:
    return [output for output in cell.get("outputs", []) if output.output_type == "error"]


@pytest.mark.slow
@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_source_notebook_earns_full_marks(assignment, tmp_path):
    """Solutions + hidden tests: every assert_part must pass, every public test must be silent on stderr."""
    notebook = nbformat.read(ROOT / "source" / assignment.id / assignment.notebook, as_version=4)
    execute(notebook, tmp_path, allow_errors=True)
    failures = [
        f"{grade_id(cell) or cell.id}: {e.ename}: {e.evalue[:500]}"
        for cell in notebook.cells
        for e in errors(cell)
    ]
    assert not failures, "\n".join(failures)
    for part in assignment.parts:
        if part.kind == "manual":
            continue
        cell = next(cell for cell in notebook.cells if grade_id(cell) == part.id)
        stderr = [o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
        assert not stderr, f"{part.id}: test cell wrote to stderr (nbgrader scores that 0): {stderr}"
        stdout = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
        assert f"{part.id}: {part.points:g}/{part.points:g} (passed)" in stdout, stdout


@pytest.mark.slow
@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_released_notebook_runs_to_the_end_and_fails_only_in_test_cells(assignment, tmp_path):
    notebook = nbformat.read(ROOT / "assignments" / assignment.id / assignment.notebook, as_version=4)
    execute(notebook, tmp_path, allow_errors=True)
    parts = {part.id: part for part in assignment.parts}
    for cell in notebook.cells:
        if not errors(cell):
            continue
        part = parts.get(grade_id(cell))
        assert part is not None and part.kind != "manual", (
            f"cell {cell.id} ({grade_id(cell) or 'not a test cell'}) raised {errors(cell)[0].ename}: "
            f"{errors(cell)[0].evalue}"
        )
        error = errors(cell)[0]
        if part.kind == "function":  # the stub itself raises, naming the task
            assert error.ename == "NotImplementedError" and f"Task {part.task}" in error.evalue, (
                f"test cell {part.id} should fail with the stub's NotImplementedError for task {part.task}, "
                f"got {error.ename}: {error.evalue}"
            )
        else:  # the value is still None: a public test says so
            assert error.ename in ("AssertionError", "NotImplementedError", "TypeError"), (
                f"test cell {part.id} should reject the None stub, got {error.ename}: {error.evalue}"
            )
    untouched = [
        p.id
        for p in assignment.parts
        if p.kind != "manual" and not errors(next(c for c in notebook.cells if grade_id(c) == p.id))
    ]
    assert not untouched, f"these test cells passed on the stubs: {untouched}"


WRONG_RESULT = "'a wrong answer'"


def with_wrong_answers(notebook, assignment):
    """The release with every stub answered wrongly: functions return a string, values are a string."""
    names = {part.name for part in assignment.parts if part.kind != "manual"}
    for cell in notebook.cells:
        if cell.cell_type != "code" or not grade_id(cell).startswith("answer_"):
            continue
        lines = []
        for line in cell.source.split("\n"):
            stripped = line.strip()
            indent = line[: len(line) - len(line.lstrip())]
            if stripped.startswith("raise NotImplementedError("):
                line = f"{indent}return {WRONG_RESULT}"
            elif stripped.split("=")[0].strip() in names and stripped.split("=", 1)[-1].strip().startswith(
                "None"
            ):
                line = f"{indent}{stripped.split('=')[0].strip()} = {WRONG_RESULT}"
            lines.append(line)
        cell.source = "\n".join(lines)
    return notebook


@pytest.mark.slow
@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_figures_and_helpers_survive_wrong_answers(assignment, tmp_path):
    """With every task answered wrongly, only test cells fail: no figure, sweep or helper cell crashes."""
    released = nbformat.read(ROOT / "assignments" / assignment.id / assignment.notebook, as_version=4)
    notebook = execute(with_wrong_answers(released, assignment), tmp_path, allow_errors=True)
    tests = {part.id for part in assignment.parts if part.kind != "manual"}
    crashed = [
        f"cell {cell.id}: {errors(cell)[0].ename}: {errors(cell)[0].evalue[:300]}"
        for cell in notebook.cells
        if errors(cell) and grade_id(cell) not in tests
    ]
    assert not crashed, "\n".join(crashed)
    failed = {grade_id(cell): errors(cell)[0].ename for cell in notebook.cells if errors(cell)}
    assert "NotImplementedError" not in failed.values(), f"a stub was left unanswered: {failed}"
    assert set(failed) == tests, f"these public tests passed a wrong answer: {sorted(tests - set(failed))}"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_released_stubs_score_zero_with_not_implemented_feedback(assignment):
    """Run the release's setup and answer cells here, then grade what they define."""
    notebook = nbformat.read(ROOT / "assignments" / assignment.id / assignment.notebook, as_version=4)
    namespace: dict = {}
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if (
            cell.cell_type == "code"
            and ILLUSTRATION not in tags
            and not cell.metadata.get("nbgrader", {}).get("grade")
        ):
            exec(compile(cell.source, f"<{assignment.id}:{cell.id}>", "exec"), namespace)
    for part in assignment.parts:
        if part.kind == "manual":
            continue
        value = namespace[part.name]
        answer = LocalFunction(value, part.name) if part.kind == "function" else local_value(value)
        result = grade_part(assignment, part, answer, "stub-student", "test-secret")
        assert result.score == 0, f"{part.id}: the stub scored {result.score}"
        assert "not implemented yet" in result.feedback or "not answered yet" in result.feedback, (
            f"{part.id}: feedback should say the task is not done yet, got: {result.feedback}"
        )


def nbgrader(course_dir: Path, *arguments: str) -> str:
    env = dict(
        os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    )
    result = subprocess.run(
        [sys.executable, "-m", "nbgrader", *arguments],
        cwd=course_dir,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        f"nbgrader {' '.join(arguments)} failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    )
    return result.stdout + result.stderr


# nbgrader's CLI takes 10-20 s per assignment: two by default, all with LAYERS_TEST_ALL_NBGRADER=1
NBGRADER_CASES = (
    BUILT
    if os.environ.get("LAYERS_TEST_ALL_NBGRADER")
    else [a for a in BUILT if a.id in ("01_shapes", "03_gradients")]
)


@pytest.mark.slow
@pytest.mark.parametrize("assignment", NBGRADER_CASES, ids=[a.id for a in NBGRADER_CASES])
def test_nbgrader_generate_and_autograde_give_full_marks(assignment, tmp_path):
    """On a copy of the course: nbgrader's own CLI releases the same notebook and full-marks the solution."""
    for name in ("course.yml", "nbgrader_config.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "source" / assignment.id, tmp_path / "source" / assignment.id)
    nbgrader(tmp_path, "generate_assignment", assignment.id)
    released = (tmp_path / "assignments" / assignment.id / assignment.notebook).read_text(encoding="utf-8")
    assert released == (ROOT / "assignments" / assignment.id / assignment.notebook).read_text(
        encoding="utf-8"
    ), "nbgrader generate_assignment and python -m grader build disagree"

    submission = tmp_path / "submitted" / "student-1" / assignment.id
    submission.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / assignment.id / assignment.notebook, submission / assignment.notebook)
    nbgrader(tmp_path, "autograde", assignment.id)
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        grades = {
            grade.name: (grade.auto_score, grade.max_score)
            for nb in gradebook.find_submission(assignment.id, "student-1").notebooks
            for grade in nb.grades
        }
    assert set(grades) == {part.id for part in assignment.parts}
    for part in assignment.parts:
        auto_score, max_score = grades[part.id]
        assert max_score == part.points
        if part.kind == "manual":
            assert auto_score is None, f"{part.id} is graded by hand"
        else:
            assert auto_score == part.points, f"{part.id}: nbgrader gave {auto_score}/{part.points}"
    graded = nbformat.read(
        tmp_path / "autograded" / "student-1" / assignment.id / assignment.notebook, as_version=4
    )
    for part in assignment.parts:
        if part.kind != "manual":  # the hidden tests were restored from the gradebook and ran
            cell = next(cell for cell in graded.cells if grade_id(cell) == part.id)
            assert "assert_part(" in cell.source
            stdout = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            assert f"{part.id}: {part.points:g}/{part.points:g} (passed)" in stdout, stdout


def nbgrader_grades(course_dir: Path, assignment, student: str) -> dict[str, float | None]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course_dir / 'gradebook.db'}") as gradebook:
        return {
            grade.name: grade.auto_score
            for nb in gradebook.find_submission(assignment.id, student).notebooks
            for grade in nb.grades
        }


# split_output_rows is half right: the split is right, but more ranks than rows are not refused, which
# its public test reports. split_input_columns is right, but prints, to stdout and stderr, the inputs
# of every call that comes from the grader.
CHANGED_ANSWERS = {
    "answer_split_output_rows": ("not 1 <= n <= W.shape[0]", "n < 1"),
    "answer_split_input_columns": (
        "    return [W_i.copy()",
        "    import inspect, sys\n"
        "    if any('grader' in frame.filename for frame in inspect.stack()):\n"
        "        print('LEAK', W.tolist())\n        print('LEAK', n, file=sys.stderr)\n"
        "    return [W_i.copy()",
    ),
}


@pytest.mark.slow
def test_nbgrader_and_the_grader_agree_on_partial_credit(tmp_path):
    """nbgrader's own autograde gives each part the grader's score, half marks included."""
    assignment = COURSE.assignment("04_tensor_parallel")
    for name in ("course.yml", "nbgrader_config.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "source" / assignment.id, tmp_path / "source" / assignment.id)
    nbgrader(tmp_path, "generate_assignment", assignment.id)

    notebook = nbformat.read(ROOT / "solutions" / assignment.id / assignment.notebook, as_version=4)
    for cell in notebook.cells:
        if grade_id(cell) in CHANGED_ANSWERS:
            old, new = CHANGED_ANSWERS[grade_id(cell)]
            assert old in cell.source, f"{grade_id(cell)}: the model answer no longer holds {old!r}"
            cell.source = cell.source.replace(old, new)
    submission = tmp_path / "submitted" / "student-1" / assignment.id
    submission.mkdir(parents=True)
    nbformat.write(notebook, submission / assignment.notebook)
    nbgrader(tmp_path, "autograde", assignment.id)
    by_nbgrader = nbgrader_grades(tmp_path, assignment, "student-1")

    checked = subprocess.run(
        [sys.executable, "-m", "grader", "check", "--json", "--student", "student-1"]
        + ["--course", str(ROOT), str(submission / assignment.notebook)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert checked.returncode == 0, checked.stderr[-3000:]
    by_grader = {part["id"]: part["score"] for part in json.loads(checked.stdout)["parts"]}

    assert by_grader["split_output_rows"] == 1.0, "the half-right answer should earn 1 of 2 points"
    for part in assignment.parts:
        if part.kind != "manual":
            assert by_nbgrader[part.id] == pytest.approx(by_grader[part.id]), (
                f"{part.id}: nbgrader gave {by_nbgrader[part.id]}, the grader {by_grader[part.id]}"
            )
    graded = nbformat.read(
        tmp_path / "autograded" / "student-1" / assignment.id / assignment.notebook, as_version=4
    )
    outputs = json.dumps([cell.get("outputs", []) for cell in graded.cells])
    assert "all public tests passed" in outputs and "LEAK" not in outputs, (
        "what the student's code printed during the hidden check reached the graded notebook"
    )


SEED_FIGURES_SHOWN = {
    "01_shapes": [
        "sum +0.160",
        "sum +0.840",
        "sum -0.475",  # seed 001: the second layer's three sums
        "bends at [0.3, 0.7]",
        "bends at [0.467, 0.7, 0.767, 0.933]",  # seed 001: one layer's bends, then two layers'
        "edge: [1, 2, 9]",
        "edge: [7, 8, 11, 12]",
        "[2, 3, 4, 5, 7, 8, 10, 11]",
        "stage 2, 8 places above 2",
        "stage 3, 5 places above 0",  # seed 001: the cup's three stages
    ],
}


@pytest.mark.parametrize("assignment_id", sorted(SEED_FIGURES_SHOWN))
def test_seed_figures_are_computed_in_the_solutions(assignment_id):
    """The executed solution's outputs (not its text) show each seed figure: the notebook computes it."""
    assignment = COURSE.assignment(assignment_id)
    notebook = nbformat.read(ROOT / "solutions" / assignment_id / assignment.notebook, as_version=4)
    outputs = "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
    missing = [figure for figure in SEED_FIGURES_SHOWN[assignment_id] if figure not in outputs]
    assert not missing, f"not in the outputs of solutions/{assignment_id}: {missing}"


# --------------------------------------------------------------------------------------- widget


def test_explorer_shows_the_running_example():
    W = np.array([[0.5, -1.0, 2.0], [-0.25, 0.5, 1.0], [1.0, 0.25, -0.5]])
    b = np.array([3.0, -1.0, -4.0])
    explorer = forward_pass_explorer(W, b, [2.0, 4.0, 1.0])
    state = explorer.state()
    np.testing.assert_allclose(state["products"], W * np.array([2.0, 4.0, 1.0]))
    np.testing.assert_allclose(state["z"], [2.0, 1.5, -1.5])
    np.testing.assert_allclose(state["h"], [2.0, 1.5, 0.0])
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "unit 3" in bundle["text/plain"] and "-1.5" in bundle["text/plain"]
    assert "<table" in bundle["text/html"]


def test_explorer_follows_its_sliders():
    explorer = forward_pass_explorer([[2.0, -1.0, 0.5], [0.0, 1.0, 1.0]], [1.0, -2.0], [1.0, 0.0, 2.0])
    assert len(explorer.sliders) == 3
    explorer.sliders[1].value = 4.0
    assert explorer.state()["z"][0] == 0.0
    assert "x2 = +4" in explorer.table.value


@pytest.mark.parametrize("d_out,d_in", [(1, 1), (7, 3), (2, 73)])
def test_layer_state_shapes_and_text(d_out, d_in):
    rng = np.random.default_rng(d_out * 100 + d_in)
    W, b, x = rng.normal(size=(d_out, d_in)), rng.normal(size=d_out), rng.normal(size=d_in)
    state = layer_state(W, b, x)
    assert state["products"].shape == (d_out, d_in)
    np.testing.assert_allclose(state["z"], W @ x + b)
    assert len(state_text(state).splitlines()) == d_out + 1


@pytest.mark.parametrize(
    "W,b,x,message",
    [
        ([[1.0, 2.0]], [1.0], [1.0, 2.0, 3.0], "x should have shape (2,)"),
        ([[1.0, 2.0]], [1.0, 2.0], [1.0, 2.0], "b should have shape (1,)"),
        ([1.0, 2.0], [1.0], [1.0], "W should be a matrix"),
        ([[1.0, float("nan")]], [1.0], [1.0, 2.0], "finite"),
    ],
)
def test_explorer_rejects_bad_shapes_clearly(W, b, x, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        forward_pass_explorer(W, b, x)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"slider_range": -1.0}, "slider_range should be a positive number"),
        ({"slider_range": 1.0}, r"covering the starting x \(max \|x\| = 9\)"),
        ({"step": 0.0}, "step should be a positive number"),
        ({"step": float("nan")}, "step should be a positive number"),
    ],
)
def test_explorer_rejects_sliders_that_cannot_show_the_input(options, message):
    with pytest.raises(ValueError, match=message):
        forward_pass_explorer([[1.0, 2.0]], [0.5], [9.0, 0.0], **options)


def test_explorer_table_cells_are_padded():
    """Every header and number has its own padded, bordered cell, so adjacent values never run together."""
    html = state_html(layer_state([[-4.0, -1.5]], [0.5], [1.0, 1.0]))
    cells = html.count("<td") + html.count("<th")
    assert cells == html.count(CELL) == 2 * (1 + 2 + 4)
    assert "padding" in CELL
