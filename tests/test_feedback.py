"""Feedback pages show the student's answers, scores and feedback, and nothing of the grader's."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

import grader
from grader import feedback
from grader.course import load_course
from grader.gradebook import part_comment
from grader.result import PartResult, Status
from test_gradebook import REFERENCE_LINE, FakeResult, make_course, run_fake

pytestmark = pytest.mark.xdist_group("autograde_fake")
GRADER_DIR = str(Path(grader.__file__).resolve().parent)
FORBIDDEN = (
    "assert_part",
    "BEGIN HIDDEN TESTS",
    "END HIDDEN TESTS",
    REFERENCE_LINE,
    GRADER_DIR,
    "site-packages",
    "mark_scheme",
    "grader.inline",
)


def test_redact_removes_hidden_regions_and_paths():
    text = (
        f"see {GRADER_DIR}/checks/shapes.py line 3\n### BEGIN HIDDEN TESTS\nassert_part('x', f)\n"
        "### END HIDDEN TESTS\nmore /usr/lib/python3/site-packages/numpy/core.py end"
    )
    cleaned = feedback.redact(text)
    assert "assert_part" not in cleaned and GRADER_DIR not in cleaned and "site-packages" not in cleaned
    assert cleaned.startswith("see ") and cleaned.rstrip().endswith("end") and "[hidden]" in cleaned


def test_redact_keeps_student_code_but_drops_solution_markers():
    code = "def relu(Z):\n    ### BEGIN SOLUTION\n    return np.maximum(Z, 0)\n    ### END SOLUTION\n"
    assert feedback.redact(code) == "def relu(Z):\n    return np.maximum(Z, 0)\n"


def test_page_shows_answers_scores_misconceptions_and_escapes_html():
    course = load_course()
    assignment = course.assignment("01_shapes")
    parts = [
        PartResult(
            p.id,
            0.0,
            p.points,
            Status.MANUAL if p.kind == "manual" else Status.FAILED,
            "manual" if p.kind == "manual" else f"Expected shape (7, 3) <b>; see {GRADER_DIR}/x.py",
            () if p.kind == "manual" else ("missing-bias",),
        )
        for p in assignment.parts
    ]
    answers = {
        "linear_forward": "def linear_forward(X, W, b):\n    return X @ W.T  # <script>alert(1)</script>"
    }
    result = FakeResult(course, "01_shapes", "x.ipynb", "ana", parts, answers)
    page = feedback.render(course, result, course.root)
    assert "<script>" not in page and html.escape("<script>alert(1)</script>") in page
    assert "return X @ W.T" in page and "missing-bias" in page
    assert "The bias b must be added to every output." in page
    assert GRADER_DIR not in page and "Task 1.4" in page
    assert "graded by your instructor" in page


def test_feedback_files_of_a_graded_class_reveal_nothing_hidden(tmp_path):
    course_dir = make_course(tmp_path / "course")
    outcomes, _ = run_fake(course_dir)
    pages = sorted((course_dir / "feedback").rglob("*.html"))
    assert len(pages) == len(outcomes) == 6
    assert {p.relative_to(course_dir / "feedback").parts for p in pages} == {
        (o.job.student, o.job.assignment, f"{o.job.assignment}.html") for o in outcomes
    }
    for page in pages:
        text = page.read_text()
        for forbidden in FORBIDDEN + (str(course_dir),):
            assert forbidden not in text, (page, forbidden)
    cy = (course_dir / "feedback" / "cy" / "01_shapes" / "01_shapes.html").read_text()
    assert "missing-bias" in cy and "X @ W.T  # WRONG" in cy and "Automatic score" in cy


def test_gradebook_comments_are_redacted_too():
    result = PartResult(
        "relu",
        0.0,
        1.0,
        Status.FAILED,
        f'your code raised OSError File "{GRADER_DIR}/sandbox/zygote.py", line 3',
        ("missing-bias",),
    )
    comment = part_comment(result, error=f"see {GRADER_DIR}/x.py")
    assert GRADER_DIR not in comment and "zygote" not in comment
    assert comment.startswith("This submission could not be graded") and "[failed] 0/1" in comment
    assert "Misconception missing-bias: The bias b must be added to every output." in comment
    manual = PartResult("why", 0.0, 1.0, Status.MANUAL, "graded by your instructor")
    assert part_comment(manual, answer="YOUR ANSWER HERE") == "No response."
    assert part_comment(manual, answer="Because ReLU clips negatives.") is None
