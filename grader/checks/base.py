"""The machinery every check shares: the registry, the context, and `run_check`.

A check is a function `(answer, ctx) -> PartResult`. For function parts `answer` is a
`StudentFunction`; for value parts it is decoded data; for symbolic parts, text. Checks raise
`WrongAnswer` for a clear zero; `run_check` turns student errors, timeouts and even bugs in a
check into a recorded result, so grading never crashes.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Callable

import numpy as np

from grader.misconceptions import MISCONCEPTIONS
from grader.result import PartResult, Status, scored
from grader.student import NotDefined, StudentError, StudentRaised, StudentTimeout

log = logging.getLogger(__name__)

CHECKS: dict[str, Callable] = {}


def check(assignment: str, part: str):
    """Register `function` as the check of `assignment.part`."""

    def register(function):
        key = f"{assignment}.{part}"
        if key in CHECKS:
            raise ValueError(f"two checks registered for {key}")
        CHECKS[key] = function
        return function

    return register


class WrongAnswer(Exception):
    """The answer is wrong in a way the feedback can name; scores `fraction` of the part.

    status: Status.ERROR when the student's code raised (every check reports that the same way);
    None for the status the fraction implies.
    """

    def __init__(
        self, feedback: str, *misconceptions: str, fraction: float = 0.0, status: Status | None = None
    ):
        unknown = [code for code in misconceptions if code not in MISCONCEPTIONS]
        if unknown:
            raise ValueError(f"unknown misconception codes {unknown}")
        super().__init__(feedback)
        self.feedback, self.misconceptions, self.fraction = feedback, misconceptions, fraction
        self.status = status


@dataclass
class CheckContext:
    assignment: str
    part: str
    max_score: float
    rng: np.random.Generator
    task: str = ""

    @property
    def id(self) -> str:
        return self.part

    def passed(self, feedback: str = "Correct.") -> PartResult:
        return scored(self.part, self.max_score, 1.0, feedback)

    def partial(self, fraction: float, feedback: str, *misconceptions: str) -> PartResult:
        return scored(self.part, self.max_score, fraction, feedback, misconceptions)

    def result(self, status: Status, feedback: str, *misconceptions: str) -> PartResult:
        return PartResult(self.part, 0.0, self.max_score, status, feedback, misconceptions)


def not_implemented_feedback(task: str, stub_message: str) -> str:
    """'Task 1.4 is not implemented yet: <what the stub asks for>' without repeating the task number."""
    detail = re.sub(r"^\s*Task\s+[\d.]+\s*:?\s*", "", stub_message or "").strip().rstrip(".")
    name = f"Task {task}" if task else "This task"
    return f"{name} is not implemented yet: {detail or 'the stub still raises NotImplementedError'}."


def run_check(ctx: CheckContext, answer) -> PartResult:
    """Grade one part; always returns a result, whatever the answer or the check does."""
    key = f"{ctx.assignment}.{ctx.part}"
    function = CHECKS.get(key)
    if function is None:
        return ctx.result(Status.ERROR, f"No automatic check is registered for {key}.")
    try:
        result = function(answer, ctx)
        if type(result) is not PartResult:
            raise TypeError(f"check {key} returned {type(result).__name__}")
        return result
    except WrongAnswer as wrong:
        if wrong.status is not None:
            return ctx.result(wrong.status, wrong.feedback, *wrong.misconceptions)
        return ctx.partial(wrong.fraction, wrong.feedback, *wrong.misconceptions)
    except StudentRaised as raised:
        if raised.not_implemented:
            return ctx.result(
                Status.FAILED, not_implemented_feedback(ctx.task, raised.message), "not-implemented"
            )
        return ctx.result(Status.ERROR, f"Your code raised an error while being graded: {raised.reason}")
    except StudentTimeout as timeout:
        return ctx.result(Status.TIMEOUT, f"Your code did not finish in time: {timeout.reason}")
    except NotDefined as missing:
        return ctx.result(Status.FAILED, f"Nothing to grade: {missing.reason}.")
    except StudentError as error:
        return ctx.result(Status.ERROR, f"Your code could not be graded: {error.reason}")
    except Exception:
        log.exception("check %s failed", key)
        return ctx.result(
            Status.ERROR,
            "The grader could not judge this answer (an internal error was logged for your instructor).",
        )
