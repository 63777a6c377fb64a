"""results.json: the record of one graded submission, and whether it is still valid.

autograded/<student>/<assignment>/results.json holds the SubmissionResult with the notebook's
digest, a fingerprint of the course secret and one of the assignment's course.yml entry (its
parts and points, and the limits). A rerun trusts it only when all three still match, the grader
did not fail on it (`retry`), and the gradebook holds the same scores.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from pathlib import Path

from grader.files import write_private
from grader.pipeline.jobs import Job

RESULTS_FILE = "results.json"
RESULTS_VERSION = 2


@dataclasses.dataclass
class Outcome:
    """What became of one Job: its record (results.json's content) and whether this run graded it."""

    job: Job
    result: dict
    graded: bool  # False when the previous record was still valid
    seconds: float = 0.0
    problem: str | None = None  # why the gradebook refused the real record (a zero was recorded)


def secret_fingerprint(secret: str) -> str:
    """Tells whether results were graded with the same secret, without revealing it."""
    return hmac.new(secret.encode(), b"autograde results", hashlib.sha256).hexdigest()[:16]


def course_fingerprint(course, assignment_id: str) -> str:
    """Changes whenever course.yml changes how `assignment_id` is graded: its parts, points or limits."""
    assignment = course.assignment(assignment_id)
    entry = {
        "parts": [dataclasses.asdict(part) for part in assignment.parts],
        "limits": dataclasses.asdict(course.limits),
    }
    return hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:16]


def output_paths(course_dir: Path, job: Job, course) -> dict[str, Path]:
    """Where a job's results.json, formgrader copy, timestamp and feedback page go."""
    assignment = course.assignment(job.assignment)
    stem = Path(assignment.notebook).stem
    graded = Path(course_dir) / "autograded" / job.student / job.assignment
    return {
        "results": graded / RESULTS_FILE,
        "notebook": graded / assignment.notebook,
        "timestamp": graded / "timestamp.txt",
        "feedback": Path(course_dir) / "feedback" / job.student / job.assignment / f"{stem}.html",
    }


def read_previous(path: Path) -> dict | None:
    """The results.json of an earlier run, or None when it is missing or not one this version wrote."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("version") != RESULTS_VERSION:
        return None
    parts = data.get("parts")
    if not isinstance(parts, list) or not all(isinstance(part, dict) for part in parts):
        return None
    if not all(type(data.get(key)) in (int, float) for key in ("score", "max_score")):
        return None
    return data


@dataclasses.dataclass(frozen=True)
class Fingerprints:
    """What a valid record must match besides the notebook: the secret and each assignment's entry."""

    secret: str
    courses: dict

    @classmethod
    def of(cls, course, secret: str, assignment_ids) -> "Fingerprints":
        return cls(secret_fingerprint(secret), {a: course_fingerprint(course, a) for a in assignment_ids})


def unchanged(previous: dict | None, job: Job, fingerprints: Fingerprints) -> bool:
    """True when results.json holds a finished grading of this very notebook, secret and course.yml."""
    return (
        previous is not None
        and previous.get("digest") == job.digest
        and previous.get("secret") == fingerprints.secret
        and previous.get("course") == fingerprints.courses.get(job.assignment)
        and not previous.get("retry")
    )


def still_valid(previous: dict | None, job: Job, stored: dict | None, fingerprints: Fingerprints) -> bool:
    """True when results.json and the gradebook (`stored`: part id -> score) both hold this grading."""
    if stored is None or not unchanged(previous, job, fingerprints):
        return False
    for part in previous.get("parts", []):
        if part.get("status") != "manual" and stored.get(part.get("id")) != part.get("score"):
            return False
    return True


def record(result, job: Job, fingerprints: Fingerprints) -> dict:
    """The results.json content for a (made-safe) SubmissionResult of `job`."""
    data = result.to_dict()
    data.update(
        version=RESULTS_VERSION,
        digest=job.digest,
        secret=fingerprints.secret,
        course=fingerprints.courses.get(job.assignment),
        seconds=round(result.seconds, 3),
        retry=result.retry,
    )
    return data


def write_record(path: Path, data: dict) -> None:
    """Write results.json atomically, readable by the instructor only (see grader.files)."""
    write_private(path, json.dumps(data, indent=1, default=str) + "\n")
