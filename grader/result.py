"""The outcome of grading one part: score, status, feedback and misconception codes."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import StrEnum


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
