"""The outcome of grading: one part (score, status, feedback, misconception codes), one submission."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from enum import StrEnum

from grader.text import safe_text

MAX_ANSWER_CHARS = 1 << 20
MAX_OUTPUT_CHARS = 1 << 20


class Status(StrEnum):
    PASSED = "passed"
    PARTIAL = "partial"
    FAILED = "failed"
    ERROR = "error"
    TIMEOUT = "timeout"
    MANUAL = "manual"


@dataclass(frozen=True)
class PartResult:
    id: str
    score: float
    max_score: float
    status: Status
    feedback: str
    misconceptions: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if not (math.isfinite(self.score) and 0 <= self.score <= self.max_score):
            raise ValueError(f"part {self.id!r}: score {self.score} outside [0, {self.max_score}]")
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "misconceptions", tuple(self.misconceptions))

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "score": self.score,
            "max_score": self.max_score,
            "status": self.status.value,
            "feedback": self.feedback,
            "misconceptions": list(self.misconceptions),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict) -> "PartResult":
        return cls(
            id=data["id"],
            score=float(data["score"]),
            max_score=float(data["max_score"]),
            status=Status(data["status"]),
            feedback=data["feedback"],
            misconceptions=tuple(data.get("misconceptions", ())),
        )


def scored(part_id: str, max_score: float, fraction: float, feedback: str, misconceptions=()) -> PartResult:
    """A result worth `fraction` of `max_score`, with the status that fraction implies."""
    fraction = min(max(fraction, 0.0), 1.0)
    status = Status.PASSED if fraction == 1 else Status.FAILED if fraction == 0 else Status.PARTIAL
    return PartResult(
        part_id, round(max_score * fraction, 6), max_score, status, feedback, tuple(misconceptions)
    )


@dataclass
class SubmissionResult:
    """Every part's result for one notebook, in course.yml order, and what the grader noticed.

    `error`: why the notebook as a whole could not be graded (None when it could); `answers`:
    part id -> the student's answer cell; `retry`: the grader, not the notebook, failed, so the
    next autograde run grades it again; `seconds`: how long grading took.
    """

    notebook: str
    assignment: str
    student: str
    parts: list[PartResult]
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    output: str = ""
    retry: bool = False
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return round(sum(part.score for part in self.parts), 6)

    @property
    def max_score(self) -> float:
        return round(sum(part.max_score for part in self.parts), 6)

    def to_dict(self) -> dict:
        return {
            "notebook": self.notebook,
            "assignment": self.assignment,
            "student": self.student,
            "score": self.score,
            "max_score": self.max_score,
            "parts": [part.to_dict() for part in self.parts],
            "error": self.error,
            "warnings": list(self.warnings),
        }

    def made_safe(self) -> "SubmissionResult":
        """A copy whose every text is storable: valid UTF-8, no NUL, bounded (see grader.text)."""
        parts = [
            dataclasses.replace(
                part,
                id=safe_text(part.id, 200),
                feedback=safe_text(part.feedback),
                misconceptions=tuple(safe_text(code, 100) for code in part.misconceptions),
            )
            for part in self.parts
        ]
        return dataclasses.replace(
            self,
            notebook=safe_text(self.notebook, 4096),
            assignment=safe_text(self.assignment, 200),
            student=safe_text(self.student, 200),
            parts=parts,
            error=None if self.error is None else safe_text(self.error),
            warnings=[safe_text(warning, 2000) for warning in self.warnings[:100]],
            answers={safe_text(k, 200): safe_text(v, MAX_ANSWER_CHARS) for k, v in self.answers.items()},
            output=safe_text(self.output, MAX_OUTPUT_CHARS),
        )


def zero_result(assignment, notebook, student: str, reason: str, retry: bool = False) -> SubmissionResult:
    """A recorded zero on every part of `assignment` (a course.Assignment), each saying `reason`.

    retry: True when the grader, not the notebook, failed (the next run grades it again).
    """
    parts = [
        PartResult(
            part.id,
            0.0,
            part.points,
            Status.MANUAL if part.kind == "manual" else Status.ERROR,
            "graded by your instructor" if part.kind == "manual" else f"Not graded: {reason}",
        )
        for part in assignment.parts
    ]
    return SubmissionResult(str(notebook), assignment.id, student, parts, reason, retry=retry)
