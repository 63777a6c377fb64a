"""Grading on the workers of a Dask cluster: the worker side and the wire format.

Every Dask worker runs the trusted grader itself (`grade_submission`, the same code as a local
run), with the student's code isolated in that worker's own sandbox, and sends the verdicts back
as plain JSON text. The driver (grader.pipeline.executors.DaskExecutor) rebuilds them with
`result_from_wire`, which accepts only what `grade_submission` promises: exactly the
assignment's parts in course.yml order, each with its course.yml points as maximum, a finite
score in [0, max], a known status (manual only on manual parts), text feedback and text
misconception codes. A worker whose reply breaks that contract is excluded from the run.

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
so that the tensor-parallel checks can start their gloo rank processes there. Each worker
process holds one long-lived warm sandbox, started on its first task and closed when the worker
shuts down.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import json
import math
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from grader.course import load_course
from grader.pipeline.executors import RemoteGradingError
from grader.pipeline.records import secret_fingerprint
from grader.pipeline.warm_sandbox import WarmSandbox, isolated_sandbox
from grader.result import PartResult, Status, SubmissionResult, zero_result
from grader.seeding import grading_secret
from grader.submission import grade_submission

try:
    from distributed import get_worker
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # the driver reports the missing package when --dask is used
    get_worker, WorkerPlugin = None, object

PROTOCOL = 1
PLUGIN_NAME = "layers-grader-sandbox"
MAX_TEXT_CHARS = 1 << 20
MAX_REPLY_CHARS = 64 << 20
VERSIONED_PACKAGES = ("numpy", "torch", "sympy", "dask", "distributed")


# --- what both sides must agree on ----------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def environment_fingerprint() -> dict[str, str]:
    """{"grader": digest of the grader's and layerlab's source, "python": "3.11", package: version...}."""
    root = Path(__file__).resolve().parents[2]
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


def differences(mine: dict, theirs: dict) -> str:
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
    key = (os.getpid(), repr(limits))
    with _sandboxes_lock:
        starter = _sandboxes.get(key)
        if starter is None:
            if not _sandboxes:
                atexit.register(close_worker_sandboxes)
            starter = _sandboxes[key] = WarmSandbox(isolated_sandbox, limits)
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
    process = multiprocessing.current_process()
    if process.daemon:
        process.daemon = False


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def worker_address() -> str | None:
    """This Dask worker's address (how the driver excludes it), None outside a worker."""
    try:
        return get_worker().address
    except (ValueError, TypeError):
        return None


def worker_identity(secret_env: str) -> dict:
    """Run on every worker before grading: what the driver compares with its own fingerprints."""
    return {
        "worker": worker_name(),
        "protocol": PROTOCOL,
        "environment": environment_fingerprint(),
        "secret": secret_fingerprint(grading_secret(secret_env)),
    }


def grade_on_worker(task: dict) -> str:
    """Run on a Dask worker: grade one submission; returns the reply as JSON text.

    task: the plain-data dict built by `DaskExecutor.task`. The reply is {"protocol", "worker",
    "secret" (fingerprint), "seconds", "result"} or {"protocol", "worker", "refused": reason};
    "address" is the worker's Dask address.
    """
    reply = {"protocol": PROTOCOL, "worker": worker_name(), "address": worker_address()}
    mine = environment_fingerprint()
    if task.get("protocol") != PROTOCOL or task.get("environment") != mine:
        reply["refused"] = "its grader code or libraries differ from the driver's: " + (
            differences(task.get("environment") or {}, mine) or "protocol version"
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
            reason = f"the grader failed on this notebook ({type(error).__name__}: {error})"
            assignment = course.assignment(task["assignment"])
            result = zero_result(assignment, notebook, task["student"], reason, retry=True)
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


class SandboxCleanup(WorkerPlugin):
    """Dask worker plugin: closes the worker's sandboxes when the worker shuts down."""

    def teardown(self, worker) -> None:
        close_worker_sandboxes()


def has_cleanup_plugin(dask_scheduler) -> bool:
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
