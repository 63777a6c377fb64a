"""Attempts on disk: every accepted notebook, its receipt and its result, written before any answer.

Layout under the service's data directory (the course directory by default):

    service/attempts/<student>/<assignment>/<attempt id>/notebook.ipynb   the bytes as received
    service/attempts/<student>/<assignment>/<attempt id>/attempt.json     receipt, request id, policy
    service/attempts/<student>/<assignment>/<attempt id>/result.json      written once graded
    service/staging/<attempt id>/                                          an attempt being written
    submitted/<student>/<assignment>/<notebook> + timestamp.txt          nbgrader's layout

Each file is written to a temporary name, fsynced, renamed into place and its folder fsynced, so
a crash leaves either the whole file or none; an attempt's folder is written in staging/ and
renamed into place whole. An attempt without result.json is still queued: a
restarted service grades it. `submitted/` holds the latest attempt received before the deadline.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import threading
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"  # nbgrader's timestamp.txt


@dataclass
class Attempt:
    id: str
    student: str
    assignment: str
    notebook_name: str
    received: str  # ISO 8601, UTC
    received_ns: int
    sha256: str
    size: int
    request_id: str
    public_only: bool  # graded on the public inputs only (course policy before the deadline)
    late: bool  # received after the assignment's deadline: graded, not copied to submitted/

    @property
    def receipt(self) -> dict:
        return {"attempt": self.id, "received": self.received, "sha256": self.sha256, "bytes": self.size}


def durable_write(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that it survives a crash once this returns (fsync, rename, fsync dir)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    _fsync_folder(path.parent)


def _fsync_folder(path: Path) -> None:
    folder = os.open(path, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def utc_now() -> tuple[str, int]:
    """(ISO text, nanoseconds since the epoch) of now."""
    ns = time.time_ns()
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).isoformat(timespec="microseconds"), ns


class AttemptStore:
    """The attempts of every student under `data_dir`; thread-safe."""

    def __init__(self, data_dir: str | Path):
        self.data_dir = Path(data_dir).resolve()
        self.root = self.data_dir / "service" / "attempts"
        self.submitted = self.data_dir / "submitted"
        self.staging = self.data_dir / "service" / "staging"
        self._lock = threading.Lock()
        self.attempts: dict[str, Attempt] = {}
        self.results: dict[str, dict] = {}
        self.request_ids: dict[tuple[str, str], str] = {}  # (student, request id) -> attempt id

    def folder(self, attempt: Attempt) -> Path:
        return self.root / attempt.student / attempt.assignment / attempt.id

    def load(self) -> list[Attempt]:
        """Read every attempt on disk; returns those not graded yet, oldest first.

        Half-written attempts (a crash while accepting; never acknowledged) are removed."""
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(parents=True, exist_ok=True)
        pending = []
        for meta in sorted(self.root.glob("*/*/*/attempt.json")):
            try:
                attempt = Attempt(**json.loads(meta.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError) as error:
                print(f"serve: warning: skipping unreadable attempt {meta}: {error}", flush=True)
                continue
            self._index(attempt)
            result = meta.with_name("result.json")
            if result.is_file():
                try:
                    self.results[attempt.id] = json.loads(result.read_text(encoding="utf-8"))
                    continue
                except (OSError, ValueError):
                    pass  # a damaged result: grade again
            pending.append(attempt)
        latest: dict[tuple[str, str], Attempt] = {}
        for attempt in self.attempts.values():
            key = (attempt.student, attempt.assignment)
            if not attempt.late and (key not in latest or attempt.received_ns > latest[key].received_ns):
                latest[key] = attempt
        for attempt in latest.values():  # a crash may have come between accepting and copying
            self._submit(attempt, self.notebook_path(attempt).read_bytes())
        return sorted(pending, key=lambda a: a.received_ns)

    def _index(self, attempt: Attempt) -> None:
        self.attempts[attempt.id] = attempt
        self.request_ids[(attempt.student, attempt.request_id)] = attempt.id

    def replayed(self, student: str, request_id: str) -> str | None:
        """The attempt id already accepted for this request id, if any."""
        with self._lock:
            return self.request_ids.get((student, request_id))

    def recent(self, student: str, since_ns: int) -> list[Attempt]:
        """The student's accepted attempts received at or after `since_ns`, oldest first."""
        with self._lock:
            found = [a for a in self.attempts.values() if a.student == student and a.received_ns >= since_ns]
        return sorted(found, key=lambda a: a.received_ns)

    def accept(
        self,
        student: str,
        assignment: str,
        notebook_name: str,
        data: bytes,
        sha256: str,
        request_id: str,
        public_only: bool,
        late: bool,
    ) -> Attempt:
        """Record a new attempt durably (and, when on time, as the student's nbgrader submission)."""
        received, received_ns = utc_now()
        attempt = Attempt(
            f"{received_ns:020d}-{secrets.token_hex(4)}",
            student,
            assignment,
            notebook_name,
            received,
            received_ns,
            sha256,
            len(data),
            request_id,
            public_only,
            late,
        )
        staging = self.staging / attempt.id  # both files appear at once: a crash leaves no half attempt
        durable_write(staging / "notebook.ipynb", data)
        durable_write(staging / "attempt.json", json.dumps(asdict(attempt), indent=1).encode())
        folder = self.folder(attempt)
        folder.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging, folder)
        _fsync_folder(folder.parent)
        _fsync_folder(self.staging)
        with self._lock:
            self._index(attempt)
            if not late:
                self._submit(attempt, data)
        return attempt

    def _submit(self, attempt: Attempt, data: bytes) -> None:
        folder = self.submitted / attempt.student / attempt.assignment
        stamp = folder / "timestamp.txt"
        moment = datetime.fromtimestamp(attempt.received_ns / 1e9, timezone.utc)
        try:
            current = datetime.strptime(stamp.read_text(encoding="utf-8").strip(), TIMESTAMP_FORMAT)
            if current.replace(tzinfo=timezone.utc) >= moment:
                return  # this attempt or a later one is already there
        except (OSError, ValueError):
            pass
        durable_write(folder / attempt.notebook_name, data)
        durable_write(stamp, (moment.strftime(TIMESTAMP_FORMAT) + "\n").encode())

    def notebook_path(self, attempt: Attempt) -> Path:
        return self.folder(attempt) / "notebook.ipynb"

    def record_result(self, attempt: Attempt, view: dict) -> None:
        durable_write(self.folder(attempt) / "result.json", json.dumps(view, indent=1).encode())
        with self._lock:
            self.results[attempt.id] = view

    def result(self, attempt_id: str) -> dict | None:
        with self._lock:
            return self.results.get(attempt_id)
