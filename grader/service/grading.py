"""The service's grading backend: the pipeline's executors, so the same sandbox and checks as `autograde`.

`Grading(course, secret, workers, dask=None).submit(student, assignment, notebook, public_only,
on_start)` returns a `concurrent.futures.Future` of a `SubmissionResult`. Public-only attempts
(course policy before the deadline) are graded with the public self-check secret; a Dask worker
reads the course secret from its own environment, so those are always graded by the local pool.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path

from grader.pipeline.executors import LocalExecutor
from grader.pipeline.jobs import Job
from grader.seeding import PUBLIC_SECRET
from grader.submission import grade_submission


class Grading:
    def __init__(self, course, secret: str, workers: int, dask: str | None = None, sandbox_factory=None):
        self.course, self.secret, self.workers = course, secret, max(1, int(workers))
        self.dask_address, self.sandbox_factory = dask, sandbox_factory
        self._pending: dict[str, tuple[bool, object]] = {}  # notebook path -> (public only, on_start)
        self._lock = threading.Lock()
        self._local: LocalExecutor | None = None
        self._remote = None

    def start(self) -> None:
        """Connect to the cluster (raises when it cannot grade), or start warming the local sandbox."""
        if self.dask_address:
            from grader.pipeline.cluster import DaskExecutor

            self._remote = DaskExecutor(self.dask_address, self.course, self.secret)
        else:
            self.local()

    def ready(self) -> None:
        """Wait until the local sandbox is warm; raises SandboxStartError when it cannot start."""
        if self._remote is None:
            self.local().wait_ready()

    def local(self) -> LocalExecutor:
        with self._lock:
            if self._local is None:
                self._local = LocalExecutor(
                    self.course, self.secret, self.workers, self.sandbox_factory, grade=self._grade
                )
            return self._local

    def _grade(self, course, assignment, path, student, secret, sandbox):
        """Runs on a grading thread: says that grading began, then grades with the attempt's secret."""
        with self._lock:
            public_only, on_start = self._pending.pop(str(path), (False, None))
        if on_start is not None:
            on_start()
        return grade_submission(
            course, assignment, path, student, PUBLIC_SECRET if public_only else secret, sandbox
        )

    def submit(
        self, student: str, assignment: str, notebook: Path, public_only: bool, on_start=None
    ) -> Future:
        """A future of the SubmissionResult of one notebook (never an exception for bad input).

        on_start: called with no argument when grading begins (after waiting for a free worker).
        """
        job = Job.for_notebook(student, assignment, notebook)
        if self._remote is not None and not public_only:
            if on_start is not None:
                on_start()
            return self._remote.submit(job)
        with self._lock:
            self._pending[str(job.path)] = (public_only, on_start)
        return self.local().submit(job)

    def close(self) -> None:
        if self._remote is not None:
            self._remote.close()
        if self._local is not None:
            self._local.close()
