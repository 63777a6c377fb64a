"""The grading service's HTTP API (tornado): accept a notebook, queue it, grade it, answer with the table.

    POST /api/v1/assignments/<assignment>/attempts[?wait=S]   body: the notebook (.ipynb bytes)
         headers: Authorization: Bearer <token>, X-Request-Id: <fresh random id>,
                  X-Request-Time: <unix seconds>
         202 {"attempt", "receipt", "status": "queued" | "grading" | "graded", "queue", "result"}
    GET  /api/v1/attempts/<attempt>[?wait=S]    the same object, for the attempt's own student
    GET  /api/v1/status                         {"queued", "grading", "workers"}

Refusals are JSON {"error": code, "message": text} with a 4xx status, and change nothing on disk:
401 missing or wrong token, 409 a replayed request, 429 too many attempts this hour, 413 an
oversized upload, 400 not a notebook, 422 another assignment's notebook, 404 unknown assignment.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import tornado.web

from grader.service.store import Attempt, AttemptStore
from grader.service.tokens import student_of

log = logging.getLogger(__name__)

API = "/api/v1"
REQUEST_ID = re.compile(r"[A-Za-z0-9_-]{8,80}")
MAX_CLOCK_SKEW_S = 300
MAX_WAIT_S = 120
HOUR_NS = 3600 * 10**9
GRADING_TRIES = 3


class Refusal(Exception):
    """A request the service refuses; `status`, `code` and a message written for the student."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None, **extra):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}
        self.extra = extra  # more fields of the answer, e.g. the attempt a replay already made


def _utc(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def notebook_assignments(course, cells) -> dict[str, int]:
    """assignment id -> how many of its answer cells the notebook holds (only ids with at least one)."""
    from grader.notebook import answer_cell_id

    grade_ids = {cell.grade_id for cell in cells if cell.grade_id}
    counts = {}
    for assignment in course.assignments:
        answer_ids = {answer_cell_id(part) for part in assignment.parts}
        hits = len(grade_ids & answer_ids)
        if hits:
            counts[assignment.id] = hits
    return counts


def student_result(course, attempt: Attempt, result, hide: tuple[str, ...] = ()) -> dict:
    """What the student is shown of a SubmissionResult: parts, scores, feedback, misconceptions."""
    from grader.feedback import redact
    from grader.misconceptions import MISCONCEPTIONS

    assignment = course.assignment(attempt.assignment)
    tasks = {part.id: part for part in assignment.parts}
    parts = []
    for part in result.parts:
        info = tasks.get(part.id)
        parts.append(
            {
                "part": part.id,
                "task": info.task if info else "",
                "score": part.score,
                "max_score": part.max_score,
                "status": str(part.status),
                "feedback": redact(part.feedback, hide).strip(),
                "misconceptions": [
                    {"code": code, "meaning": MISCONCEPTIONS.get(code, "")} for code in part.misconceptions
                ],
            }
        )
    manual = sum(p["max_score"] for p in parts if p["status"] == "manual")
    return {
        "assignment": assignment.id,
        "title": assignment.title,
        "score": result.score,
        "max_score": result.max_score,
        "manual_points": manual,
        "parts": parts,
        "error": redact(result.error, hide) if result.error else None,
        "public_inputs": attempt.public_only,
        "late": attempt.late,
        "grader_failed": bool(getattr(result, "retry", False)),
    }


class Service:
    """Queue, store and grading of one course; the handlers' shared state.

    Every method but the grading callbacks runs on the tornado event loop.
    """

    def __init__(self, course, data_dir: Path, secret: str, grading, clock=time.time_ns, hub=None):
        self.course, self.policy, self.secret, self.hub = course, course.service, secret, hub
        self.store = AttemptStore(data_dir)
        self.grading = grading
        self.clock = clock
        self.waiting: list[str] = []
        self.in_progress: set[str] = set()
        self.waiters: dict[str, list[asyncio.Future]] = {}
        self.tries: dict[str, int] = {}
        self._lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.hide = (str(course.root), str(self.store.data_dir))

    def start(self) -> int:
        """Load the attempts on disk and queue those not graded yet; returns how many were queued."""
        self.loop = asyncio.get_running_loop()
        pending = self.store.load()
        for attempt in pending:
            self.enqueue(attempt)
        return len(pending)

    # ------------------------------------------------------------------ queue
    def enqueue(self, attempt: Attempt) -> None:
        with self._lock:
            self.waiting.append(attempt.id)

        def started():
            with self._lock:
                if attempt.id in self.waiting:
                    self.waiting.remove(attempt.id)
                self.in_progress.add(attempt.id)

        future = self.grading.submit(
            attempt.student,
            attempt.assignment,
            self.store.notebook_path(attempt),
            attempt.public_only,
            on_start=started,
        )
        future.add_done_callback(lambda done: self._graded(attempt, done))

    def _graded(self, attempt: Attempt, future) -> None:
        """In a grading thread: write the result to disk, then wake whoever waits for it.

        When the grader itself failed (not the notebook), the attempt is graded again, up to
        GRADING_TRIES times; after that its result says so, and the student can submit again."""
        if future.cancelled():
            self._done(attempt)
            return  # shutting down: it stays queued on disk and is graded at the next start
        error = future.exception()
        result = None if error is not None else future.result()
        if error is not None or result.retry:
            tries = self.tries[attempt.id] = self.tries.get(attempt.id, 0) + 1
            log.warning(
                "attempt %s: the grader failed (try %d): %s", attempt.id, tries, error or result.error
            )
            if tries < GRADING_TRIES and self.loop is not None and not self.loop.is_closed():
                self._done(attempt)
                self.loop.call_soon_threadsafe(self.enqueue, attempt)
                return
            if result is None:
                from grader.result import zero_result

                reason = f"the grader failed on this attempt ({type(error).__name__}); submit again later"
                result = zero_result(
                    self.course.assignment(attempt.assignment), "", attempt.student, reason, True
                )
        try:
            view = student_result(self.course, attempt, result, self.hide)
            view["graded"] = datetime.now(timezone.utc).isoformat(timespec="microseconds")
            self.store.record_result(attempt, view)
        except Exception:
            log.exception(
                "recording the result of attempt %s failed; it is graded again on restart", attempt.id
            )
            return
        finally:
            self._done(attempt)
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._wake, attempt.id)

    def _done(self, attempt: Attempt) -> None:
        with self._lock:
            self.in_progress.discard(attempt.id)
            if attempt.id in self.waiting:
                self.waiting.remove(attempt.id)

    def _wake(self, attempt_id: str) -> None:
        for waiter in self.waiters.pop(attempt_id, []):
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, attempt_id: str, seconds: float) -> None:
        if seconds <= 0 or self.store.result(attempt_id) is not None:
            return
        waiter = self.loop.create_future()
        self.waiters.setdefault(attempt_id, []).append(waiter)
        try:
            await asyncio.wait_for(asyncio.shield(waiter), timeout=seconds)
        except asyncio.TimeoutError:
            pass

    def view(self, attempt: Attempt) -> dict:
        """The attempt as its student sees it: receipt, place in the queue or the result."""
        result = self.store.result(attempt.id)
        answer = {"attempt": attempt.id, "assignment": attempt.assignment, "receipt": attempt.receipt}
        with self._lock:
            if result is not None:
                status, queue = "graded", None
            elif attempt.id in self.waiting:
                status = "queued"
                queue = {
                    "position": self.waiting.index(attempt.id) + 1,
                    "waiting": len(self.waiting),
                    "grading": len(self.in_progress),
                }
            else:
                status, queue = (
                    "grading",
                    {"position": 0, "waiting": len(self.waiting), "grading": len(self.in_progress)},
                )
        answer.update(status=status, queue=queue, result=result)
        return answer

    def status(self) -> dict:
        with self._lock:
            return {
                "queued": len(self.waiting),
                "grading": len(self.in_progress),
                "workers": self.grading.workers,
            }

    # ------------------------------------------------------------------ admission
    async def authenticate(self, header: str | None) -> str:
        """The student a request's Authorization header names: a course token (`Bearer`), or on a
        JupyterHub the student's Hub API token (`token`), confirmed by the Hub."""
        if not header:
            raise Refusal(
                401,
                "missing-token",
                "No token was sent: put your course token in the layerlab service config "
                "(see the course README); ask your instructor if you have none.",
            )
        scheme, _, token = header.partition(" ")
        student = None
        if scheme.lower() == "bearer":
            student = student_of(self.secret, token)
        elif scheme.lower() == "token" and self.hub is not None:
            from grader.service.hub import HubUnavailable

            try:
                student = await self.hub.user(token.strip())
            except HubUnavailable as error:
                raise Refusal(
                    503,
                    "hub-unavailable",
                    f"JupyterHub could not confirm who you are ({error}); try again soon.",
                ) from None
        if student is None:
            raise Refusal(
                401,
                "bad-token",
                "This token is not valid for this course: check that you copied it whole, "
                "or ask your instructor for a new one.",
            )
        return student

    def check_fresh(self, student: str, request_id: str | None, request_time: str | None) -> str:
        if not request_id or not REQUEST_ID.fullmatch(request_id):
            raise Refusal(
                400,
                "bad-request-id",
                "X-Request-Id must be a fresh random id (8-80 letters, digits, - or _).",
            )
        earlier = self.store.replayed(student, request_id)
        if earlier is not None:
            raise Refusal(
                409,
                "replay",
                f"This request was already received (attempt {earlier}); a replayed request is not "
                "graded again. Submit again to make a new attempt.",
                attempt=earlier,
            )
        try:
            sent = float(request_time)
        except (TypeError, ValueError):
            raise Refusal(400, "bad-request-time", "X-Request-Time must be the sending time in Unix seconds.")
        skew = abs(self.clock() / 1e9 - sent)
        if not skew <= MAX_CLOCK_SKEW_S:
            raise Refusal(
                409,
                "stale-request",
                f"This request was sent {skew:.0f} s away from the service's time (more than "
                f"{MAX_CLOCK_SKEW_S} s): a replayed or delayed request, or a wrong clock. Submit again.",
            )
        return request_id

    def check_rate(self, student: str) -> None:
        now = self.clock()
        recent = self.store.recent(student, now - HOUR_NS)
        limit = self.policy.attempts_per_hour
        if len(recent) >= limit:
            free_at = recent[len(recent) - limit].received_ns + HOUR_NS
            wait_s = max(1, int((free_at - now) / 1e9) + 1)
            raise Refusal(
                429,
                "too-many-attempts",
                f"You have used your {limit} attempts of the last hour; your next attempt is possible "
                f"at {_utc(free_at)} (in {wait_s // 60} min {wait_s % 60} s). "
                "Your earlier attempts are kept.",
                {"Retry-After": str(wait_s)},
            )

    def check_notebook(self, assignment, data: bytes):
        from grader.notebook import NotebookError, read_notebook

        with tempfile.NamedTemporaryFile(dir=self.store.staging, suffix=".ipynb") as handle:
            handle.write(data)
            handle.flush()
            try:
                cells = read_notebook(handle.name, "the upload")
            except NotebookError as error:
                message = str(error).replace(Path(handle.name).name, "").replace("  ", " ")
                raise Refusal(400, "not-a-notebook", message)
        found = notebook_assignments(self.course, cells)
        if assignment.id not in found:
            if found:
                other = max(found, key=found.get)
                raise Refusal(
                    422,
                    "wrong-assignment",
                    f"This notebook holds the answer cells of {other}, not of {assignment.id}: "
                    f"submit it to {other}, or open {assignment.notebook} and submit from there.",
                )
            raise Refusal(
                422,
                "wrong-assignment",
                f"This notebook has none of the answer cells of {assignment.id}; submit the notebook "
                f"{assignment.notebook} of this assignment.",
            )

    def accept(self, student: str, assignment_id: str, data: bytes, request_id: str) -> Attempt:
        assignment = self.course.assignment(assignment_id)
        now = self.clock()
        deadline = self.policy.deadline(assignment.id)
        late = deadline is not None and now > deadline.timestamp() * 1e9
        public_only = not self.policy.hidden_feedback_before_deadline and not late
        attempt = self.store.accept(
            student,
            assignment.id,
            assignment.notebook,
            data,
            hashlib.sha256(data).hexdigest(),
            request_id,
            public_only,
            late,
        )
        self.enqueue(attempt)
        return attempt

    def max_upload(self) -> int:
        return self.policy.max_upload_kb * 1024


class _Handler(tornado.web.RequestHandler):
    def initialize(self, service: Service):
        self.service = service

    def set_default_headers(self):
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.set_header("Cache-Control", "no-store")

    def check_xsrf_cookie(self):  # token-authenticated API, no cookies
        pass

    def refuse(self, refusal: Refusal) -> None:
        self.set_status(refusal.status)
        for name, value in refusal.headers.items():
            self.set_header(name, value)
        self.finish(json.dumps({"error": refusal.code, "message": refusal.message, **refusal.extra}))

    def write_error(self, status_code, **kwargs):
        reason = self._reason if status_code < 500 else "the service failed on this request; it was logged"
        self.finish(json.dumps({"error": f"http-{status_code}", "message": reason}))

    def wait_seconds(self) -> float:
        try:
            return min(max(float(self.get_query_argument("wait", "0")), 0.0), MAX_WAIT_S)
        except ValueError:
            return 0.0


@tornado.web.stream_request_body
class AttemptsHandler(_Handler):
    """POST a notebook: one new attempt."""

    def prepare(self):
        self.chunks, self.received, self.refused = [], 0, None
        limit = self.service.max_upload()
        self.hard_limit = 4 * limit + 2**20  # a larger body is not even read
        self.request.connection.set_max_body_size(self.hard_limit)
        declared = self.request.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > self.hard_limit:
            self.refuse(self.too_large(int(declared)))
            self.request.connection.close()

    def too_large(self, size: int) -> Refusal:
        limit = self.service.max_upload()
        return Refusal(
            413,
            "too-large",
            f"The upload is {size / 1024:.0f} kB; notebooks up to {limit // 1024} kB are accepted. "
            "Clear large outputs (Edit > Clear Outputs of All Cells), save, and submit again.",
        )

    def data_received(self, chunk: bytes) -> None:
        self.received += len(chunk)
        if self.received <= self.service.max_upload():
            self.chunks.append(chunk)
        else:
            self.chunks = []

    async def post(self, assignment_id: str):
        service = self.service
        try:
            student = await service.authenticate(self.request.headers.get("Authorization"))
            request_id = service.check_fresh(
                student, self.request.headers.get("X-Request-Id"), self.request.headers.get("X-Request-Time")
            )
            try:
                assignment = service.course.assignment(assignment_id)
            except Exception:
                known = ", ".join(a.id for a in service.course.assignments)
                raise Refusal(
                    404,
                    "unknown-assignment",
                    f"There is no assignment {assignment_id!r:.80} (known: {known}).",
                )
            service.check_rate(student)
            if self.received > service.max_upload():
                raise self.too_large(self.received)
            data = b"".join(self.chunks)
            service.check_notebook(assignment, data)
            attempt = service.accept(student, assignment.id, data, request_id)
        except Refusal as refusal:
            self.refuse(refusal)
            return
        log.info("accepted attempt %s: %s %s", attempt.id, student, assignment.id)
        await service.wait(attempt.id, self.wait_seconds())
        self.set_status(202 if service.store.result(attempt.id) is None else 200)
        self.finish(json.dumps(service.view(attempt)))


class AttemptHandler(_Handler):
    """GET one attempt (receipt, queue position or result) as its own student."""

    async def get(self, attempt_id: str):
        service = self.service
        try:
            student = await service.authenticate(self.request.headers.get("Authorization"))
            attempt = service.store.attempts.get(attempt_id)
            if attempt is None or attempt.student != student:
                raise Refusal(404, "unknown-attempt", f"You have no attempt {attempt_id!r:.80}.")
        except Refusal as refusal:
            self.refuse(refusal)
            return
        await service.wait(attempt.id, self.wait_seconds())
        self.finish(json.dumps(service.view(attempt)))


class NotFoundHandler(_Handler):
    def prepare(self):
        raise tornado.web.HTTPError(404)


class StatusHandler(_Handler):
    def get(self):
        self.finish(json.dumps(self.service.status()))


def make_app(service: Service, prefix: str = "/") -> tornado.web.Application:
    """The API under `prefix` (JupyterHub proxies a service's whole path, e.g. /services/grading/)."""
    base = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    api = re.escape(base.rstrip("/") + API)
    routes = [
        (rf"{api}/assignments/([^/]+)/attempts", AttemptsHandler, {"service": service}),
        (rf"{api}/attempts/([^/]+)", AttemptHandler, {"service": service}),
        (rf"{api}/status", StatusHandler, {"service": service}),
    ]
    return tornado.web.Application(
        routes,
        default_handler_class=NotFoundHandler,
        default_handler_args={"service": service},
        xheaders=False,
        compress_response=True,
    )
