"""The grading pipeline with a stand-in grader (fast): the executor interface, safe intake, safe
records, and results that follow course.yml. Every hostile case ends with every other student's
grades intact."""

from __future__ import annotations

import argparse
import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from conftest import gradebook_dump
from test_gradebook import FakeGrader, FakeResult, FakeSandbox, make_course, run_fake

from grader import autograde as ag
from grader.course import load_course
from grader.demo import DEMO_SECRET, prepare
from grader.demo_class import CLASS, DemoStudent, write_submissions
from grader.pipeline.executors import LocalExecutor
from grader.pipeline.jobs import Job
from grader.result import PartResult, Status

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.xdist_group("autograde_fake")
SURROGATE, NUL = chr(0xD800), "\x00"


def rows_by_student(course_dir: Path) -> dict[str, dict]:
    return {(row["student"], row["assignment"]): row for row in gradebook_dump(course_dir)}


def outcome_of(outcomes, student: str, assignment: str = "01_shapes"):
    return next(o for o in outcomes if o.job.student == student and o.job.assignment == assignment)


def not_world_readable(path: Path) -> bool:
    return stat.S_IMODE(path.stat().st_mode) & 0o007 == 0


# --- the executor interface -------------------------------------------------------------------


def test_local_executor_grades_one_notebook_and_resolves_a_refused_one(tmp_path):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    course = load_course(course_dir / "course.yml")
    notebook = course_dir / "submitted" / "ada" / "01_shapes" / "01_shapes.ipynb"
    with LocalExecutor(course, "s", workers=2, sandbox_factory=FakeSandbox, grade=FakeGrader()) as executor:
        result = executor.submit(Job.for_notebook("ada", "01_shapes", notebook, "2026-11-30")).result()
        missing = executor.submit(Job.for_notebook("ada", "01_shapes", tmp_path / "gone.ipynb")).result()
    automatic = [p for p in result.parts if p.status != Status.MANUAL]
    assert result.student == "ada" and all(p.score == p.max_score for p in automatic)
    assert result.seconds >= 0 and missing.score == 0 and "gone.ipynb: it does not exist" in missing.error


# --- intake: regular files only ---------------------------------------------------------------


def _attack(course_dir: Path, student: str, how: str) -> None:
    ada = course_dir / "submitted" / "ada" / "01_shapes"
    folder = course_dir / "submitted" / student / "01_shapes"
    if how == "student folder link":
        folder.parent.symlink_to(ada.parent, target_is_directory=True)
        return
    if how == "assignment folder link":
        folder.parent.mkdir(parents=True)
        folder.symlink_to(ada, target_is_directory=True)
        return
    folder.mkdir(parents=True)
    notebook = folder / "01_shapes.ipynb"
    (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC\n")
    if how == "link to the source notebook":
        notebook.symlink_to(course_dir / "source" / "01_shapes" / "01_shapes.ipynb")
    elif how == "link to another student's notebook":
        notebook.symlink_to(ada / "01_shapes.ipynb")
    elif how == "timestamp.txt linked to /etc/shadow":
        notebook.write_bytes((ada / "01_shapes.ipynb").read_bytes())
        (folder / "timestamp.txt").unlink()
        (folder / "timestamp.txt").symlink_to("/etc/shadow")
    elif how == "FIFO":
        os.mkfifo(notebook)
    elif how == "link to /dev/zero":
        notebook.symlink_to("/dev/zero")
    elif how == "oversized file":
        with open(notebook, "wb") as handle:
            handle.truncate(33 * 2**20)
    else:
        raise AssertionError(how)


ATTACKS = {
    "mal": ("link to the source notebook", "symbolic link"),
    "mel": ("link to another student's notebook", "symbolic link"),
    "mia": ("timestamp.txt linked to /etc/shadow", "timestamp.txt: it is a symbolic link"),
    "moe": ("student folder link", "submitted/moe is a symbolic link"),
    "mox": ("assignment folder link", "submitted/mox/01_shapes is a symbolic link"),
    "mud": ("FIFO", "FIFO"),
    "mun": ("link to /dev/zero", "symbolic link"),
    "mya": ("oversized file", "larger than 32 MB"),
}


def test_links_fifos_devices_and_oversized_files_are_recorded_zeros(tmp_path):
    clean = make_course(tmp_path / "clean", assignments=("01_shapes",))
    run_fake(clean)
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    for student, (how, _) in ATTACKS.items():
        _attack(course_dir, student, how)
    outcomes, grader = run_fake(course_dir)
    assert sorted(grader.calls) == [("ada", "01_shapes"), ("bob", "01_shapes"), ("cy", "01_shapes")]
    rows = rows_by_student(course_dir)
    for student, (how, reason) in ATTACKS.items():
        outcome = outcome_of(outcomes, student)
        assert outcome.result["score"] == 0 and reason in outcome.result["error"], (how, outcome.result)
        assert "\n" not in outcome.result["error"]
        assert all(auto in (0.0, None) for _, auto, *_ in rows[(student, "01_shapes")]["grades"]), how
        assert all(reason in (text or "") for _, text, _ in rows[(student, "01_shapes")]["comments"]), how
        graded = course_dir / "autograded" / student / "01_shapes"
        assert sorted(p.name for p in graded.iterdir()) == ["results.json"], how  # no copy of anything
    assert rows_by_student(clean) == {key: row for key, row in rows.items() if key[0] in ("ada", "bob", "cy")}
    for path in [*course_dir.glob("autograded/**/*"), *course_dir.glob("feedback/**/*")]:
        assert not_world_readable(path), path
    assert "root:" not in "".join(p.read_text() for p in course_dir.glob("autograded/*/*/*.*"))
    again, grader = run_fake(course_dir)
    assert grader.calls == [] and not any(o.graded for o in again)  # a refusal is a stable record


def test_a_linked_student_folder_is_a_recorded_zero_when_nobody_else_submitted(tmp_path):
    """Links to a folder, to a file and to nothing: a zero per selected assignment, the reason recorded."""
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes", "02_parameters"))
    submitted = course_dir / "submitted"
    (submitted / "ada").rename(tmp_path / "ada")
    for student in ("bob", "cy"):
        for path in sorted((submitted / student).rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        (submitted / student).rmdir()
    (submitted / "moe").symlink_to(tmp_path / "ada", target_is_directory=True)
    (submitted / "nil").symlink_to(tmp_path / "gone")
    (submitted / "pip").symlink_to(tmp_path / "ada" / "01_shapes" / "timestamp.txt")
    students = ("moe", "nil", "pip")

    outcomes, grader = run_fake(course_dir)  # every assignment the course has a source for
    assert grader.calls == []
    expected = [(s, a) for s in students for a in ("01_shapes", "02_parameters")]
    assert sorted((o.job.student, o.job.assignment) for o in outcomes) == expected
    rows = rows_by_student(course_dir)
    for student, assignment in expected:
        reason = f"submitted/{student} is a symbolic link, not a folder"
        error = outcome_of(outcomes, student, assignment).result["error"]
        assert reason in error and "\n" not in error
        assert all(auto in (0.0, None) for _, auto, *_ in rows[(student, assignment)]["grades"])
        assert all(reason in (text or "") for _, text, _ in rows[(student, assignment)]["comments"])

    only, _ = run_fake(course_dir, assignment_ids=["02_parameters"], force=True)
    assert sorted((o.job.student, o.job.assignment) for o in only) == [(s, "02_parameters") for s in students]
    assert all(o.result["score"] == 0 for o in only)


# --- records: whatever a student's text holds -------------------------------------------------


class HostileTextGrader(FakeGrader):
    """Feedback, errors and answers holding a lone surrogate and NUL, as student code can raise them."""

    def __call__(self, course, assignment_id, path, student, secret, sandbox):
        result = super().__call__(course, assignment_id, path, student, secret, sandbox)
        if student != "bob":
            return result
        parts = [
            PartResult(p.id, p.score, p.max_score, p.status, f"raised ValueError('{SURROGATE}{NUL}<script>')")
            for p in result.parts
        ]
        answers = {key: f"{value}\n{SURROGATE}{NUL}<b>bold</b>" for key, value in result.answers.items()}
        return FakeResult(course, assignment_id, path, student, parts, answers)


def test_surrogates_and_nul_from_a_student_are_stored_safely(tmp_path):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    outcomes, _ = run_fake(course_dir, HostileTextGrader())
    assert not any(o.problem for o in outcomes)
    bob = rows_by_student(course_dir)[("bob", "01_shapes")]
    texts = [text for _, text, _ in bob["comments"] if text]
    assert texts and all(SURROGATE not in text and NUL not in text for text in texts)
    assert any("\ufffd" in text for text in texts)
    page = (course_dir / "feedback" / "bob" / "01_shapes" / "01_shapes.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;" in page and "<script>" not in page and "&lt;b&gt;bold" in page
    record = json.loads((course_dir / "autograded" / "bob" / "01_shapes" / "results.json").read_text())
    assert "\ufffd" in record["parts"][0]["feedback"] and NUL not in json.dumps(record)


def test_a_record_the_gradebook_refuses_is_a_zero_and_the_batch_goes_on(tmp_path, monkeypatch):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    real = ag.gb.record_submission

    def refuse_bob(gradebook, course, result, **kwargs):
        if result.student == "bob" and result.error is None:
            raise ValueError("this record cannot be stored")
        return real(gradebook, course, result, **kwargs)

    monkeypatch.setattr(ag.gb, "record_submission", refuse_bob)
    outcomes, _ = run_fake(course_dir)
    bob = outcome_of(outcomes, "bob")
    assert "cannot be stored" in bob.problem and bob.result["score"] == 0 and bob.result["retry"]
    assert [o.job.student for o in outcomes if o.problem] == ["bob"]
    rows = rows_by_student(course_dir)
    assert all("cannot be stored" in (text or "") for _, text, _ in rows[("bob", "01_shapes")]["comments"])
    ada = outcome_of(outcomes, "ada")
    assert all(p["score"] == p["max_score"] for p in ada.result["parts"] if p["status"] != "manual")


def test_the_exit_status_reports_a_refused_record(tmp_path, monkeypatch, capsys):
    course_dir = make_course(tmp_path / "course", assignments=("01_shapes",))
    outcomes, _ = run_fake(course_dir)
    outcomes[1].problem = "the gradebook refused its record (ValueError: no)"
    monkeypatch.setattr(ag, "autograde", lambda *args, **kwargs: outcomes)

    parser = argparse.ArgumentParser()
    ag.add_arguments(parser)
    assert ag.run(parser.parse_args(["--course", str(course_dir)])) == 1
    err = capsys.readouterr().err
    assert "bob/01_shapes: the gradebook refused its record" in err and "1 submission(s)" in err


# --- results follow course.yml ----------------------------------------------------------------


def _edit_course(course_dir: Path, change) -> None:
    path = course_dir / "course.yml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_a_points_change_regrades_that_assignment_and_shows_the_new_totals(tmp_path):
    course_dir = make_course(tmp_path / "course")
    first, _ = run_fake(course_dir)
    before = outcome_of(first, "ada").result

    def more_points(data):
        shapes = next(a for a in data["assignments"] if a["id"] == "01_shapes")
        part = next(p for p in shapes["parts"] if p["id"] == "linear_forward")
        part["points"] += 4

    _edit_course(course_dir, more_points)
    outcomes, grader = run_fake(course_dir)
    assert sorted(grader.calls) == [("ada", "01_shapes"), ("bob", "01_shapes"), ("cy", "01_shapes")]
    ada = outcome_of(outcomes, "ada")
    assert ada.graded and ada.result["max_score"] == before["max_score"] + 4
    assert ada.result["score"] == before["score"] + 4
    assert f"{before['score'] + 4:g}/{before['max_score'] + 4:g}" in ag.summary_table(outcomes)
    page = (course_dir / "feedback" / "ada" / "01_shapes" / "01_shapes.html").read_text()
    assert f"{before['score'] + 4:g} / {before['max_score'] + 4:g}" in page
    grades = {name: auto for name, auto, *_ in rows_by_student(course_dir)[("ada", "01_shapes")]["grades"]}
    assert grades["linear_forward"] == 7
    _, grader = run_fake(course_dir)
    assert grader.calls == []


def test_a_limits_change_regrades_everything(tmp_path):
    course_dir = make_course(tmp_path / "course")
    run_fake(course_dir)
    _edit_course(course_dir, lambda data: data["limits"].update(part_timeout_s=7))
    outcomes, grader = run_fake(course_dir)
    assert len(grader.calls) == 6 and all(o.graded for o in outcomes)


# --- the real grader: a student's exception message and answer text ----------------------------


@pytest.mark.slow
def test_a_surrogate_and_nul_raised_by_student_code_reach_every_record_safely(tmp_path):
    course_dir = tmp_path / "course"
    prepare(course_dir, REPO)
    course = load_course(course_dir / "course.yml")
    hostile = DemoStudent(
        "zoe",
        "raises a surrogate and NUL",
        "solutions",
        {
            "01_shapes.linear_forward": "def linear_forward(X, W, b):\n"
            "    raise ValueError(chr(0xD800) + chr(0) + '<script>alert(1)</script>')\n",
            "01_shapes.relu_zero_reason": f"Because {SURROGATE}{NUL} <img src=x onerror=alert(1)>",
        },
    )
    ada = next(student for student in CLASS if student.id == "ada")
    write_submissions(course, course_dir, [ada, hostile], ["01_shapes"])
    with open(tmp_path / "progress.log", "w") as stream:
        outcomes = ag.autograde(course, course_dir, workers=1, secret=DEMO_SECRET, progress_stream=stream)
    assert not any(o.problem for o in outcomes) and all(o.graded for o in outcomes)
    zoe = outcome_of(outcomes, "zoe")
    part = next(p for p in zoe.result["parts"] if p["id"] == "linear_forward")
    assert part["score"] == 0 and part["status"] == "error" and "\ufffd" in part["feedback"]
    texts = [text for _, text, _ in rows_by_student(course_dir)[("zoe", "01_shapes")]["comments"] if text]
    assert all(SURROGATE not in text and NUL not in text for text in texts)
    page = (course_dir / "feedback" / "zoe" / "01_shapes" / "01_shapes.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    ada_result = outcome_of(outcomes, "ada").result
    assert all(p["score"] == p["max_score"] for p in ada_result["parts"] if p["status"] not in ("manual",))
