"""autograde's gradebook writes, with a stand-in for the isolated grader (fast, no student code runs).

The stand-in reads each submitted notebook and grades an answer cell by a marker in its source,
so these tests exercise exactly the driver: discovery, the gradebook layout, idempotency,
interruption, manual parts, malformed notebooks and export. tests/test_autograde.py runs the
real sandboxed grader.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
from pathlib import Path

import pytest
from conftest import gradebook_dump
from test_autograde import db_dump, demo_run  # noqa: F401  (the shared demo class, graded once)

from grader import autograde as ag
from grader import export, gradebook as gbm
from grader.course import load_course
from grader.grading import grade_part
from grader.result import PartResult, Status
from grader.submission import SubmissionResult

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.xdist_group("autograde_fake")

REFERENCE_LINE = "return X @ W.T + b  # reference implementation line"


# --- a small course on disk --------------------------------------------------------------------


def _cell(cell_type, source, **nbgrader):
    cell = {
        "cell_type": cell_type,
        "metadata": {"nbgrader": {"schema_version": 3, **nbgrader}},
        "source": source,
    }
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def notebook_for(assignment, answers: dict[str, str] | None = None, source: bool = False) -> dict:
    """An nbgrader notebook with one answer and one test cell per part (source=True: instructor's)."""
    answers = answers or {}
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "source": "import numpy as np",
            "outputs": [],
            "execution_count": None,
        }
    ]
    for part in assignment.parts:
        if part.kind == "manual":
            text = (
                "### BEGIN SOLUTION\nModel answer.\n### END SOLUTION"
                if source
                else answers.get(part.id, "YOUR ANSWER HERE")
            )
            cells.append(
                _cell(
                    "markdown",
                    text,
                    solution=True,
                    grade=True,
                    locked=False,
                    points=part.points,
                    grade_id=part.id,
                )
            )
            if source:
                cells.append(
                    _cell(
                        "markdown",
                        "- 1 point: mentions the mark scheme",
                        solution=False,
                        grade=False,
                        locked=True,
                        grade_id=f"{part.id}_mark_scheme",
                    )
                )
            continue
        body = (
            f"def {part.name}(X, W, b):\n    ### BEGIN SOLUTION\n    {REFERENCE_LINE}\n    ### END SOLUTION"
            if source
            else answers.get(
                part.id, f"def {part.name}(*args):\n    raise NotImplementedError('Task {part.task}')"
            )
        )
        cells.append(
            _cell("code", body, solution=True, grade=False, locked=False, grade_id=f"answer_{part.id}")
        )
        tests = "assert True\n"
        if source:
            tests += (
                "### BEGIN HIDDEN TESTS\nfrom grader.inline import assert_part\n"
                f"assert_part('{assignment.key(part)}', {part.name})\n### END HIDDEN TESTS"
            )
        cells.append(
            _cell(
                "code", tests, solution=False, grade=True, locked=True, points=part.points, grade_id=part.id
            )
        )
    for index, cell in enumerate(cells):
        cell["id"] = f"cell-{index}"
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def make_course(root: Path, assignments=("01_shapes", "02_parameters")) -> Path:
    """A course directory: course.yml, source notebooks and three students' submissions."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "course.yml", root / "course.yml")
    course = load_course(root / "course.yml")
    for assignment_id in assignments:
        assignment = course.assignment(assignment_id)
        write_json(
            root / "source" / assignment_id / assignment.notebook, notebook_for(assignment, source=True)
        )
    for student, style in (("ada", "good"), ("bob", "stub"), ("cy", "mixed")):
        for assignment_id in assignments:
            assignment = course.assignment(assignment_id)
            answers = {}
            for index, part in enumerate(assignment.parts):
                if part.kind == "manual":
                    answers[part.id] = (
                        "Because the ReLU clips negatives." if style != "stub" else "YOUR ANSWER HERE"
                    )
                elif style == "good" or (style == "mixed" and index % 2 == 0):
                    answers[part.id] = f"def {part.name}(X, W, b):\n    return X @ W.T + b  # GOOD"
                elif style == "mixed":
                    answers[part.id] = f"def {part.name}(X, W, b):\n    return X @ W.T  # WRONG"
            folder = root / "submitted" / student / assignment_id
            write_json(folder / assignment.notebook, notebook_for(assignment, answers))
            (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC\n")
    return root


# --- a stand-in for grader.submission ----------------------------------------------------------


def FakeResult(course, assignment_id, path, student, parts, answers, error=None) -> SubmissionResult:
    return SubmissionResult(str(path), assignment_id, student, parts, error, answers=answers)


class FakeGrader:
    """grade_submission's signature; `interrupt_after` raises KeyboardInterrupt like a killed run."""

    def __init__(self, interrupt_after: int | None = None):
        self.calls, self.interrupt_after = [], interrupt_after

    def __call__(self, course, assignment_id, path, student, secret, sandbox):
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.calls.append((student, assignment_id))
        assignment = course.assignment(assignment_id)
        data = json.loads(Path(path).read_text())  # a malformed notebook raises: autograde records it
        sources = {
            c["metadata"]["nbgrader"]["grade_id"].removeprefix("answer_"): c["source"]
            for c in data["cells"]
            if c.get("metadata", {}).get("nbgrader", {}).get("solution")
        }
        parts = []
        for part in assignment.parts:
            source = sources.get(part.id, "")
            if part.kind == "manual":  # the real rule for free text: blank is 0, the rest waits
                parts.append(grade_part(assignment, part, source, student, secret))
            elif "GOOD" in source:
                parts.append(PartResult(part.id, part.points, part.points, Status.PASSED, "Correct."))
            elif "WRONG" in source:
                parts.append(
                    PartResult(
                        part.id,
                        0.0,
                        part.points,
                        Status.FAILED,
                        "Expected shape (7, 3); the bias is missing.",
                        ("missing-bias",),
                    )
                )
            else:
                parts.append(
                    PartResult(
                        part.id,
                        0.0,
                        part.points,
                        Status.FAILED,
                        f"Task {part.task} is not implemented yet.",
                        ("not-implemented",),
                    )
                )
        return FakeResult(course, assignment_id, path, student, parts, sources)


class FakeSandbox:
    warnings: list[str] = []

    def __init__(self, limits):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def run_fake(course_dir: Path, grader=None, **kwargs):
    course = load_course(course_dir / "course.yml")
    grader = grader or FakeGrader()
    outcomes = ag.autograde(
        course,
        course_dir,
        grade=grader,
        sandbox_factory=FakeSandbox,
        secret="s3cret",
        progress_stream=open(course_dir / "progress.log", "a"),
        **kwargs,
    )
    return outcomes, grader


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course_dir = make_course(tmp_path_factory.mktemp("course"))
    outcomes, grader = run_fake(course_dir)
    return course_dir, outcomes, grader


# --- tests ---------------------------------------------------------------------------------------


def test_one_grade_cell_per_part_with_points_and_solution_cells(graded):
    course_dir, _, _ = graded
    course = load_course(course_dir / "course.yml")
    from nbgrader.api import Gradebook

    with Gradebook(gbm.default_db_url(course_dir), course_id=course.course_id) as gradebook:
        for assignment_id in ("01_shapes", "02_parameters"):
            assignment = course.assignment(assignment_id)
            notebook = gradebook.find_notebook(Path(assignment.notebook).stem, assignment_id)
            cells = {c.name: (c.max_score, c.cell_type) for c in notebook.grade_cells}
            assert cells == {
                p.id: (p.points, "markdown" if p.kind == "manual" else "code") for p in assignment.parts
            }
            solutions = {c.name for c in notebook.solution_cells}
            assert solutions == {p.id if p.kind == "manual" else f"answer_{p.id}" for p in assignment.parts}
            sources = {c.name: c for c in notebook.source_cells}
            first_auto = next(p for p in assignment.parts if p.kind != "manual")
            assert (
                "BEGIN HIDDEN TESTS" in sources[first_auto.id].source
            )  # kept for autograding, as nbgrader does
            assert REFERENCE_LINE not in sources[f"answer_{first_auto.id}"].source  # solution cleared
            assert sources[first_auto.id].locked and sources[first_auto.id].checksum


def test_scores_manual_flags_and_comments_match_results(graded):
    course_dir, outcomes, _ = graded
    assert len(outcomes) == 6 and all(o.graded for o in outcomes)
    dump = {(row["student"], row["assignment"]): row for row in gradebook_dump(course_dir)}
    assert len(dump) == 6
    course = load_course(course_dir / "course.yml")
    for outcome in outcomes:
        row = dump[(outcome.job.student, outcome.job.assignment)]
        grades = {name: (auto, manual, needs) for name, auto, manual, _, needs in row["grades"]}
        comments = {name: auto for name, auto, _ in row["comments"]}
        results = json.loads(
            (
                course_dir / "autograded" / outcome.job.student / outcome.job.assignment / "results.json"
            ).read_text()
        )
        for part in results["parts"]:
            kind = course.assignment(outcome.job.assignment).part(part["id"]).kind
            if kind == "manual" and outcome.job.student == "bob":  # left blank: 0, nothing to grade
                assert grades[part["id"]] == (0.0, None, False)
                assert comments[part["id"]].endswith(f"0/{part['max_score']:g}: {gbm.NO_ANSWER}")
            elif kind == "manual":
                assert grades[part["id"]] == (None, None, True)
            else:
                assert grades[part["id"]] == (part["score"], None, False)
                assert part["feedback"] in comments[f"answer_{part['id']}"]
    cy = dump[("cy", "01_shapes")]
    assert any("missing-bias" in (text or "") for _, text, _ in cy["comments"])
    bob_manual = dict((name, text) for name, text, _ in dump[("bob", "01_shapes")]["comments"])
    assert bob_manual["relu_zero_reason"] == f"[failed] 0/1: {gbm.NO_ANSWER}"


def test_rerun_is_idempotent_and_skips_unchanged(graded):
    course_dir, _, _ = graded
    before = gradebook_dump(course_dir)
    outcomes, grader = run_fake(course_dir)
    assert grader.calls == [] and not any(o.graded for o in outcomes)
    assert gradebook_dump(course_dir) == before
    outcomes, grader = run_fake(course_dir, force=True)
    assert len(grader.calls) == 6
    assert gradebook_dump(course_dir) == before


def test_a_new_secret_regrades_everything(tmp_path):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    run_fake(course_dir)
    course = load_course(course_dir / "course.yml")
    outcomes = ag.autograde(
        course,
        course_dir,
        grade=FakeGrader(),
        sandbox_factory=FakeSandbox,
        secret="another secret",
        progress_stream=open(course_dir / "progress.log", "a"),
    )
    assert all(o.graded for o in outcomes) and len(outcomes) == 3


def test_sandbox_that_cannot_start_is_one_clear_error(tmp_path):
    class BrokenSandbox(FakeSandbox):
        def __enter__(self):
            raise OSError("no fork for you")

    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    course = load_course(course_dir / "course.yml")
    with pytest.raises(ag.AutogradeError, match="could not start: no fork for you"):
        ag.autograde(
            course,
            course_dir,
            grade=FakeGrader(),
            sandbox_factory=BrokenSandbox,
            secret="s",
            progress_stream=open(course_dir / "progress.log", "a"),
        )


def test_interrupted_run_then_rerun_equals_one_clean_run(graded, tmp_path):
    clean_dir, _, _ = graded
    course_dir = make_course(tmp_path / "course")
    with pytest.raises(KeyboardInterrupt):
        run_fake(course_dir, FakeGrader(interrupt_after=2), workers=1)
    partial = gradebook_dump(course_dir)
    assert 1 <= len(partial) <= 3
    outcomes, grader = run_fake(course_dir)
    assert len(grader.calls) == 6 - len(partial)  # nothing graded twice, nothing lost
    assert gradebook_dump(course_dir) == gradebook_dump(clean_dir)


def test_results_missing_from_gradebook_are_regraded(graded, tmp_path):
    course_dir, _, _ = graded
    other_db = f"sqlite:///{tmp_path / 'other.db'}"
    outcomes, grader = run_fake(course_dir, db_url=other_db, students=["ada"])
    assert len(grader.calls) == 2 and all(o.graded for o in outcomes)


def test_manual_score_is_kept_and_changed_notebook_is_flagged(tmp_path):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    run_fake(course_dir)
    course = load_course(course_dir / "course.yml")
    from nbgrader.api import Gradebook

    with Gradebook(gbm.default_db_url(course_dir), course_id=course.course_id) as gradebook:
        grade = gradebook.find_grade("relu_zero_reason", "01_shapes", "01_shapes", "ada")
        grade.manual_score, grade.needs_manual_grade = 1.0, False
        gradebook.db.commit()
    run_fake(course_dir, force=True)
    row = next(r for r in gradebook_dump(course_dir) if r["student"] == "ada")
    assert ("relu_zero_reason", None, 1.0, None, False) in row["grades"]
    path = course_dir / "submitted" / "ada" / "01_shapes" / "01_shapes.ipynb"
    data = json.loads(path.read_text())
    data["cells"][1]["source"] += "\n# edited after grading"
    write_json(path, data)
    outcomes, grader = run_fake(course_dir)
    assert grader.calls == [("ada", "01_shapes")]
    row = next(r for r in gradebook_dump(course_dir) if r["student"] == "ada")
    assert ("relu_zero_reason", None, 1.0, None, True) in row["grades"]


def test_malformed_notebook_is_a_recorded_zero_and_the_batch_goes_on(tmp_path):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    (course_dir / "submitted" / "bob" / "01_shapes" / "01_shapes.ipynb").write_text("{ not json")
    outcomes, grader = run_fake(course_dir)
    assert len(outcomes) == 3
    bob = next(o for o in outcomes if o.job.student == "bob")
    assert bob.result["score"] == 0 and "JSONDecodeError" in bob.result["error"]
    row = next(r for r in gradebook_dump(course_dir) if r["student"] == "bob")
    assert all(auto in (0.0, None) for _, auto, *_ in row["grades"])
    assert all("could not be graded" in (text or "") for _, text, _ in row["comments"])
    ada = next(o for o in outcomes if o.job.student == "ada")
    assert all(p["score"] == p["max_score"] for p in ada.result["parts"] if p["status"] != "manual")
    _, grader = run_fake(course_dir)
    assert grader.calls == [("bob", "01_shapes")]  # the grader failed there, not the notebook: tried again


def test_unknown_folder_and_missing_notebook_are_reported(tmp_path):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    (course_dir / "submitted" / "ada" / "99_nope").mkdir()
    (course_dir / "submitted" / "dee" / "01_shapes").mkdir(parents=True)
    write_json(course_dir / "submitted" / "dee" / "01_shapes" / "._01_shapes.ipynb", {"cells": []})
    (course_dir / "submitted" / "eve" / "01_shapes" / "01_shapes.ipynb").mkdir(parents=True)
    outcomes, _ = run_fake(course_dir)
    log = (course_dir / "progress.log").read_text()
    assert "99_nope" in log and "not an assignment" in log
    assert "instead of" not in log  # neither a hidden file nor a folder is taken for the notebook
    eve = next(o for o in outcomes if o.job.student == "eve")
    assert eve.result["score"] == 0 and eve.result["error"]
    dee = next(o for o in outcomes if o.job.student == "dee")
    assert dee.result["score"] == 0 and dee.result["error"]


def test_missing_source_notebook_stops_before_grading_anyone(tmp_path):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    (course_dir / "source" / "01_shapes" / "01_shapes.ipynb").unlink()
    with pytest.raises(ag.AutogradeError, match="source/01_shapes/01_shapes.ipynb is missing"):
        run_fake(course_dir)
    assert not (course_dir / "gradebook.db").exists()


def test_unknown_assignment_argument_is_a_clear_error(tmp_path):
    from grader.course import CourseError

    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    with pytest.raises(CourseError, match="unknown assignment '07_x'"):
        run_fake(course_dir, assignment_ids=["07_x"])


def test_export_csv_matches_gradebook(graded, tmp_path):
    course_dir, _, _ = graded
    out = tmp_path / "grades.csv"

    class Args:
        csv, db, course = str(out), None, str(course_dir)

    assert export.run(Args) == 0
    with out.open() as handle:
        table = list(csv.DictReader(handle))
    assert [row["student"] for row in table] == ["ada", "bob", "cy"]
    assert {name.split(".")[0] for name in table[0]} == {
        "student",
        "01_shapes",
        "02_parameters",
        "total",
        "needs_manual_grade",
    }  # only graded assignments
    dump = gradebook_dump(course_dir)
    course = load_course(course_dir / "course.yml")
    for row in dump:
        line = next(r for r in table if r["student"] == row["student"])
        total = 0.0
        for name, auto, manual, extra, _ in row["grades"]:
            score = manual if manual is not None else (auto or 0.0)
            assert float(line[f"{row['assignment']}.{name}"]) == score
            total += score
        assert float(line[f"{row['assignment']}.total"]) == pytest.approx(total)
    for line in table:
        assert float(line["total"]) == pytest.approx(
            float(line["01_shapes.total"]) + float(line["02_parameters.total"])
        )
    ada = next(r for r in table if r["student"] == "ada")
    auto_points = sum(p.points for a in course.assignments[:2] for p in a.parts if p.kind != "manual")
    assert float(ada["total"]) == auto_points
    assert int(ada["needs_manual_grade"]) == sum(
        p.kind == "manual" for a in course.assignments[:2] for p in a.parts
    )


def test_a_file_that_is_not_a_database_is_a_one_line_error(tmp_path):
    junk = tmp_path / "gradebook.db"
    junk.write_text("these are not the grades you are looking for\n")
    with pytest.raises(gbm.GradebookError) as raised:
        gbm.open_gradebook(f"sqlite:///{junk}", "course")
    message = str(raised.value)
    assert "not a database" in message and str(junk) in message and "\n" not in message


@pytest.mark.parametrize(
    "damage",
    [
        '{"version": 1, "parts": [1, 2]}',
        '{"version": 1, "parts": [], "score": "10"}',
        "[" * 100_000,
        "\xff\xfe",
    ],
)
def test_a_damaged_results_file_means_grade_again(tmp_path, damage):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    run_fake(course_dir)
    (course_dir / "autograded" / "bob" / "01_shapes" / ag.RESULTS_FILE).write_text(damage, encoding="latin-1")
    outcomes, grader = run_fake(course_dir)
    assert grader.calls == [("bob", "01_shapes")]
    assert next(o for o in outcomes if o.job.student == "bob").result["max_score"] > 0


def test_an_unreadable_submissions_folder_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))

    def refuse(*_, **__):
        raise PermissionError(13, "Permission denied", str(course_dir / "submitted" / "bob"))

    monkeypatch.setattr(ag, "find_submissions", refuse)

    parser = argparse.ArgumentParser()
    ag.add_arguments(parser)
    assert ag.run(parser.parse_args(["--course", str(course_dir)])) == 2
    err = capsys.readouterr().err
    assert err.startswith("autograde: ") and "Permission denied" in err and err.count("\n") == 1


@pytest.mark.slow
@pytest.mark.xdist_group("demo")
def test_the_demo_leaves_only_answers_with_content_waiting(request):
    """Blank free-text answers are scored 0 with "no answer"; only written ones wait for a person."""
    directory, done = request.getfixturevalue("demo_run")
    assert "Gradebook check" in done.stdout, done.stderr[-3000:]  # graded the class (its verdicts: test_demo)
    course = load_course(directory / "course.yml")
    waiting = blank = 0
    for row in db_dump(directory):
        assignment = course.assignment(row["assignment"])
        notebook = directory / "submitted" / row["student"] / assignment.id / assignment.notebook
        answers = {
            cell["metadata"]["nbgrader"]["grade_id"]: "".join(cell["source"])
            for cell in json.loads(notebook.read_text())["cells"]
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        }
        comments = {name: text for name, text, _ in row["comments"]}
        for name, auto, manual, _, needs in row["grades"]:
            if assignment.part(name).kind != "manual":
                continue
            if gbm.is_blank_answer(answers.get(name)):
                blank += 1
                assert (auto, needs) == (0.0, False) and gbm.NO_ANSWER in comments[name], (
                    row["student"],
                    name,
                )
            else:
                waiting += 1
                assert (auto, needs) == (None, True), (row["student"], name)
    assert blank and waiting  # the demo class holds both kinds
    assert f"({waiting} free-text answers wait for manual grading)" in done.stdout


def test_one_setting_picks_the_gradebook_for_autograde_export_and_nbgrader(tmp_path, monkeypatch):
    import runpy

    from traitlets.config import Config

    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    shutil.copy(REPO / "nbgrader_config.py", course_dir / "nbgrader_config.py")
    other = f"sqlite:///{tmp_path / 'shared.db'}"
    monkeypatch.delenv(gbm.GRADEBOOK_ENV, raising=False)
    assert gbm.gradebook_url(course_dir) == gbm.default_db_url(course_dir)
    monkeypatch.setenv(gbm.GRADEBOOK_ENV, other)
    assert gbm.gradebook_url(course_dir) == other
    assert gbm.gradebook_url(course_dir, "sqlite:///explicit.db") == "sqlite:///explicit.db"  # --db wins
    config = Config()
    runpy.run_path(str(course_dir / "nbgrader_config.py"), {"get_config": lambda: config})
    assert config.CourseDirectory.db_url == other  # nbgrader's CLI and formgrader read this

    class Args:
        course, assignments, student, workers, db, force, dask = (
            str(course_dir),
            [],
            [],
            1,
            None,
            False,
            None,
        )

    seen = {}
    with monkeypatch.context() as patched:
        patched.setattr(ag, "autograde", lambda *args, **kwargs: seen.update(kwargs) or [])
        assert ag.run(Args) == 0
    assert seen["db_url"] == other  # what autograde's command line hands on
    run_fake(course_dir, db_url=gbm.gradebook_url(course_dir))
    assert not (course_dir / "gradebook.db").exists()
    out = tmp_path / "grades.csv"

    class ExportArgs:
        csv, db, course = str(out), None, str(course_dir)

    assert export.run(ExportArgs) == 0
    assert [row["student"] for row in csv.DictReader(out.open())] == ["ada", "bob", "cy"]


def test_passwords_are_hidden_from_every_gradebook_message():
    url = "postgresql://grader:Hunter2-secret@127.0.0.1:1/layers"
    assert gbm.redact_url(url) == "postgresql://grader:***@127.0.0.1:1/layers"
    assert "Hunter2" not in gbm.redact_url("postgresql//grader:Hunter2-secret@host/db")  # unparsable
    with pytest.raises(gbm.GradebookError) as raised:
        gbm.open_gradebook(url, "course")
    message = str(raised.value)
    assert "Hunter2" not in message and "grader:***@127.0.0.1:1/layers" in message and "\n" not in message
    with pytest.raises(gbm.GradebookError) as raised:
        gbm.open_gradebook("postgresql//grader:Hunter2-secret@host/db", "course")
    assert "Hunter2" not in str(raised.value)
    error = RuntimeError("could not connect to postgresql://grader:Hunter2-secret@db/layers\nSQL: ...")
    assert gbm.describe_error(error) == "RuntimeError: could not connect to postgresql://grader:***@db/layers"
