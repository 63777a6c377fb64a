"""`python -m grader autograde`: grade submitted/ into nbgrader's gradebook.

Submissions are found where nbgrader keeps them, submitted/<student>/<assignment>/<notebook>.ipynb.
Worker threads only run isolated submissions (each in the sandbox); every gradebook write happens
in this driver thread, one transaction per submission, so parallel grading cannot corrupt the
gradebook. After each submission the driver also writes autograded/<student>/<assignment>/
results.json (the record that makes reruns idempotent, with the notebook's digest), a copy of the
notebook for formgrader, and feedback/<student>/<assignment>/<notebook>.html.

A rerun re-grades a submission only when its notebook changed, the course secret changed, its
results are missing from the gradebook or results.json, the grader itself failed on it last time
(not the notebook: e.g. the sandbox could not start), or --force is given; a run killed halfway
loses and duplicates nothing.

With --dask ADDRESS the same loop hands submissions to the workers of a Dask cluster instead of
local threads; grader/dask_executor.py explains what the driver accepts from them.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from grader.course import add_course_option, load_course_dir

RESULTS_FILE = "results.json"
RESULTS_VERSION = 1


class AutogradeError(RuntimeError):
    """Grading cannot start at all; the message says why."""


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
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="submissions graded in parallel (default: course.yml limits.workers)",
    )
    parser.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="gradebook SQLAlchemy URL (default: $LAYERS_GRADEBOOK_URL, else sqlite:///gradebook.db "
        "in the course dir)",
    )
    add_course_option(parser, holds="course.yml and submitted/")
    parser.add_argument("--force", action="store_true", help="re-grade every submission, changed or not")
    parser.add_argument(
        "--dask",
        default=None,
        metavar="ADDRESS",
        help="grade on the workers of this Dask scheduler (e.g. tcp://10.0.0.5:8786); "
        "gradebook writes stay here (see grader/dask_executor.py)",
    )


def run(args) -> int:
    from grader.course import CourseError
    from grader.gradebook import GradebookError, gradebook_url

    try:
        course, course_dir = load_course_dir(args.course)
        if args.workers is not None and args.workers < 1:
            raise CourseError(f"--workers must be at least 1, got {args.workers}")
        outcomes = autograde(
            course,
            course_dir,
            db_url=gradebook_url(course_dir, args.db),
            assignment_ids=args.assignments or None,
            students=args.student or None,
            workers=args.workers,
            force=args.force,
            dask=args.dask,
        )
    except (
        CourseError,
        GradebookError,
        AutogradeError,
        OSError,
    ) as error:  # OSError: e.g. an unreadable folder
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
    return 0


# --- finding submissions ---------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    student: str
    assignment: str
    path: Path  # the notebook (may not exist: graded as a recorded zero)
    digest: str
    timestamp: str | None


def file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "missing"


def find_submissions(
    course,
    course_dir: Path,
    assignment_ids=None,
    students=None,
    warn=lambda message: print(message, file=sys.stderr),
) -> list[Job]:
    """Every submission under submitted/, sorted by student then assignment."""
    known = {a.id: a for a in course.assignments}
    if assignment_ids:
        for assignment_id in assignment_ids:
            course.assignment(assignment_id)  # CourseError naming the known ids
    submitted = course_dir / "submitted"
    if not submitted.is_dir():
        raise FileNotFoundError(f"no submitted/ folder in {course_dir}: nothing to grade")
    student_dirs = sorted(p for p in submitted.iterdir() if p.is_dir() and not p.name.startswith("."))
    if students:
        missing = sorted(set(students) - {p.name for p in student_dirs})
        for student in missing:
            warn(f"autograde: no submissions from student {student!r} in {submitted}")
        student_dirs = [p for p in student_dirs if p.name in set(students)]
    jobs = []
    for student_dir in student_dirs:
        for folder in sorted(p for p in student_dir.iterdir() if p.is_dir() and not p.name.startswith(".")):
            if folder.name not in known:
                if not assignment_ids:
                    warn(
                        f"autograde: skipping {folder.relative_to(course_dir)}: "
                        f"{folder.name!r} is not an assignment in course.yml"
                    )
                continue
            if assignment_ids and folder.name not in assignment_ids:
                continue
            assignment = known[folder.name]
            path = folder / assignment.notebook
            if not path.is_file():
                others = sorted(
                    p for p in folder.glob("*.ipynb") if p.is_file() and not p.name.startswith(".")
                )
                if len(others) == 1:
                    warn(
                        f"autograde: {folder.relative_to(course_dir)} has {others[0].name} instead of "
                        f"{assignment.notebook}; grading it"
                    )
                    path = others[0]
            stamp_file = folder / "timestamp.txt"
            timestamp = (
                stamp_file.read_text(encoding="utf-8", errors="replace").strip()
                if stamp_file.is_file()
                else None
            )
            jobs.append(Job(student_dir.name, assignment.id, path, file_digest(path), timestamp or None))
    return jobs


# --- grading -----------------------------------------------------------------------------------


@dataclass
class Outcome:
    job: Job
    result: dict  # SubmissionResult.to_dict() (+ digest); from results.json when skipped
    graded: bool  # False when the previous result was still valid
    seconds: float = 0.0


def failed_result(course, assignment_id: str, path: Path, student: str, error: str):
    """A SubmissionResult for a notebook the grader itself could not handle: a recorded zero on every part."""
    from grader.result import PartResult, Status
    from grader.submission import SubmissionResult

    parts = [
        PartResult(
            p.id,
            0.0,
            p.points,
            Status.MANUAL if p.kind == "manual" else Status.ERROR,
            "graded by your instructor" if p.kind == "manual" else f"Not graded: {error}",
        )
        for p in course.assignment(assignment_id).parts
    ]
    return SubmissionResult(str(path), assignment_id, student, parts, error, retry=True)


def output_paths(course_dir: Path, job: Job, course) -> dict[str, Path]:
    assignment = course.assignment(job.assignment)
    stem = Path(assignment.notebook).stem
    graded = course_dir / "autograded" / job.student / job.assignment
    return {
        "results": graded / RESULTS_FILE,
        "notebook": graded / assignment.notebook,
        "timestamp": graded / "timestamp.txt",
        "feedback": course_dir / "feedback" / job.student / job.assignment / f"{stem}.html",
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


def secret_fingerprint(secret: str) -> str:
    """Tells whether results were graded with the same secret, without revealing it."""
    import hmac

    return hmac.new(secret.encode(), b"autograde results", hashlib.sha256).hexdigest()[:16]


def unchanged(previous: dict | None, job: Job, fingerprint: str) -> bool:
    """True when results.json holds a finished grading of this very notebook with this secret."""
    return (
        previous is not None
        and previous.get("digest") == job.digest
        and previous.get("secret") == fingerprint
        and not previous.get("retry")
    )


def still_valid(previous: dict | None, job: Job, stored: dict | None, fingerprint: str) -> bool:
    """True when results.json and the gradebook both hold this very notebook's grades."""
    if stored is None or not unchanged(previous, job, fingerprint):
        return False
    for part in previous.get("parts", []):
        if part.get("status") != "manual" and stored.get(part.get("id")) != part.get("score"):
            return False
    return True


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
    """Grade every matching submission into the gradebook; returns one Outcome per submission.

    `grade(course, assignment_id, path, student, secret, sandbox) -> SubmissionResult` defaults to
    grader.submission.grade_submission; `sandbox_factory(limits)` to grader.sandbox.Sandbox.
    `dask`: a Dask scheduler address; its workers then run grade_submission (grade and
    sandbox_factory are not used) and this thread validates and writes their results.
    """
    from grader import feedback, gradebook as gb_module
    from grader.seeding import PUBLIC_SECRET, grading_secret

    course_dir = Path(course_dir).resolve()
    stream = sys.stderr if progress_stream is None else progress_stream
    jobs = find_submissions(
        course, course_dir, assignment_ids, students, warn=lambda message: print(message, file=stream)
    )
    for assignment_id in sorted({job.assignment for job in jobs}):
        assignment = course.assignment(assignment_id)
        if not (course.root / "source" / assignment_id / assignment.notebook).is_file():
            raise AutogradeError(
                f"source/{assignment_id}/{assignment.notebook} is missing from {course.root}: "
                "grading needs the instructor's notebook (nothing was graded)"
            )
    if secret is None:
        secret = grading_secret(course.secret_env)
        if secret == PUBLIC_SECRET:
            print(
                f"autograde: warning: {course.secret_env} is not set, so per-student inputs come from the "
                "public self-check secret and students could predict them",
                file=stream,
            )
    if grade is None:
        from grader.submission import grade_submission as grade
    if sandbox_factory is None:
        from grader.sandbox import Sandbox

        def sandbox_factory(limits):
            return Sandbox(limits, isolate=True)

    workers = max(1, int(workers or course.limits.workers))

    # Starting the sandbox (a warm interpreter) takes seconds: do it while the gradebook opens.
    previous_by_job = {job: read_previous(output_paths(course_dir, job, course)["results"]) for job in jobs}
    fingerprint = secret_fingerprint(secret)
    starter = None
    if dask is None and (force or not all(unchanged(previous_by_job[job], job, fingerprint) for job in jobs)):
        starter = _SandboxStarter(sandbox_factory, course.limits)
    outcomes: list[Outcome] = []
    try:
        gradebook = gb_module.open_gradebook(db_url or gb_module.default_db_url(course_dir), course.course_id)
        try:
            for assignment_id in sorted({job.assignment for job in jobs}):
                gb_module.ensure_assignment(gradebook, course, course.assignment(assignment_id))
            todo = []
            for job in jobs:
                previous = previous_by_job[job]
                stored = gb_module.stored_scores(gradebook, course.assignment(job.assignment), job.student)
                if not force and still_valid(previous, job, stored, fingerprint):
                    outcomes.append(Outcome(job, previous, graded=False))
                else:
                    todo.append(job)
            if not todo:
                print(
                    f"autograde: all {len(jobs)} submissions are already graded (use --force to re-grade)",
                    file=stream,
                )
                return _ordered(outcomes, jobs)
            if dask is None:
                starter = starter or _SandboxStarter(sandbox_factory, course.limits)
                try:
                    sandbox = starter.get()
                except Exception as error:  # the sandbox's own error types, whatever they are
                    raise AutogradeError(f"the sandbox for student code could not start: {error}") from error
                for warning in getattr(sandbox, "warnings", []) or []:
                    print(f"autograde: warning: {warning}", file=stream)
            else:
                from grader.dask_executor import DaskGrading, RemoteGradingError, grade_on_worker

                try:
                    remote = DaskGrading(dask, course, secret)
                except RemoteGradingError as error:
                    raise AutogradeError(str(error)) from None
                print(f"autograde: grading on the Dask cluster at {dask}", file=stream)
            bar = Progress(len(todo), stream)

            def save(job: Job, result, seconds: float) -> None:
                previous = previous_by_job[job]
                changed = previous is None or previous.get("digest") != job.digest
                try:
                    gb_module.record_submission(
                        gradebook, course, result, timestamp=job.timestamp, changed=changed
                    )
                except Exception as error:  # e.g. a locked or read-only database: stop, nothing half-written
                    raise AutogradeError(
                        f"cannot write {job.student}/{job.assignment} to the gradebook: "
                        f"{gb_module.describe_error(error)}"
                    ) from error
                data = result.to_dict()
                data.update(
                    version=RESULTS_VERSION,
                    digest=job.digest,
                    secret=fingerprint,
                    seconds=round(seconds, 3),
                    retry=result.retry,
                )
                paths = output_paths(course_dir, job, course)
                feedback.write(paths["results"], json.dumps(data, indent=1, default=str) + "\n")
                feedback.write(paths["feedback"], feedback.render(course, result, course_dir))
                _copy_for_formgrader(course, job, paths)
                outcomes.append(Outcome(job, data, graded=True, seconds=seconds))
                bar.advance(f"{job.student}/{job.assignment}")

            def grade_one(job: Job):
                start = time.perf_counter()
                try:
                    result = grade(course, job.assignment, job.path, job.student, secret, sandbox)
                except Exception as error:  # grade_submission should never raise; record it if it does
                    result = failed_result(
                        course,
                        job.assignment,
                        job.path,
                        job.student,
                        f"the grader failed on this notebook ({type(error).__name__}: {error})",
                    )
                return result, time.perf_counter() - start

            if dask is None:
                pool, window = (
                    ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grade"),
                    2 * workers,
                )

                def start(job: Job):
                    return pool.submit(grade_one, job)

                def finish(job: Job, future):
                    return future.result()
            else:
                pool, window = remote.executor(), remote.window

                def start(job: Job):
                    return pool.submit(grade_on_worker, remote.task(job))

                def finish(job: Job, future):
                    try:
                        return remote.receive(job, future.result())
                    except Exception as error:  # a lost cluster, a refusing or misbehaving worker
                        raise AutogradeError(
                            f"grading {job.student}/{job.assignment} on the cluster failed "
                            f"({type(error).__name__}: {error}); every result so far is "
                            "saved, rerun to finish"
                        ) from None

            order = {job: index for index, job in enumerate(todo)}
            queue, pending = iter(todo), {}

            def top_up() -> None:
                for job in queue:
                    pending[start(job)] = job
                    if len(pending) >= window:
                        return

            try:
                with pool:
                    try:
                        top_up()
                        while pending:
                            done, _ = wait(pending, return_when=FIRST_COMPLETED)
                            for future in sorted(done, key=lambda f: order[pending[f]]):
                                job = pending.pop(future)
                                result, seconds = finish(job, future)
                                save(job, result, seconds)  # the only place that writes: this thread
                            top_up()
                    except BaseException:
                        for future in pending:
                            future.cancel()
                        raise
            finally:
                if dask is not None:
                    remote.close()
            bar.finish()
        finally:
            gradebook.close()
    finally:
        if starter is not None:
            starter.close()
    return _ordered(outcomes, jobs)


class _SandboxStarter:
    """Enters a sandbox in a background thread that lives until `close()`.

    The sandbox's warm interpreter is tied to the thread that started it (it asks the kernel to
    end it when its parent thread ends), so the same thread also waits and then leaves it.
    """

    def __init__(self, factory, limits):
        self.sandbox, self.entered, self.error = factory(limits), None, None
        self.ready, self.done = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self._hold, name="sandbox", daemon=True)
        self.thread.start()

    def _hold(self) -> None:
        try:
            self.entered = self.sandbox.__enter__()
        except BaseException as error:  # re-raised in the driver by get()
            self.error = error
            self.ready.set()
            return
        try:  # the symbolic checks' sympy, so the first notebook does not pay for it
            import grader.symbolic  # noqa: F401
        except Exception:
            pass
        self.ready.set()
        self.done.wait()
        self.sandbox.__exit__(None, None, None)

    def get(self):
        self.ready.wait()
        if self.error is not None:
            raise self.error
        return self.entered

    def close(self) -> None:
        self.done.set()
        self.thread.join()


def _ordered(outcomes: list[Outcome], jobs: list[Job]) -> list[Outcome]:
    index = {job: i for i, job in enumerate(jobs)}
    return sorted(outcomes, key=lambda outcome: index[outcome.job])


def _copy_for_formgrader(course, job: Job, paths: dict[str, Path]) -> None:
    """formgrader shows autograded/<student>/<assignment>/<notebook>.ipynb for manual grading."""
    from grader.formgrader import write_copy

    if not write_copy(course, job.assignment, job.path, paths["notebook"]):
        return
    if job.timestamp:
        paths["timestamp"].write_text(job.timestamp + "\n", encoding="utf-8")


# --- output ----------------------------------------------------------------------------------


class Progress:
    """A plain-text progress bar with ETA on a stream; one line per 10% when not a terminal."""

    def __init__(self, total: int, stream, width: int = 28):
        self.total, self.stream, self.width = total, stream, width
        self.done, self.start = 0, time.monotonic()
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.last_tenth = -1
        self._draw("")

    def advance(self, label: str) -> None:
        self.done += 1
        self._draw(label)

    def _draw(self, label: str) -> None:
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else None
        filled = int(self.width * self.done / max(self.total, 1))
        line = (
            f"grading [{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} "
            f"{_clock(elapsed)} elapsed, ETA {_clock(eta) if eta is not None else '--:--'}  {label}"
        )
        if self.tty:
            self.stream.write("\r" + line[:118].ljust(118))
        else:
            tenth = self.done * 10 // max(self.total, 1)
            if tenth == self.last_tenth:
                return
            self.last_tenth = tenth
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty:
            self.stream.write("\n")
        elapsed = time.monotonic() - self.start
        self.stream.write(f"graded {self.done} submission(s) in {elapsed:.1f} s\n")
        self.stream.flush()


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def format_table(headers: list[str], rows: list[list[str]], max_width: int = 60) -> str:
    """A plain-text table with aligned columns; long cells are cut at `max_width`."""

    def cut(text) -> str:
        text = " ".join(str(text).split())
        return text if len(text) <= max_width else text[: max_width - 1] + "…"

    rows = [[cut(cell) for cell in row] for row in rows]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    line = "  ".join("-" * w for w in widths)
    out = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip(), line]
    out += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(out)


def status_counts(parts: list[dict]) -> str:
    counts = Counter(part.get("status", "?") for part in parts)
    order = ["passed", "partial", "failed", "error", "timeout", "manual"]
    return ", ".join(
        f"{counts[s]} {s}" for s in sorted(counts, key=lambda s: (order.index(s) if s in order else 9, s))
    )


def summary_table(outcomes: list[Outcome]) -> str:
    """One row per submission: student, assignment, score/max, status counts, error."""
    if not outcomes:
        return "No submissions found."
    rows = []
    for outcome in outcomes:
        result = outcome.result
        rows.append(
            [
                outcome.job.student,
                outcome.job.assignment,
                f"{result.get('score', 0):g}/{result.get('max_score', 0):g}",
                status_counts(result.get("parts", [])),
                "" if outcome.graded else "unchanged",
                result.get("error") or "",
            ]
        )
    graded = sum(o.graded for o in outcomes)
    table = format_table(["student", "assignment", "score", "parts", "note", "error"], rows)
    return f"{table}\n{graded} graded, {len(outcomes) - graded} unchanged since the last run."
