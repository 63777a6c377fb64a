"""`python -m grader autograde`: grade submitted/ into nbgrader's gradebook.

Submissions are found where nbgrader keeps them, submitted/<student>/<assignment>/<notebook>.ipynb
(grader.pipeline.jobs; only regular files are read). An executor grades them (local threads over
one warm sandbox, or the workers of a Dask cluster with --dask); every write happens in this
driver thread, one gradebook transaction per submission, so parallel grading cannot corrupt the
gradebook. After each submission the driver writes the gradebook, the feedback page
feedback/<student>/<assignment>/<notebook>.html, a copy of the notebook for formgrader, and last
autograded/<student>/<assignment>/results.json, the record that makes reruns idempotent.

A rerun re-grades a submission only when its notebook, the course secret or the assignment's
course.yml entry (parts, points, limits) changed, its results are missing from the gradebook or
results.json, the grader itself failed on it last time, or --force is given; a run killed
halfway loses and duplicates nothing. A submission whose record the gradebook refuses is
recorded as that student's zero with the reason, the others are graded, and the exit status is 1.
"""

from __future__ import annotations

import sys
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path

from grader import feedback
from grader import gradebook as gb
from grader.course import CourseError, add_course_option, add_workers_option, load_course_dir
from grader.files import write_private
from grader.formgrader import write_copy
from grader.gradebook import GradebookError, add_db_option
from grader.pipeline.executors import LocalExecutor, RemoteGradingError, SandboxStartError
from grader.pipeline.jobs import Job, find_submissions
from grader.pipeline.progress import Progress, summary_table
from grader.pipeline.records import (
    RESULTS_FILE,
    Fingerprints,
    Outcome,
    output_paths,
    read_previous,
    record,
    still_valid,
    unchanged,
    write_record,
)
from grader.result import zero_result
from grader.seeding import PUBLIC_SECRET, grading_secret

__all__ = ["RESULTS_FILE", "AutogradeError", "Job", "Outcome", "autograde", "find_submissions", "run"]


def add_arguments(parser):
    parser.add_argument(
        "assignments",
        nargs="*",
        metavar="ASSIGNMENT",
        help="assignment ids to grade (default: every assignment with submissions)",
    )
    parser.add_argument(
        "--student", action="append", default=[], metavar="ID", help="grade only this student (repeatable)"
    )
    add_workers_option(parser)
    add_db_option(parser)
    add_course_option(parser, holds="course.yml and submitted/")
    parser.add_argument("--force", action="store_true", help="re-grade every submission, changed or not")
    parser.add_argument(
        "--dask",
        default=None,
        metavar="ADDRESS",
        help="grade on the workers of this Dask scheduler (e.g. tcp://10.0.0.5:8786); "
        "gradebook writes stay here (see grader/pipeline/remote.py)",
    )


def run(args) -> int:
    try:
        course, course_dir = load_course_dir(args.course)
        outcomes = autograde(
            course,
            course_dir,
            db_url=gb.gradebook_url(course_dir, args.db),
            assignment_ids=args.assignments or None,
            students=args.student or None,
            workers=args.workers,
            force=args.force,
            dask=args.dask,
        )
    except (CourseError, GradebookError, AutogradeError, OSError) as error:  # OSError: an unreadable folder
        print(f"autograde: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "\nautograde: interrupted; every submission graded so far is saved, rerun to finish.",
            file=sys.stderr,
        )
        return 130
    print(summary_table(outcomes))
    warnings = dict.fromkeys(w for o in outcomes if o.graded for w in o.result.get("warnings") or [])
    for warning in list(warnings)[:10]:
        print(f"autograde: warning: {warning}", file=sys.stderr)
    problems = [o for o in outcomes if o.problem]
    for outcome in problems:
        job = outcome.job
        print(f"autograde: {job.student}/{job.assignment}: {outcome.problem}", file=sys.stderr)
    if problems:
        print(
            f"autograde: {len(problems)} submission(s) were recorded as zero because their record "
            "failed; every other submission is graded",
            file=sys.stderr,
        )
        return 1
    return 0


def autograde(
    course,
    course_dir: Path,
    *,
    db_url: str | None = None,
    assignment_ids=None,
    students=None,
    workers: int | None = None,
    force: bool = False,
    secret: str | None = None,
    grade=None,
    progress_stream=None,
    sandbox_factory=None,
    dask: str | None = None,
) -> list[Outcome]:
    """Grade every matching submission into the gradebook; returns one records.Outcome per submission.

    `grade(course, assignment_id, path, student, secret, sandbox) -> SubmissionResult` defaults to
    grader.submission.grade_submission; `sandbox_factory(limits)` to an isolated Sandbox.
    `dask`: a Dask scheduler address; its workers then grade (grade and sandbox_factory are not
    used). `secret` defaults to the course's secret_env variable.
    """
    course_dir = Path(course_dir).resolve()
    stream = sys.stderr if progress_stream is None else progress_stream

    def say(message: str) -> None:
        print(message, file=stream)

    jobs = find_submissions(course, course_dir, assignment_ids, students, warn=say)
    _check_sources(course, jobs)
    secret = _course_secret(course, say) if secret is None else secret
    fingerprints = Fingerprints.of(course, secret, {job.assignment for job in jobs})
    previous = {job: read_previous(output_paths(course_dir, job, course)["results"]) for job in jobs}
    workers = max(1, int(workers or course.limits.workers))

    def local_executor():
        return LocalExecutor(course, secret, workers, sandbox_factory=sandbox_factory, grade=grade)

    # A warm sandbox takes seconds to start: it starts while the gradebook opens.
    needs_grading = force or not all(unchanged(previous[job], job, fingerprints) for job in jobs)
    executor = local_executor() if dask is None and needs_grading else None
    outcomes: list[Outcome] = []
    try:
        gradebook = gb.open_gradebook(db_url or gb.default_db_url(course_dir), course.course_id)
        try:
            for assignment_id in sorted({job.assignment for job in jobs}):
                gb.ensure_assignment(gradebook, course, course.assignment(assignment_id))
            todo = []
            for job in jobs:
                stored = gb.stored_scores(gradebook, course.assignment(job.assignment), job.student)
                if not force and still_valid(previous[job], job, stored, fingerprints):
                    outcomes.append(Outcome(job, previous[job], graded=False))
                else:
                    todo.append(job)
            if not todo:
                say(f"autograde: all {len(jobs)} submissions are already graded (use --force to re-grade)")
                return _ordered(outcomes, jobs)
            if dask is None:
                executor = executor or local_executor()
                _wait_ready(executor, say)
            else:
                executor = _dask_executor(dask, course, secret, say)
            bar = Progress(len(todo), stream)
            saver = _Saver(course, course_dir, gradebook, previous, fingerprints)
            for job, result in _graded(executor, todo):
                outcomes.append(saver.save(job, result))
                bar.advance(f"{job.student}/{job.assignment}")
            bar.finish()
            for note in getattr(executor, "notes", []):
                say(f"autograde: {note}")
        finally:
            gradebook.close()
    finally:
        if executor is not None:
            executor.close()
    return _ordered(outcomes, jobs)


class AutogradeError(RuntimeError):
    """Grading cannot start or go on at all; the message says why."""


def _check_sources(course, jobs: list[Job]) -> None:
    for assignment_id in sorted({job.assignment for job in jobs}):
        assignment = course.assignment(assignment_id)
        if not (course.root / "source" / assignment_id / assignment.notebook).is_file():
            raise AutogradeError(
                f"source/{assignment_id}/{assignment.notebook} is missing from {course.root}: "
                "grading needs the instructor's notebook (nothing was graded)"
            )


def _course_secret(course, say) -> str:
    secret = grading_secret(course.secret_env)
    if secret == PUBLIC_SECRET:
        say(
            f"autograde: warning: {course.secret_env} is not set, so per-student inputs come from the "
            "public self-check secret and students could predict them"
        )
    return secret


def _wait_ready(executor: LocalExecutor, say) -> None:
    try:
        sandbox = executor.wait_ready()
    except SandboxStartError as error:
        raise AutogradeError(str(error)) from None
    for warning in getattr(sandbox, "warnings", []) or []:
        say(f"autograde: warning: {warning}")


def _dask_executor(address: str, course, secret: str, say):
    try:  # distributed takes 1.5 s to import: only runs with --dask pay for it
        from grader.pipeline.cluster import DaskExecutor
    except ImportError:
        raise AutogradeError(
            "--dask needs the dask and distributed packages: "
            "pip install 'layers-course-grader[dask]' (or make setup)"
        ) from None
    try:
        executor = DaskExecutor(address, course, secret, warn=say)
    except RemoteGradingError as error:
        raise AutogradeError(str(error)) from None
    say(f"autograde: grading on the Dask cluster at {address}")
    return executor


def _graded(executor, jobs: list[Job]):
    """(job, SubmissionResult) as the executor finishes them, in job order among those done together.

    At most executor.window submissions are in flight; on any error the rest are cancelled.
    """
    order = {job: index for index, job in enumerate(jobs)}
    queue, pending = iter(jobs), {}

    def top_up() -> None:
        for job in queue:
            pending[executor.submit(job)] = job
            if len(pending) >= executor.window:
                return

    try:
        top_up()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: order[pending[f]]):
                job = pending.pop(future)
                try:
                    result = future.result()
                except RemoteGradingError as error:  # a lost cluster, or no good worker left
                    raise AutogradeError(
                        f"grading {job.student}/{job.assignment} on the cluster failed ({error}); "
                        "every result so far is saved, rerun to finish"
                    ) from None
                yield job, result
            top_up()
    finally:
        for future in pending:
            future.cancel()


class _Saver:
    """Writes one graded submission: gradebook, feedback page, formgrader copy, then results.json."""

    def __init__(self, course, course_dir: Path, gradebook, previous: dict, fingerprints: Fingerprints):
        self.course, self.course_dir, self.gradebook = course, course_dir, gradebook
        self.previous, self.fingerprints = previous, fingerprints

    def save(self, job: Job, result) -> Outcome:
        previous = self.previous.get(job)
        changed = previous is None or previous.get("digest") != job.digest
        problem, book = None, self.gradebook
        try:
            gb.record_submission(book, self.course, result, timestamp=job.timestamp, changed=changed)
        except Exception as error:  # whatever this record holds, the student gets a recorded zero
            problem = f"the gradebook refused its record ({gb.describe_error(error)})"
            assignment = self.course.assignment(job.assignment)
            result = zero_result(assignment, job.path, job.student, problem, retry=True).made_safe()
            try:
                gb.record_submission(book, self.course, result, timestamp=None, changed=changed)
            except Exception as second:  # e.g. a locked or read-only database: nothing can be recorded
                raise AutogradeError(
                    f"cannot write {job.student}/{job.assignment} to the gradebook: "
                    f"{gb.describe_error(second)}"
                ) from second
        paths = output_paths(self.course_dir, job, self.course)
        write_private(paths["feedback"], feedback.render(self.course, result, self.course_dir))
        self._copy_for_formgrader(job, paths)
        data = record(result, job, self.fingerprints)
        write_record(paths["results"], data)
        return Outcome(job, data, graded=True, seconds=result.seconds, problem=problem)

    def _copy_for_formgrader(self, job: Job, paths: dict[str, Path]) -> None:
        """formgrader shows autograded/<student>/<assignment>/<notebook>.ipynb for manual grading."""
        if job.refused is not None:
            paths["notebook"].unlink(missing_ok=True)
            return
        if not write_copy(self.course, job.assignment, job.path, paths["notebook"]):
            return
        if job.timestamp:
            write_private(paths["timestamp"], job.timestamp + "\n")


def _ordered(outcomes: list[Outcome], jobs: list[Job]) -> list[Outcome]:
    index = {job: i for i, job in enumerate(jobs)}
    return sorted(outcomes, key=lambda outcome: index[outcome.job])
