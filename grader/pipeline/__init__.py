"""Grading a set of submissions: find them, grade them on an executor, record what is still valid.

- `jobs`: finding submissions under submitted/ (regular files only) and fingerprinting them;
- `executors`: `LocalExecutor` (threads over a warm sandbox) behind the executor interface,
  `submit(job) -> Future[SubmissionResult]`; `cluster.DaskExecutor` is the same over Dask;
- `warm_sandbox`: the sandbox started once in a thread of its own and shared by the grading threads;
- `remote`: what a Dask worker runs and the wire format the driver accepts from it;
- `records`: results.json, the fingerprints that keep it valid, and `Outcome`;
- `progress`: the progress bar and the tables a run prints.

grader.autograde drives them for `python -m grader autograde`.
"""
