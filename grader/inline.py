"""Hidden-test entry point for running inside a notebook (vanilla `nbgrader autograde`).

    ### BEGIN HIDDEN TESTS
    from grader.inline import assert_part
    assert_part("01_shapes.linear_forward", linear_forward)
    ### END HIDDEN TESTS

The hidden test opens its test cell, before the public tests. It shows the part's score as the
cell's result, which nbgrader takes as the grade (partial credit included), so a public test that
fails later in the cell, or writes to stderr, no longer changes it: nbgrader scores the first
result or error of a cell.

The check runs in the notebook's own process here, so this path is only as trustworthy as
the notebook; `python -m grader autograde` isolates student code and is the one to rely on.
"""

from __future__ import annotations

import contextlib
import io
import warnings

from grader.course import load_course
from grader.grading import grade_part
from grader.result import PartResult, Status
from grader.seeding import grading_secret
from grader.student import LocalFunction, StudentError, local_value


def assert_part(key: str, answer, student: str = "self-check") -> None:
    """Grade `answer` for part `key` ("assignment.part"); show the score as the cell's result.

    Prints one line, "<part>: <score>/<points> (<status>) <feedback>", then hands the score to
    IPython's display hook, so the cell's first result is the score (an `execute_result`), e.g.
    `1.0` for half of 2 points. Whatever the student's code prints or warns while it is checked is
    dropped: it could show the hidden inputs, and nbgrader scores a test cell with stderr 0.
    Returns None; outside IPython nothing but the line is shown.
    """
    result = part_result(key, answer, student)
    print(f"{result.id}: {result.score:g}/{result.max_score:g} ({result.status}) {result.feedback}")
    show_score(result.score)


def part_result(key: str, answer, student: str = "self-check") -> PartResult:
    """The grader's PartResult for `answer` to part `key`, with the student's output discarded."""
    assignment_id, _, part_id = key.partition(".")
    course = load_course()
    assignment = course.assignment(assignment_id)
    part = assignment.part(part_id)
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            answer = LocalFunction(answer, part.name) if part.kind == "function" else local_value(answer)
        except StudentError as unreadable:
            return PartResult(part.id, 0.0, part.points, Status.FAILED, unreadable.reason)
        return grade_part(assignment, part, answer, student, grading_secret(course.secret_env))


def show_score(score: float) -> None:
    """Publish `score` as the running cell's result (what nbgrader reads as partial credit)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.displayhook(float(score))
