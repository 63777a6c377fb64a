"""DaskExecutor: the executor interface over the workers of a Dask distributed cluster.

The driver sends each Job as plain data to `grader.pipeline.remote.grade_on_worker` and accepts
back only what grade_submission promises (see grader.pipeline.remote). Before grading, every
worker is asked for its fingerprints; a worker with other grader code, libraries or course
secret is excluded, named in `notes`, and the run goes on with the others. A worker whose reply
breaks the contract later is excluded the same way and its submission graded elsewhere. The run
fails only when no good worker is left. Every gradebook write still happens in the driver.
"""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor

from distributed import Client

from grader.files import UnsafeFile, read_regular
from grader.notebook import MAX_NOTEBOOK_BYTES
from grader.pipeline.executors import RemoteGradingError, refused_result, resolved
from grader.pipeline.jobs import Job
from grader.pipeline.records import secret_fingerprint
from grader.pipeline.remote import (
    MAX_REPLY_CHARS,
    PLUGIN_NAME,
    PROTOCOL,
    SandboxCleanup,
    differences,
    has_cleanup_plugin,
    environment_fingerprint,
    grade_on_worker,
    result_from_wire,
    worker_identity,
)

RETRIES = 2
WORKER_WAIT_S = 60
CONNECT_TIMEOUT_S = 30


class BadWorker(RemoteGradingError):
    """One worker's reply cannot be trusted; `address` is that worker's (None if it did not say)."""

    def __init__(self, message: str, address: str | None = None):
        super().__init__(message)
        self.address = address


class DaskExecutor:
    """executor = DaskExecutor(address, course, secret); executor.submit(job) -> Future[SubmissionResult].

    address: the scheduler's address ("tcp://10.0.0.5:8786"); course, secret: as for LocalExecutor;
    warn(message): hears each excluded worker at once (`notes` keeps them for the end of the run).
    Raises RemoteGradingError when the cluster cannot be reached or has no good worker.
    """

    def __init__(
        self,
        address: str,
        course,
        secret: str,
        worker_wait_s: float = WORKER_WAIT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        warn=lambda message: None,
    ):
        self.course, self.address, self.warn = course, address, warn
        self.fingerprint = secret_fingerprint(secret)
        self.environment = environment_fingerprint()
        self.course_yml = course.path.read_text(encoding="utf-8")
        self.excluded: dict[str, str] = {}
        self.notes: list[str] = []
        self._sources: dict[str, bytes] = {}
        try:
            self.client = Client(address, timeout=connect_timeout_s, set_as_default=False)
        except OSError as error:
            raise RemoteGradingError(f"cannot reach the Dask scheduler at {address}: {error}") from None
        try:
            self.client.wait_for_workers(1, timeout=worker_wait_s)
            if not self.client.run_on_scheduler(has_cleanup_plugin):  # re-registering would close sandboxes
                self.client.register_plugin(SandboxCleanup(), name=PLUGIN_NAME)
            identities = self.client.run(worker_identity, course.secret_env, on_error="return")
        except Exception as error:
            self.client.close()
            raise RemoteGradingError(
                f"the Dask cluster at {address} has no usable worker (waited {worker_wait_s:g} s): {error}"
            ) from None
        for worker, identity in sorted(identities.items()):
            problem = self.identity_problem(identity)
            if problem is not None:
                self.exclude(worker, problem)
        good = self.good_workers()
        if not good:
            self.client.close()
            raise RemoteGradingError(f"no usable worker on the Dask cluster at {address}: {self.reasons()}")
        self.window = max(2, 2 * sum(good.values()))
        self.pool = ThreadPoolExecutor(max_workers=self.window, thread_name_prefix="dask")

    # --- workers --------------------------------------------------------------------------------

    def identity_problem(self, identity) -> str | None:
        """Why a worker's `worker_identity` disqualifies it, or None."""
        if not isinstance(identity, dict):
            return f"it could not describe itself ({type(identity).__name__}: {identity})"
        if identity.get("protocol") != PROTOCOL:
            return f"it speaks protocol {identity.get('protocol')!r}, not {PROTOCOL}"
        if identity.get("environment") != self.environment:
            theirs = identity.get("environment") or {}
            return "its grader code or libraries differ from the driver's: " + differences(
                self.environment, theirs
            )
        if identity.get("secret") != self.fingerprint:
            return (
                "it grades with a different course secret: set "
                f"{self.course.secret_env} to the driver's value on every worker"
            )
        return None

    def exclude(self, worker: str, reason: str) -> None:
        if worker not in self.excluded:
            self.excluded[worker] = reason
            note = f"excluded Dask worker {worker}: {reason}"
            self.notes.append(note)
            self.warn(f"autograde: {note}")

    def good_workers(self) -> dict[str, int]:
        """address -> threads of every worker not excluded."""
        return {w: n for w, n in self.client.nthreads().items() if w not in self.excluded}

    def reasons(self) -> str:
        return "; ".join(f"{worker} {reason}" for worker, reason in self.excluded.items()) or "none joined"

    # --- the executor interface -----------------------------------------------------------------

    def submit(self, job: Job) -> Future:
        if job.refused is not None:
            return resolved(refused_result(self.course, job).made_safe())
        return self.pool.submit(self._grade, job)

    def _grade(self, job: Job):
        task = self.task(job)
        for _ in range(len(self.client.nthreads()) + len(self.excluded) + 1):
            good = self.good_workers()
            if not good:
                raise RemoteGradingError(f"no good worker is left on {self.address}: {self.reasons()}")
            future = self.client.submit(
                grade_on_worker,
                task,
                workers=sorted(good) if self.excluded else None,
                allow_other_workers=False,
                retries=RETRIES,
                pure=False,
            )
            reply = future.result()
            try:
                result, seconds = self.receive(job, reply)
            except BadWorker as bad:
                if bad.address is None or bad.address not in good:
                    raise
                self.exclude(bad.address, str(bad))
                continue
            result.seconds = seconds
            return result.made_safe()
        raise RemoteGradingError(f"every worker refused {job.student}/{job.assignment}: {self.reasons()}")

    def close(self) -> None:
        self.client.close()
        self.pool.shutdown(wait=True, cancel_futures=True)

    # --- tasks and replies ----------------------------------------------------------------------

    def task(self, job: Job) -> dict:
        """The plain-data task for one Job."""
        assignment = self.course.assignment(job.assignment)
        if job.assignment not in self._sources:
            source = self.course.root / "source" / job.assignment / assignment.notebook
            self._sources[job.assignment] = source.read_bytes()
        notebook, size = None, 0
        try:
            notebook = read_regular(job.path, MAX_NOTEBOOK_BYTES)
            size = len(notebook)
        except UnsafeFile:
            notebook = None  # replaced since intake: the worker's reader reports an empty notebook
        return {
            "protocol": PROTOCOL,
            "environment": self.environment,
            "course_yml": self.course_yml,
            "assignment": job.assignment,
            "source_name": assignment.notebook,
            "source": self._sources[job.assignment],
            "student": job.student,
            "notebook_name": job.path.name,
            "notebook": notebook,
            "notebook_size": size,
            "notebook_path": str(job.path),
            "course_root": str(self.course.root),
        }

    def receive(self, job: Job, reply: str):
        """(SubmissionResult, seconds) from a worker's JSON reply; BadWorker if it is unusable."""
        try:
            if type(reply) is not str or len(reply) > MAX_REPLY_CHARS:
                raise ValueError("not JSON text of a sensible size")
            data = json.loads(reply)
            if type(data) is not dict:
                raise ValueError("not a JSON object")
        except ValueError as error:
            what = f"a worker's reply for {job.student}/{job.assignment}"
            raise BadWorker(f"{what} is unusable: {error}") from None
        worker = str(data.get("worker", "an unknown worker"))[:200]
        address = data.get("address") if type(data.get("address")) is str else None
        where = f"worker {worker} grading {job.student}/{job.assignment}"
        if data.get("protocol") != PROTOCOL:
            raise BadWorker(f"{where} speaks protocol {data.get('protocol')!r}, not {PROTOCOL}", address)
        if "refused" in data:
            raise BadWorker(f"{where} refused: {str(data['refused'])[:2000]}", address)
        if data.get("secret") != self.fingerprint:
            raise BadWorker(
                f"{where} grades with a different course secret: set "
                f"{self.course.secret_env} to the driver's value on every worker",
                address,
            )
        seconds = data.get("seconds")
        if type(seconds) not in (int, float) or not 0 <= seconds < 1e7:
            raise BadWorker(f"{where} reported an impossible time {seconds!r}", address)
        try:
            result = result_from_wire(
                data.get("result"), self.course, job.assignment, job.student, str(job.path)
            )
        except RemoteGradingError as error:
            raise BadWorker(f"{where} sent a result that is not valid: {error}", address) from None
        return result, float(seconds)
