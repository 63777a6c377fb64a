"""Hidden-test entry point for running inside a notebook (vanilla `nbgrader autograde`).

    from grader.inline import assert_part
    assert_part("01_shapes.linear_forward", linear_forward)

The check runs in the notebook's own process here, so this path is only as trustworthy as
the notebook; `python -m grader autograde` isolates student code and is the one to rely on.
"""

from __future__ import annotations

from grader.course import load_course
from grader.grading import grade_part
from grader.seeding import grading_secret
from grader.student import LocalFunction, StudentError, local_value


def assert_part(key: str, answer, student: str = "self-check") -> None:
    """Grade `answer` for part `key` ("assignment.part"); raise AssertionError unless full marks.

    Returns None, so that the hidden-test cell has no output for nbgrader to convert.
    """
    assignment_id, _, part_id = key.partition(".")
    course = load_course()
    assignment = course.assignment(assignment_id)
    part = assignment.part(part_id)
    try:
        answer = LocalFunction(answer, part.name) if part.kind == "function" else local_value(answer)
    except StudentError as unreadable:
        raise AssertionError(unreadable.reason) from None
    result = grade_part(assignment, part, answer, student, grading_secret(course.secret_env))
    print(f"{part.id}: {result.score:g}/{result.max_score:g} ({result.status}) {result.feedback}")
    if result.score < result.max_score:
        raise AssertionError(result.feedback)
