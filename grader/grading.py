"""Grade one part, or all parts of one assignment, against answers already in hand."""

from __future__ import annotations

from grader.checks import CheckContext, run_check
from grader.course import Assignment, Part
from grader.notebook import NO_ANSWER, is_blank_answer
from grader.result import PartResult, Status
from grader.seeding import rng_for


def grade_part(assignment: Assignment, part: Part, answer, student: str, secret: str) -> PartResult:
    """Judge one answer: a StudentFunction, decoded data, or text, by the part's kind."""
    if part.kind == "manual":
        if is_blank_answer(answer):  # nothing for a person to grade: 0 now, as nbgrader does
            return PartResult(part.id, 0.0, part.points, Status.FAILED, NO_ANSWER)
        return PartResult(
            part.id,
            0.0,
            part.points,
            Status.MANUAL,
            "This answer is graded by your instructor against the mark scheme.",
        )
    ctx = CheckContext(
        assignment.id, part.id, part.points, rng_for(secret, student, assignment.key(part)), part.task
    )
    return run_check(ctx, answer)
