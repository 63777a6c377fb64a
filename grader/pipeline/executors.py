"""Executors grade Jobs: one interface, local threads or a Dask cluster behind it.

    executor = LocalExecutor(course, secret, workers=4)
    future = executor.submit(Job.for_notebook("ada", "01_shapes", path))
    result = future.result()          # a SubmissionResult, made safe to store
    executor.close()

`submit(job) -> concurrent.futures.Future[SubmissionResult]` never fails for anything in the
notebook: a refused or ungradable submission resolves to a recorded zero with the reason. The
result's text is made safe once, here (grader.text), before anyone stores it. `window` says how
many submissions are worth keeping in flight. grader.pipeline.cluster.DaskExecutor is the same
interface over the workers of a Dask cluster.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from grader.pipeline.jobs import Job
from grader.pipeline.warm_sandbox import WarmSandbox, isolated_sandbox
from grader.result import SubmissionResult, zero_result
from grader.submission import grade_submission


class Executor(Protocol):
    window: int

    def submit(self, job: Job) -> Future: ...

    def close(self) -> None: ...


class RemoteGradingError(RuntimeError):
    """A cluster cannot grade, or a worker's reply cannot be trusted; the message says why."""


class SandboxStartError(RuntimeError):
    """The sandbox for student code could not start; the message says why."""


def refused_result(course, job: Job) -> SubmissionResult:
    """The recorded zero of a submission intake refused (a link, FIFO, oversized file...)."""
    reason = f"The submission could not be read safely: {job.refused}"
    return zero_result(course.assignment(job.assignment), job.path, job.student, reason)


def failed_result(course, job: Job, error: BaseException) -> SubmissionResult:
    """The recorded zero of a submission the grader itself failed on; the next run tries again."""
    reason = f"the grader failed on this notebook ({type(error).__name__}: {error})"
    return zero_result(course.assignment(job.assignment), job.path, job.student, reason, retry=True)


def resolved(result: SubmissionResult) -> Future:
    """A Future that already holds `result`."""
    future = Future()
    future.set_result(result)
    return future


class LocalExecutor:
    """Grades submissions on `workers` threads of this process, each in the one warm sandbox.

    course: a course.Course; secret: the course secret (per-student inputs); workers: how many
    submissions are graded at once; sandbox_factory(limits): the sandbox (default: an isolated
    grader.sandbox.Sandbox); grade: grade_submission's signature (tests pass a stand-in).
    The sandbox starts in the background at once; `wait_ready()` raises SandboxStartError if it
    cannot start, and a submission submitted then resolves to a zero to be graded again.
    """

    def __init__(self, course, secret: str, workers: int = 2, sandbox_factory=None, grade=None):
        self.course, self.secret = course, secret
        self.grade = grade or grade_submission
        self.window = 2 * max(1, int(workers))
        self.warm = WarmSandbox(sandbox_factory or isolated_sandbox, course.limits)
        self.pool = ThreadPoolExecutor(max_workers=max(1, int(workers)), thread_name_prefix="grade")

    def wait_ready(self):
        """The started sandbox (its `warnings` are worth showing); SandboxStartError if it failed."""
        try:
            return self.warm.get()
        except Exception as error:  # the sandbox's own error types, whatever they are
            raise SandboxStartError(f"the sandbox for student code could not start: {error}") from error

    def submit(self, job: Job) -> Future:
        if job.refused is not None:
            return resolved(refused_result(self.course, job).made_safe())
        return self.pool.submit(self._grade, job)

    def _grade(self, job: Job) -> SubmissionResult:
        start = time.perf_counter()
        try:
            sandbox = self.wait_ready()
            result = self.grade(self.course, job.assignment, job.path, job.student, self.secret, sandbox)
        except Exception as error:  # grade_submission never raises for a notebook; record it if it does
            result = failed_result(self.course, job, error)
        result.seconds = time.perf_counter() - start
        return result.made_safe()

    def close(self) -> None:
        """Cancel what has not started, wait for what has, and stop the sandbox."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.warm.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
