"""The service's grading backend: the same sandbox and checks as `autograde`, locally or on Dask.

`Grading(course, secret, workers, dask=None).submit(student, assignment, notebook, public_only)`
returns a `concurrent.futures.Future` of a `SubmissionResult`. Public-only attempts (course policy
before the deadline) are graded with the public self-check secret; a Dask worker reads the course
secret from its own environment, so those are always graded by the local pool.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path


class Grading:
    def __init__(self, course, secret: str, workers: int, dask: str | None = None, sandbox_factory=None):
        self.course, self.secret, self.workers = course, secret, max(1, int(workers))
        self.dask_address = dask
        self.sandbox_factory = sandbox_factory
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="service-grade")
        self._starter = None
        self._remote = None
        self._remote_executor = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the warm sandbox (local) or connect to the cluster; raises when neither can work."""
        if self.dask_address:
            from grader.dask_executor import DaskGrading

            self._remote = DaskGrading(self.dask_address, self.course, self.secret)
            self._remote_executor = self._remote.executor()
        else:
            self._local_sandbox()

    def _local_sandbox(self):
        with self._lock:
            if self._starter is None:
                from grader.autograde import _SandboxStarter

                factory = self.sandbox_factory
                if factory is None:
                    from grader.sandbox import Sandbox

                    def factory(limits):
                        return Sandbox(limits, isolate=True)

                self._starter = _SandboxStarter(factory, self.course.limits)
        return self._starter.get()

    def submit(
        self, student: str, assignment: str, notebook: Path, public_only: bool, on_start=None
    ) -> Future:
        """A future of the SubmissionResult of one notebook (never an exception for bad input).

        on_start: called with no argument when grading begins (after waiting for a free worker).
        """
        if self._remote is not None and not public_only:
            if on_start is not None:
                on_start()
            return self._submit_remote(student, assignment, Path(notebook))
        from grader.seeding import PUBLIC_SECRET

        secret = PUBLIC_SECRET if public_only else self.secret
        return self._pool.submit(self._grade_local, student, assignment, Path(notebook), secret, on_start)

    def _grade_local(self, student, assignment, notebook, secret, on_start):
        from grader.autograde import failed_result
        from grader.submission import grade_submission

        if on_start is not None:
            on_start()
        try:
            sandbox = self._local_sandbox()
            return grade_submission(self.course, assignment, notebook, student, secret, sandbox)
        except Exception as error:  # grade_submission itself never raises for bad input
            return failed_result(
                self.course,
                assignment,
                notebook,
                student,
                f"the grader failed ({type(error).__name__}: {error})",
            )

    def _submit_remote(self, student, assignment, notebook) -> Future:
        from grader.autograde import Job, failed_result, file_digest
        from grader.dask_executor import grade_on_worker

        job = Job(student, assignment, notebook, file_digest(notebook), None)
        outer: Future = Future()
        inner = self._remote_executor.submit(grade_on_worker, self._remote.task(job))

        def done(future):
            try:
                result, _ = self._remote.receive(job, future.result())
            except Exception as error:
                result = failed_result(
                    self.course, assignment, notebook, student, f"the cluster could not grade it: {error}"
                )
                result.retry = True
            outer.set_result(result)

        inner.add_done_callback(done)
        return outer

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._remote is not None:
            self._remote.close()
        if self._starter is not None:
            self._starter.close()
