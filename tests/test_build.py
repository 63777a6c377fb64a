"""`python -m grader build`: generated notebooks in sync, clean, and clear errors on bad sources."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbgrader.utils import compute_checksum, is_grade, is_locked, is_solution

from grader import build
from grader.build.builder import Builder
from grader.build.pipelines import assignment_steps, solution_steps
from grader.build.steps import execute_notebook
from grader.build.digest import BUILD_KEY
from grader.build.source import GRADER_IMPORT
from grader.build.stubs import task_stub
from grader.build.tables import COURSE_TABLE_MARKERS, course_table
from grader.course import load_course

ROOT = Path(__file__).resolve().parents[1]
COURSE = load_course(ROOT / "course.yml")
BUILT = list(COURSE.assignments)
IDS = [a.id for a in BUILT]


def read(kind: str, assignment):
    return nbformat.read(ROOT / kind / assignment.id / assignment.notebook, as_version=4)


def solution_lines(source_cell) -> list[str]:
    """Distinctive lines inside the cell's BEGIN/END SOLUTION region."""
    lines, inside = [], False
    for line in source_cell.source.split("\n"):
        if "BEGIN SOLUTION" in line:
            inside = True
        elif "END SOLUTION" in line:
            inside = False
        elif inside and len(line.strip()) >= 12:
            lines.append(line.strip())
    return lines


def run_build(root: Path, *arguments: str, check: bool = False) -> int:
    args = argparse.Namespace(assignments=list(arguments), check=check, force=False, root=root)
    return build.run(args)


@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_every_course_assignment_has_its_source_release_and_solution(assignment):
    for kind in ("source", "assignments", "solutions"):
        path = ROOT / kind / assignment.id / assignment.notebook
        assert path.is_file(), f"{path.relative_to(ROOT)} is missing (course.yml lists {assignment.id})"


@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_points_and_the_table_of_tasks_come_from_course_yml(assignment):
    source, released = read("source", assignment), read("assignments", assignment)
    assert not [
        cell.metadata.nbgrader["grade_id"]
        for cell in source.cells
        if "points" in cell.metadata.get("nbgrader", {})
    ], "source notebooks state no points: the build writes them from course.yml"
    points = {
        cell.metadata.nbgrader["grade_id"]: float(cell.metadata.nbgrader["points"])
        for cell in released.cells
        if is_grade(cell)
    }
    assert points == {part.id: float(part.points) for part in assignment.parts}
    intro = next(cell.source for cell in released.cells if "| task | what | points |" in cell.source)
    rows = [line for line in intro.split("\n") if re.match(r"\| \d+\.\d+ \|", line)]
    assert [(row.split("|")[1].strip(), row.split("|")[-2].strip()) for row in rows] == [
        (part.task, f"{part.points:g}") for part in assignment.parts
    ]
    assert f"| | **total** | **{assignment.max_score:g}** |" in intro
    assert "PARTS TABLE" not in json.dumps(released)


def test_readme_course_table_is_course_yml():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    begin, end = COURSE_TABLE_MARKERS
    assert begin in readme and end in readme, "README.md's course table is written by the build"
    assert f"{begin}\n{course_table(COURSE)}\n{end}" in readme
    for assignment in COURSE.assignments:
        assert f"| `{assignment.id}` | {assignment.title} |" in course_table(COURSE)


def test_build_check_passes_on_the_committed_tree():
    result = subprocess.run(
        [sys.executable, "-m", "grader", "build", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"assignments/ or solutions/ are out of date:\n{result.stderr}"
    assert "up to date" in result.stdout


@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_solutions_are_clean_executed_and_stamped(assignment):
    notebook = read("solutions", assignment)
    text = (ROOT / "solutions" / assignment.id / assignment.notebook).read_text(encoding="utf-8")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "assert_part", "grader.inline"):
        assert marker not in text, f"solutions/{assignment.id} contains {marker!r}"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not any(GRADER_IMPORT.match(line) for line in cell.source.split("\n")), cell.source
            assert cell.source.strip() == "" or cell.execution_count is not None, (
                "solutions are stored executed"
            )
            assert not [o for o in cell.outputs if o.output_type == "error"], f"error output in {cell.id}"
    assert notebook.metadata[BUILD_KEY]["source_digest"].startswith("sha256:")
    assert "widgets" not in notebook.metadata
    manual = [part for part in assignment.parts if part.kind == "manual"]
    for part in manual:
        assert f"**Mark scheme** (task {part.task}" in text, f"mark scheme of {part.id} not shown"
        assert f"**Model answer** (task {part.task})" in text
    figures = [
        o
        for c in notebook.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "image/png" in o.get("data", {})
    ]
    assert figures, "the solution should store its figures"


@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_released_notebooks_hide_solutions_tests_and_mark_schemes(assignment):
    released = read("assignments", assignment)
    source = read("source", assignment)
    text = json.dumps(released)
    for marker in (
        "BEGIN SOLUTION",
        "END SOLUTION",
        "HIDDEN TESTS",
        "assert_part",
        "grader.inline",
        "mark-scheme",
    ):
        assert marker not in text, f"assignments/{assignment.id} contains {marker!r}"
    by_id = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in released.cells}
    for cell in source.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        for line in solution_lines(cell):
            released_lines = {text.strip() for text in by_id[grade_id].source.split("\n")}
            assert line not in released_lines, (
                f"solution line leaked into assignments/{assignment.id}: {line!r}"
            )
    for part in assignment.parts:
        if part.kind == "function":
            assert f'raise NotImplementedError("Task {part.task}: ' in by_id[f"answer_{part.id}"].source
        elif part.kind in ("value", "symbolic"):
            assert f"{part.name} = None  # Task {part.task}: " in by_id[f"answer_{part.id}"].source
        else:
            assert by_id[part.id].source == "YOUR ANSWER HERE"
            assert f"{part.id}_mark_scheme" not in by_id
    assert all(cell.get("outputs", []) == [] for cell in released.cells), "released notebooks have no outputs"


@pytest.mark.parametrize("assignment", BUILT, ids=IDS)
def test_released_checksums_are_what_nbgrader_computes(assignment):
    released = read("assignments", assignment)
    graded = [cell for cell in released.cells if is_grade(cell) or is_solution(cell) or is_locked(cell)]
    assert len(graded) >= len(assignment.parts) * 2 - sum(p.kind == "manual" for p in assignment.parts)
    for cell in graded:
        assert cell.metadata.nbgrader["checksum"] == compute_checksum(cell), cell.metadata.nbgrader[
            "grade_id"
        ]
    points = sum(float(cell.metadata.nbgrader["points"]) for cell in released.cells if is_grade(cell))
    assert points == assignment.max_score


def test_task_stubs_name_the_task():
    part = COURSE.assignment("01_shapes").part("relu")
    source = (
        'def relu(Z):\n    """Rectified linear unit.\n\n    More."""\n'
        "    ### BEGIN SOLUTION\n    return Z\n    ### END SOLUTION"
    )
    assert task_stub(part, source) == 'raise NotImplementedError("Task 1.5: Rectified linear unit.")'
    value = COURSE.assignment("01_shapes").part("x2_for_zero_output")
    assert (
        task_stub(value, "### BEGIN SOLUTION\nx2_zero = 4\n### END SOLUTION")
        == "x2_zero = None  # Task 1.9: set x2_zero to your answer"
    )
    symbolic = COURSE.assignment("03_gradients").part("grad_W_expr")
    assert (
        task_stub(
            symbolic, '# Task 3.1: dL/dW "quoted"\n### BEGIN SOLUTION\ndL_dW = "G.T*X"\n### END SOLUTION'
        )
        == "dL_dW = None  # Task 3.1: replace None with your answer (a string)"
    )


# ------------------------------------------------------------------------------ a scratch course


@pytest.fixture
def scratch(tmp_path):
    """A copy of the course with 01_shapes built (as committed), in a temp dir."""
    shutil.copy(ROOT / "course.yml", tmp_path / "course.yml")
    for kind in ("source", "assignments", "solutions"):
        shutil.copytree(ROOT / kind / "01_shapes", tmp_path / kind / "01_shapes")
    return tmp_path


def edit_source(root: Path, change) -> None:
    path = root / "source" / "01_shapes" / "01_shapes.ipynb"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    change(notebook)
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


def cell_with(notebook, grade_id):
    return next(
        cell for cell in notebook["cells"] if cell["metadata"].get("nbgrader", {}).get("grade_id") == grade_id
    )


def errors_of(capsys, root, check=True) -> str:
    assert run_build(root, "01_shapes", check=check) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_scratch_copy_is_up_to_date(scratch, capsys):
    assert run_build(scratch, "01_shapes", check=True) == 0, capsys.readouterr().err


def test_check_lists_notebooks_out_of_date_after_a_source_edit(scratch, capsys):
    def reword(notebook):
        first = notebook["cells"][0]
        first["source"] = "# A different title\n" + "".join(first["source"]).split("\n", 1)[1]

    edit_source(scratch, reword)
    err = errors_of(capsys, scratch)
    assert "assignments/01_shapes/01_shapes.ipynb" in err and "solutions/01_shapes/01_shapes.ipynb" in err
    assert "python -m grader build" in err


def test_check_notices_a_hand_edited_release(scratch, capsys):
    path = scratch / "assignments" / "01_shapes" / "01_shapes.ipynb"
    path.write_text(path.read_text(encoding="utf-8").replace("Task 1.4", "Task 9.9"), encoding="utf-8")
    assert "assignments/01_shapes/01_shapes.ipynb: differs" in errors_of(capsys, scratch)


def test_course_yml_change_invalidates_the_digest(scratch, capsys):
    course = (scratch / "course.yml").read_text(encoding="utf-8")
    (scratch / "course.yml").write_text(
        course.replace('"Shapes and the forward pass"', '"Shapes"'), encoding="utf-8"
    )
    assert "digest differs" in errors_of(capsys, scratch)


def test_invalid_json_is_a_clear_error(scratch, capsys):
    (scratch / "source" / "01_shapes" / "01_shapes.ipynb").write_text('{"cells": [', encoding="utf-8")
    err = errors_of(capsys, scratch, check=False)
    assert (
        "source/01_shapes/01_shapes.ipynb: " in err and "invalid JSON (" in err and "line 1 column 12" in err
    )


def test_unterminated_solution_region_names_the_cell(scratch, capsys):
    def cut(notebook):
        cell = cell_with(notebook, "answer_relu")
        cell["source"] = "".join(cell["source"]).replace("### END SOLUTION", "")

    edit_source(scratch, cut)
    err = errors_of(capsys, scratch, check=False)
    assert 'grade_id "answer_relu"' in err and "BEGIN SOLUTION" in err and "no matching" in err


def test_part_without_cells_is_a_clear_error(scratch, capsys):
    def drop(notebook):
        notebook["cells"] = [
            c
            for c in notebook["cells"]
            if c["metadata"].get("nbgrader", {}).get("grade_id") not in ("answer_relu", "relu")
        ]

    edit_source(scratch, drop)
    err = errors_of(capsys, scratch)
    assert "part 'relu'" in err and "answer_relu" in err


def test_duplicate_grade_ids_are_a_clear_error(scratch, capsys):
    def duplicate(notebook):
        cell_with(notebook, "relu")["metadata"]["nbgrader"]["grade_id"] = "linear_forward"

    edit_source(scratch, duplicate)
    err = errors_of(capsys, scratch)
    assert "duplicate grade_id 'linear_forward'" in err and "cell" in err


@pytest.mark.parametrize(
    "nbgrader,expected",
    [
        ("x", "metadata.nbgrader should be a JSON object, not 'x'"),
        ({"grade": True, "grade_id": 5}, "nbgrader grade_id should be a string, not 5"),
    ],
)
def test_malformed_nbgrader_metadata_names_the_cell(scratch, capsys, nbgrader, expected):
    def spoil(notebook):
        cell = cell_with(notebook, "relu")
        cell["metadata"]["nbgrader"] = nbgrader
        spoil.number = notebook["cells"].index(cell) + 1

    edit_source(scratch, spoil)
    assert f"cell {spoil.number}: {expected}" in errors_of(capsys, scratch)


def test_grader_import_outside_hidden_tests_is_refused(scratch, capsys):
    def leak(notebook):
        cell = cell_with(notebook, "answer_relu")
        cell["source"] = "from grader.reference.shapes import relu as _r\n" + "".join(cell["source"])

    edit_source(scratch, leak)
    assert "imports grader outside a hidden-test region" in errors_of(capsys, scratch)


def test_points_come_from_course_yml(scratch, capsys):
    def repoint(notebook):
        cell_with(notebook, "relu")["metadata"]["nbgrader"]["points"] = 5
        cell_with(notebook, "linear_forward")["metadata"]["nbgrader"]["points"] = "two"

    edit_source(scratch, repoint)
    assert run_build(scratch, "01_shapes", check=True) == 1  # the source changed, so its digest did
    capsys.readouterr()
    course = load_course(scratch / "course.yml")
    builder = Builder(scratch, course)
    assignment = course.assignment("01_shapes")
    released = nbformat.reads(
        builder.convert(builder.load(assignment), assignment, assignment_steps()), as_version=4
    )
    points = {
        cell.metadata.nbgrader["grade_id"]: float(cell.metadata.nbgrader["points"])
        for cell in released.cells
        if is_grade(cell)
    }
    assert points == {part.id: part.points for part in assignment.parts}


def test_unknown_assignment_is_a_clear_error(capsys):
    assert run_build(ROOT, "99_nothing", check=True) == 1
    assert "unknown assignment '99_nothing'" in capsys.readouterr().err


@pytest.mark.parametrize("check", [True, False])
def test_a_missing_source_notebook_is_an_error(scratch, capsys, check):
    shutil.rmtree(scratch / "source" / "01_shapes")
    err = errors_of(capsys, scratch, check=check)
    assert "source/01_shapes/01_shapes.ipynb: missing, but course.yml lists it" in err


def test_rebuilding_an_unchanged_source_changes_nothing_and_runs_nothing(scratch, capsys):
    generated = [scratch / kind / "01_shapes" / "01_shapes.ipynb" for kind in ("assignments", "solutions")]
    before = [(path.read_bytes(), path.stat().st_mtime_ns) for path in generated]
    assert run_build(scratch, "01_shapes") == 0
    out = capsys.readouterr().out
    assert "executing" not in out and out.count("up to date") == 2, out
    assert [(path.read_bytes(), path.stat().st_mtime_ns) for path in generated] == before


def test_check_lists_extra_source_files_whose_copies_are_missing_or_differ(scratch, capsys):
    (scratch / "source" / "01_shapes" / "layer_sizes.csv").write_text("7,73\n", encoding="utf-8")
    (scratch / "assignments" / "01_shapes" / "layer_sizes.csv").write_text("7,73\n", encoding="utf-8")
    (scratch / "solutions" / "01_shapes" / "layer_sizes.csv").write_text("1,1\n", encoding="utf-8")
    err = errors_of(capsys, scratch)
    assert "solutions/01_shapes/layer_sizes.csv: missing or differs" in err
    assert "assignments/01_shapes/layer_sizes.csv" not in err
    builder = Builder(scratch, load_course(scratch / "course.yml"))
    assert builder.stale_copies(builder.course.assignment("01_shapes")) == {
        scratch / "solutions" / "01_shapes" / "layer_sizes.csv": b"7,73\n"
    }


def test_a_source_without_the_parts_table_region_is_a_clear_error(scratch, capsys):
    def unmark(notebook):
        first = notebook["cells"][0]
        first["source"] = "".join(first["source"]).replace("<!-- BEGIN PARTS TABLE -->", "")

    edit_source(scratch, unmark)
    err = errors_of(capsys, scratch)
    assert "<!-- BEGIN PARTS TABLE -->" in err and "table of tasks and points from course.yml" in err


def test_a_heading_naming_a_task_course_yml_lacks_is_a_clear_error(scratch, capsys):
    def misnumber(notebook):
        notebook["cells"][0]["source"] += "\n\n### Task 1.12 — a task nobody listed"

    edit_source(scratch, misnumber)
    err = errors_of(capsys, scratch)
    assert "heading names task 1.12" in err and "01_shapes tasks 1.1, 1.2" in err


def test_check_and_build_keep_the_readme_course_table_in_step_with_course_yml(scratch, capsys):
    readme = scratch / "README.md"
    readme.write_text(
        "# Course\n\n<!-- BEGIN COURSE TABLE -->\n| stale |\n<!-- END COURSE TABLE -->\n\nMore.\n",
        encoding="utf-8",
    )
    assert "README.md: its course table differs from course.yml" in errors_of(capsys, scratch)
    assert run_build(scratch, "01_shapes") == 0
    assert "README.md: written" in capsys.readouterr().out
    course = load_course(scratch / "course.yml")
    expected = f"<!-- BEGIN COURSE TABLE -->\n{course_table(course)}\n<!-- END COURSE TABLE -->\n\nMore.\n"
    assert readme.read_text(encoding="utf-8") == "# Course\n\n" + expected
    assert run_build(scratch, "01_shapes", check=True) == 0, capsys.readouterr().err


def test_authoring_helper_writes_cells_the_build_accepts(scratch):
    sys.path.insert(0, str(ROOT / "tools" / "notebooks"))
    try:
        from authoring import AuthoringError, SourceNotebook
    finally:
        sys.path.remove(str(ROOT / "tools" / "notebooks"))
    nb = SourceNotebook.open("01_shapes", root=scratch)
    answer = nb.cell("answer_relu").source
    nb.remove("relu")
    nb.remove("answer_relu")
    cells = nb.answer("relu", answer, public="assert relu(np.array([-1.0]))[0] == 0")
    nb.insert_before("answer_to_torch_linear", *cells)
    with pytest.raises(AuthoringError, match="grade_id 'answer_relu' already exists"):
        nb.insert_before("answer_to_torch_linear", *nb.answer("relu", answer))
    with pytest.raises(AuthoringError, match="manual part: write it with manual"):
        nb.answer("relu_zero_reason", "x = 1")
    nb.save()
    course = load_course(scratch / "course.yml")
    builder = Builder(scratch, course)
    notebook = builder.load(course.assignment("01_shapes"))
    test_cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "relu")
    assert "points" not in test_cell.metadata.nbgrader
    assert 'assert_part("01_shapes.relu", relu)' in test_cell.source
    assert len({cell.id for cell in notebook.cells}) == len(notebook.cells)


def test_solutions_run_with_the_cell_timeout_of_course_yml(scratch, monkeypatch):
    seen = []

    class Client:
        def __init__(self, nb, timeout, **options):
            seen.append(timeout)

        def execute(self, **options):
            pass

    monkeypatch.setattr(execute_notebook, "NotebookClient", Client)
    course = load_course(scratch / "course.yml")
    builder = Builder(scratch, course)
    assignment = course.assignment("01_shapes")
    builder.convert(builder.load(assignment), assignment, solution_steps())
    assert seen == [int(course.limits.notebook_timeout_s)]
    assert "c.ExecuteNotebook" not in (ROOT / "nbgrader_config.py").read_text(encoding="utf-8")


def test_the_parts_table_lives_in_a_plain_markdown_cell(scratch, capsys):
    def lock(notebook):
        notebook["cells"][0]["metadata"]["nbgrader"] = {
            "grade": False,
            "solution": False,
            "locked": True,
            "grade_id": "intro",
            "schema_version": 3,
        }

    edit_source(scratch, lock)
    assert "should be a plain markdown cell, not an nbgrader cell" in errors_of(capsys, scratch)
