"""`autograde --dask ADDRESS`: grade submissions on the workers of a Dask distributed cluster.

Design: every Dask worker runs the trusted grader itself (`grade_submission`, the same code as
a local run), with the student's code isolated in that worker's own sandbox, and sends the
verdicts back as plain JSON text. The driver rebuilds them with `result_from_wire`, which
accepts only what `grade_submission` promises: exactly the assignment's parts in course.yml
order, each with its course.yml points as maximum, a finite score in [0, max], a known status
(manual only on manual parts), text feedback and text misconception codes. Anything else stops
the run with an error naming the worker; every gradebook write still happens in the driver.

What a task carries, as plain data: the driver's course.yml text, the assignment's source
notebook, the submitted notebook's bytes, the student id, and fingerprints of the grader code
and library versions. A worker refuses a task when its grader code or libraries differ from the
driver's, and every reply names the fingerprint of the course secret the worker graded with
(read from the course's `secret_env` variable on the worker), which must match the driver's.
Worker temp paths in the replies are replaced by the driver's paths, so results are identical
to a local run.

Trust boundary: the worker machines, their grader checkout and their Python environment are
as trusted as the driver (they compute the verdicts, and Dask's own messages use pickle); the
student code is not trusted and runs only inside the sandbox, in a private network namespace
when the worker runs as root, so it can reach neither the scheduler nor other workers. The
driver's checks catch a misconfigured or out-of-date worker, not a compromised one.

A worker started by a Dask nanny is a daemonic process; its first task makes it an ordinary one
so that the tensor-parallel checks can start their gloo rank processes there.

Each worker process holds one long-lived `Sandbox`, started lazily on its first task by a
dedicated thread that lives as long as the sandbox (the warm interpreter dies with its starting
thread) and closed when the worker shuts down.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import math
import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

PROTOCOL = 1
RETRIES = 2
WORKER_WAIT_S = 60
CONNECT_TIMEOUT_S = 30
PLUGIN_NAME = "layers-grader-sandbox"
MAX_TEXT_CHARS = 1 << 20
MAX_REPLY_CHARS = 64 << 20
VERSIONED_PACKAGES = ("numpy", "torch", "sympy", "dask", "distributed")


class RemoteGradingError(RuntimeError):
    """A worker's reply cannot be trusted or the cluster cannot grade; the message says why."""


# --- what both sides must agree on ----------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def environment_fingerprint() -> dict[str, str]:
    """{"grader": digest of the grader's and layerlab's source, "python": "3.11", package: version...}."""
    import sys
    from importlib.metadata import PackageNotFoundError, version

    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted([*(root / "grader").rglob("*.py"), *(root / "layerlab").rglob("*.py")]):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    found = {
        "grader": digest.hexdigest()[:16],
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
    }
    for name in VERSIONED_PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "missing"
    return found


def _differences(mine: dict, theirs: dict) -> str:
    names = sorted(set(mine) | set(theirs))
    return ", ".join(
        f"{name} {theirs.get(name)!r} (driver: {mine.get(name)!r})"
        for name in names
        if mine.get(name) != theirs.get(name)
    )


# --- the worker side ------------------------------------------------------------------------------

_sandboxes: dict[tuple[int, str], object] = {}
_sandboxes_lock = threading.Lock()
_courses: dict[str, object] = {}


def worker_sandbox(limits):
    """This process's sandbox for `limits`, started on first use by a long-lived holder thread."""
    from grader.autograde import _SandboxStarter
    from grader.sandbox import Sandbox

    key = (os.getpid(), repr(limits))
    with _sandboxes_lock:
        starter = _sandboxes.get(key)
        if starter is None:
            if not _sandboxes:
                atexit.register(close_worker_sandboxes)
            starter = _sandboxes[key] = _SandboxStarter(lambda lim: Sandbox(lim, isolate=True), limits)
    try:
        return starter.get()
    except BaseException:
        with _sandboxes_lock:
            if _sandboxes.get(key) is starter:
                del _sandboxes[key]
        starter.close()
        raise


def close_worker_sandboxes() -> None:
    """Close every sandbox this process started (a worker's shutdown calls this)."""
    with _sandboxes_lock:
        starters = [s for (pid, _), s in _sandboxes.items() if pid == os.getpid()]
        _sandboxes.clear()
    for starter in starters:
        starter.close()


def _worker_course(course_yml: str, assignment, source_name: str, source: bytes):
    """A Course loaded from a private copy of the driver's course.yml and source notebook."""
    from grader.course import load_course

    key = hashlib.sha256(course_yml.encode() + b"\0" + assignment.encode() + b"\0" + source).hexdigest()
    with _sandboxes_lock:
        if key not in _courses:
            root = Path(tempfile.mkdtemp(prefix="grader-course-"))
            atexit.register(shutil.rmtree, root, True)
            (root / "course.yml").write_text(course_yml, encoding="utf-8")
            folder = root / "source" / assignment
            folder.mkdir(parents=True)
            (folder / source_name).write_bytes(source)
            _courses[key] = load_course(root / "course.yml")
        return _courses[key]


def allow_child_processes() -> None:
    """Let this worker start processes: a Dask nanny starts workers as daemonic processes, which
    multiprocessing forbids to have children, and the tensor-parallel checks start gloo ranks
    (with their own deadline, so none outlives its check)."""
    import multiprocessing

    process = multiprocessing.current_process()
    if process.daemon:
        process.daemon = False


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def grade_on_worker(task: dict) -> str:
    """Run on a Dask worker: grade one submission; returns the reply as JSON text.

    task: the plain-data dict built by `DaskGrading.task`. The reply is {"protocol", "worker",
    "secret" (fingerprint), "seconds", "result"} or {"protocol", "worker", "refused": reason}.
    """
    from grader.autograde import failed_result, secret_fingerprint
    from grader.seeding import grading_secret
    from grader.submission import grade_submission

    reply = {"protocol": PROTOCOL, "worker": worker_name()}
    mine = environment_fingerprint()
    if task.get("protocol") != PROTOCOL or task.get("environment") != mine:
        reply["refused"] = "its grader code or libraries differ from the driver's: " + (
            _differences(task.get("environment") or {}, mine) or "protocol version"
        )
        return json.dumps(reply)
    allow_child_processes()
    start = time.perf_counter()
    workspace = Path(tempfile.mkdtemp(prefix="grader-submission-"))
    try:
        course = _worker_course(task["course_yml"], task["assignment"], task["source_name"], task["source"])
        secret = grading_secret(course.secret_env)
        try:
            sandbox = worker_sandbox(course.limits)
        except Exception as error:  # the sandbox's own error types
            reply["refused"] = f"the sandbox for student code could not start there: {error}"
            return json.dumps(reply)
        folder = workspace / "submission"
        folder.mkdir()
        notebook = folder / (Path(task["notebook_name"]).name or "notebook.ipynb")
        if task["notebook"] is not None:
            notebook.write_bytes(task["notebook"])
        elif task.get("notebook_size"):
            with open(notebook, "wb") as sparse:  # too large to send; only its size matters
                sparse.truncate(task["notebook_size"])
        try:
            result = grade_submission(course, task["assignment"], notebook, task["student"], secret, sandbox)
        except Exception as error:  # grade_submission should never raise; record it if it does
            result = failed_result(
                course,
                task["assignment"],
                notebook,
                task["student"],
                f"the grader failed on this notebook ({type(error).__name__}: {error})",
            )
        places = {
            str(notebook): task["notebook_path"],
            str(folder): str(Path(task["notebook_path"]).parent),
            str(course.root): task["course_root"],
        }
        reply.update(
            secret=secret_fingerprint(secret),
            seconds=time.perf_counter() - start,
            result=_relocated(result_to_wire(result), places),
        )
        return json.dumps(reply)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def _relocated(value, places: dict[str, str]):
    """`value` with every worker path in its text replaced by the driver's path for it."""
    if isinstance(value, str):
        for worker_path in sorted(places, key=len, reverse=True):
            value = value.replace(worker_path, places[worker_path])
        return value
    if isinstance(value, list):
        return [_relocated(item, places) for item in value]
    if isinstance(value, dict):
        return {key: _relocated(item, places) for key, item in value.items()}
    return value


try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # the driver reports the missing package when --dask is used
    WorkerPlugin = object


class SandboxCleanup(WorkerPlugin):
    """Dask worker plugin: closes the worker's sandboxes when the worker shuts down."""

    def teardown(self, worker) -> None:
        close_worker_sandboxes()


def _has_cleanup_plugin(dask_scheduler) -> bool:
    return PLUGIN_NAME in dask_scheduler.worker_plugins


# --- the wire format ------------------------------------------------------------------------------


def result_to_wire(result) -> dict:
    """A SubmissionResult as JSON-ready data, with the answers the gradebook needs."""
    data = result.to_dict()
    data["answers"] = dict(getattr(result, "answers", {}) or {})
    data["retry"] = result.retry
    return data


def _text(value, what: str, limit: int = MAX_TEXT_CHARS) -> str:
    if type(value) is not str or len(value) > limit:
        raise RemoteGradingError(f"{what} is not text of at most {limit} characters")
    return value


def result_from_wire(data, course, assignment_id: str, student: str, notebook_path: str):
    """Rebuild a worker's result as a SubmissionResult, accepting only what grade_submission promises.

    data: the "result" of a reply, decoded from JSON. Raises RemoteGradingError naming the problem.
    """
    from grader.result import PartResult, Status
    from grader.submission import SubmissionResult

    if type(data) is not dict:
        raise RemoteGradingError("the result is not a JSON object")
    if data.get("assignment") != assignment_id or data.get("student") != student:
        raise RemoteGradingError(
            f"the result is for {data.get('student')!r}/{data.get('assignment')!r}, "
            f"not {student!r}/{assignment_id!r}"
        )
    assignment = course.assignment(assignment_id)
    raw_parts = data.get("parts")
    expected_ids = [part.id for part in assignment.parts]
    if type(raw_parts) is not list or [type(p) is dict and p.get("id") for p in raw_parts] != expected_ids:
        raise RemoteGradingError(f"the result's parts are not exactly {expected_ids} in order")
    parts = []
    for part, raw in zip(assignment.parts, raw_parts):
        where = f"part {part.id}"
        score, max_score = raw.get("score"), raw.get("max_score")
        if type(score) not in (int, float) or type(max_score) not in (int, float) or not math.isfinite(score):
            raise RemoteGradingError(f"{where} has a non-numeric score")
        if float(max_score) != float(part.points):
            raise RemoteGradingError(f"{where} claims {max_score} points; course.yml gives {part.points}")
        if not 0 <= score <= max_score:
            raise RemoteGradingError(f"{where} has score {score} outside [0, {max_score}]")
        if raw.get("status") not in {status.value for status in Status}:
            raise RemoteGradingError(f"{where} has an unknown status {raw.get('status')!r}")
        if (raw["status"] == Status.MANUAL) != (part.kind == "manual") and not (
            part.kind == "manual" and score == 0
        ):
            raise RemoteGradingError(f"{where} has status {raw['status']!r} but is a {part.kind} part")
        codes = raw.get("misconceptions")
        if type(codes) is not list or not all(type(code) is str and len(code) <= 100 for code in codes):
            raise RemoteGradingError(f"{where} has misconception codes that are not a list of short texts")
        parts.append(
            PartResult(
                part.id,
                float(score),
                float(max_score),
                Status(raw["status"]),
                _text(raw.get("feedback"), f"{where}'s feedback"),
                tuple(codes),
            )
        )
    error = data.get("error")
    if error is not None:
        error = _text(error, "the error")
    warnings = data.get("warnings")
    if type(warnings) is not list:
        raise RemoteGradingError("the warnings are not a list")
    answers = data.get("answers")
    if type(answers) is not dict or not set(answers) <= {p.id for p in assignment.parts}:
        raise RemoteGradingError("the answers are not a mapping from part ids to text")
    answers = {key: _text(value, f"the answer to {key}", MAX_REPLY_CHARS) for key, value in answers.items()}
    return SubmissionResult(
        notebook_path,
        assignment_id,
        student,
        parts,
        error,
        [_text(warning, "a warning") for warning in warnings],
        answers,
        retry=data.get("retry") is True,
    )


# --- the driver side ------------------------------------------------------------------------------


class DaskGrading:
    """The driver's connection to a Dask cluster: builds tasks and checks replies.

    grading = DaskGrading(address, course, secret)
    executor = grading.executor()                        # a concurrent.futures.Executor
    future = executor.submit(grade_on_worker, grading.task(job))
    result, seconds = grading.receive(job, future.result())
    grading.close()
    """

    def __init__(
        self,
        address: str,
        course,
        secret: str,
        worker_wait_s: float = WORKER_WAIT_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ):
        try:
            from distributed import Client
        except ImportError:
            raise RemoteGradingError(
                "--dask needs the dask and distributed packages: "
                "pip install 'layers-course-grader[dask]' (or make setup)"
            ) from None
        from grader.autograde import secret_fingerprint

        self.course, self.address = course, address
        self.fingerprint = secret_fingerprint(secret)
        self.environment = environment_fingerprint()
        self.course_yml = course.path.read_text(encoding="utf-8")
        self._sources: dict[str, bytes] = {}
        try:
            self.client = Client(address, timeout=connect_timeout_s, set_as_default=False)
        except OSError as error:
            raise RemoteGradingError(f"cannot reach the Dask scheduler at {address}: {error}") from None
        try:
            self.client.wait_for_workers(1, timeout=worker_wait_s)
            if not self.client.run_on_scheduler(_has_cleanup_plugin):  # re-registering would close sandboxes
                self.client.register_plugin(SandboxCleanup(), name=PLUGIN_NAME)
            threads = sum(self.client.nthreads().values())
        except Exception as error:
            self.client.close()
            raise RemoteGradingError(
                f"the Dask cluster at {address} has no usable worker (waited {worker_wait_s:g} s): {error}"
            ) from None
        self.window = max(2, 2 * threads)

    def executor(self):
        """A concurrent.futures.Executor running tasks on the cluster (lost workers' tasks rerun)."""
        return self.client.get_executor(retries=RETRIES, pure=False)

    def task(self, job) -> dict:
        """The plain-data task for one autograde Job."""
        from grader.submission import MAX_NOTEBOOK_BYTES

        assignment = self.course.assignment(job.assignment)
        if job.assignment not in self._sources:
            source = self.course.root / "source" / job.assignment / assignment.notebook
            self._sources[job.assignment] = source.read_bytes()
        notebook, size = None, 0
        try:
            size = job.path.stat().st_size
            if size <= MAX_NOTEBOOK_BYTES:
                notebook = job.path.read_bytes()
        except OSError:
            size = 0
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

    def receive(self, job, reply: str):
        """(SubmissionResult, seconds) from a worker's JSON reply; RemoteGradingError if unusable."""
        try:
            if type(reply) is not str or len(reply) > MAX_REPLY_CHARS:
                raise ValueError("not JSON text of a sensible size")
            data = json.loads(reply)
            if type(data) is not dict:
                raise ValueError("not a JSON object")
        except ValueError as error:
            raise RemoteGradingError(
                f"a worker's reply for {job.student}/{job.assignment} is unusable: {error}"
            ) from None
        worker = str(data.get("worker", "an unknown worker"))[:200]
        where = f"worker {worker} grading {job.student}/{job.assignment}"
        if data.get("protocol") != PROTOCOL:
            raise RemoteGradingError(f"{where} speaks protocol {data.get('protocol')!r}, not {PROTOCOL}")
        if "refused" in data:
            raise RemoteGradingError(f"{where} refused: {str(data['refused'])[:2000]}")
        if data.get("secret") != self.fingerprint:
            raise RemoteGradingError(
                f"{where} grades with a different course secret: set "
                f"{self.course.secret_env} to the driver's value on every worker"
            )
        seconds = data.get("seconds")
        if type(seconds) not in (int, float) or not 0 <= seconds < 1e7:
            raise RemoteGradingError(f"{where} reported an impossible time {seconds!r}")
        try:
            result = result_from_wire(
                data.get("result"), self.course, job.assignment, job.student, str(job.path)
            )
        except RemoteGradingError as error:
            raise RemoteGradingError(f"{where} sent a result that is not valid: {error}") from None
        return result, float(seconds)

    def close(self) -> None:
        self.client.close()


def process_memory(pid: int | None = None) -> dict[str, float]:
    """{"peak_rss_mb", "rss_mb"} of process `pid` (default: this one) and "children_rss_mb", the
    resident memory of all its descendants now (a worker's sandbox processes), from /proc."""
    pid = os.getpid() if pid is None else pid

    def status(process: int) -> dict[str, float]:
        values = {}
        try:
            for line in Path(f"/proc/{process}/status").read_text().splitlines():
                key, _, rest = line.partition(":")
                if key in ("VmHWM", "VmRSS"):
                    values[key] = int(rest.split()[0]) / 1024
        except (OSError, ValueError, IndexError):
            pass
        return values

    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    descendants, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, ppid in parents.items() if ppid == parent]
        descendants += children
        frontier += children
    own = status(pid)
    return {
        "peak_rss_mb": own.get("VmHWM", 0.0),
        "rss_mb": own.get("VmRSS", 0.0),
        "children_rss_mb": sum(status(child).get("VmRSS", 0.0) for child in descendants),
    }
