"""The grader's side of the sandbox: a warm zygote, and one `Session` per submission.

    with Sandbox(course.limits) as sandbox:
        session = sandbox.session(hide=hidden_paths(course.root))
        outcome = session.run_cell("<cell 1>", "import numpy as np")
        reply = session.call("relu", codec.dumps([x]))   # bytes for grader.student.decode_reply
        value = session.value("z2_by_hand")              # decoded data, or NotDefined
        session.close()

Each session is a fresh fork of the zygote in its own namespaces (grader/sandbox/isolation.py).
When the child hangs or dies, the session ends it and every process it made, forks a fresh
child and replays the cells that ran so far, skipping the one that hung or killed it. A
`Sandbox` is thread-safe: concurrent sessions get distinct slots (and distinct users as root).

Where the kernel refuses the namespaces, starting a `Sandbox` raises `IsolationUnavailable`,
unless `unsafe=True` (or the environment variable named by `UNSAFE_ENV` is set to 1).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from grader import codec
from grader.course import Limits
from grader.fakes import answer_callback
from grader.sandbox import protocol
from grader.sandbox.isolation import SAFE_PATH
from grader.student import NotDefined, StudentCrashed, StudentError, StudentTimeout

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
UID_BASE = 1_500_000_000
SLOTS_PER_PROCESS = 64
ZYGOTE_START_TIMEOUT_S = 180
HELLO_TIMEOUT_S = 30
MAX_RESTARTS = 8
MAX_CALLBACKS = 100_000  # runs of the callable arguments within one call
PYTHON_PATHS = sorted(
    {
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.realpath(sys.executable)),
    }
)
# sys.path[0] is the folder the grader was launched from (script or working directory), not a package.
IMPORT_PATHS = sys.path if sys.flags.safe_path else sys.path[1:]
PACKAGE_FOLDERS = ("site-packages", "dist-packages")  # where third-party packages are installed
# What a student process sees besides the system trees: Python, its packages and layerlab. Other
# entries of sys.path (PYTHONPATH: a checkout, a course folder) are not packages students need.
VISIBLE_TO_STUDENTS = sorted(
    set(PYTHON_PATHS)
    | {str(PACKAGE_ROOT.parent / "layerlab")}
    | {path for path in IMPORT_PATHS if Path(path).name in PACKAGE_FOLDERS and os.path.isdir(path)}
)
KEEP_VISIBLE = {".venv", "venv", "layerlab"}
ALWAYS_HIDDEN = sorted(
    {str(PACKAGE_ROOT)}
    | ({str(PACKAGE_ROOT.parent)} if (PACKAGE_ROOT.parent / "course.yml").exists() else set())
)
SIGNAL_HINTS = {
    signal.SIGKILL: " (often: the memory limit was exceeded or too many processes were started)",
    signal.SIGXCPU: " (the CPU-time limit was exceeded)",
    signal.SIGSEGV: " (a segmentation fault)",
}


UNSAFE_ENV = "LAYERS_UNSAFE_NO_ISOLATION"
UNSAFE_FLAG = "--unsafe-no-isolation"


def scratch_mb(limits: Limits) -> int:
    """The size of a student's /tmp: an eighth of its memory, within 16-256 MiB."""
    return int(min(256, max(16, limits.memory_mb // 8)))


class SandboxError(RuntimeError):
    """The sandbox itself failed (not the student's code); grading cannot go on safely."""


class IsolationUnavailable(SandboxError):
    """The kernel refuses the namespaces student code must run in; nothing was run."""


def hidden_paths(course_root: str | Path, extra=()) -> list[str]:
    """What student code must not see: every entry of the course root (and of the repository
    holding the grader, when that is a course) except the Python environment and `layerlab`,
    the grader package itself, and `extra`."""
    roots = {Path(course_root).resolve()}
    if (PACKAGE_ROOT.parent / "course.yml").exists():
        roots.add(PACKAGE_ROOT.parent)
    environment = {
        Path(sys.prefix).resolve(),
        Path(sys.base_prefix).resolve(),
        Path(sys.executable).resolve().parent,
    }
    hidden = {str(PACKAGE_ROOT)}
    for root in roots:
        try:
            entries = list(root.iterdir())
        except OSError:
            continue
        for entry in entries:
            holds_python = any(place == entry or entry in place.parents for place in environment)
            if entry.name in KEEP_VISIBLE or holds_python:
                continue
            hidden.add(str(entry))
    hidden.update(str(Path(path).resolve()) for path in extra)
    return sorted(hidden)


@dataclass
class CellOutcome:
    label: str
    status: str  # "ok", "raised", "timeout", "crashed", "skipped"
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class _Output:
    """Student stdout/stderr: keeps the first `cap` bytes, drains and counts the rest."""

    def __init__(self, cap: int):
        self.cap, self.kept, self.dropped = cap, bytearray(), 0
        self.lock = threading.Lock()
        self.readers: list[threading.Thread] = []

    def attach(self, fd: int) -> None:
        reader = threading.Thread(target=self._drain, args=(fd,), daemon=True, name="sandbox-output")
        reader.start()
        self.readers.append(reader)

    def _drain(self, fd: int) -> None:
        try:
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    return
                with self.lock:
                    room = self.cap - len(self.kept)
                    self.kept += chunk[: max(room, 0)]
                    self.dropped += max(len(chunk) - max(room, 0), 0)
        except OSError:
            return
        finally:
            os.close(fd)

    def wait(self, timeout: float = 2.0) -> None:
        end = time.monotonic() + timeout
        for reader in self.readers:
            reader.join(max(end - time.monotonic(), 0))

    def text(self) -> str:
        with self.lock:
            text = bytes(self.kept).decode("utf-8", errors="replace")
            if self.dropped:
                text += f"\n[output limit reached: {self.dropped} more bytes were discarded]\n"
        return text


class Sandbox:
    """A warm interpreter (NumPy, PyTorch, Matplotlib loaded) that forks one process per submission.

    `warnings` lists, in words, every isolation mechanism that is unavailable here; they are
    also printed once to stderr. `isolate=False` keeps the separate process and its resource
    limits but skips namespaces, hidden paths and the separate user.
    """

    def __init__(self, limits: Limits | None = None, isolate: bool = True, unsafe: bool | None = None):
        self.limits = limits or Limits()
        self.isolate = isolate
        self.unsafe = os.environ.get(UNSAFE_ENV) == "1" if unsafe is None else unsafe
        self.namespaces = False
        self.root = os.geteuid() == 0
        self.warnings: list[str] = []
        self.info: dict = {}
        self._control: socket.socket | None = None
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._warn_lock = threading.Lock()
        self._slots = threading.Condition()
        self._free_slots: list[int] = list(range(SLOTS_PER_PROCESS))
        self._started = False
        self.switch_users = True
        if not isolate:
            self.warnings.append(
                "isolation is turned off: student code runs as the grader's user, "
                "with network access and every file that user can read"
            )

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self._start_zygote()
            self._started = True
        self._probe()

    def _start_zygote(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {
            "PATH": SAFE_PATH,
            "PYTHONPATH": str(PACKAGE_ROOT.parent),
            "LANG": "C.UTF-8",
            "MPLBACKEND": "Agg",
            "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": os.environ.get("HOME", "/"),
        }
        self._process = subprocess.Popen(
            [sys.executable, "-P", "-m", "grader.sandbox.zygote", str(child.fileno())],
            pass_fds=[child.fileno()],
            env=env,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        child.close()
        parent.settimeout(ZYGOTE_START_TIMEOUT_S)
        try:
            ready = json.loads(parent.recv(protocol.LENGTH.size + 65536))
        except (OSError, ValueError) as error:
            self._process.kill()
            raise SandboxError(f"the sandbox's warm interpreter did not start: {error}") from None
        if not ready.get("ready"):
            raise SandboxError("the sandbox's warm interpreter did not start")
        parent.settimeout(60)
        self._control = parent
        self.info = self._ask_locked({"op": "info"})
        if self.info.get("forbidden_modules"):
            raise SandboxError(
                f"the warm interpreter loaded grader modules it must not hold: "
                f"{self.info['forbidden_modules']}"
            )

    def _probe(self) -> None:
        session = self.session(hide=())
        try:
            session.start()
            self.namespaces = session.namespaces
        finally:
            session.close()

    def cgroups(self) -> dict | None:
        return (self.info.get("host") or {}).get("cgroups") if self.isolate else None

    def describe(self) -> list[str]:
        """What walls student code runs in, in words (one line each); for `check` and the logs."""
        if not self.isolate or not self.namespaces:
            return ["isolation: none (student code runs as the grader's user)", *self.warnings]
        who = "a separate user per slot" if self.slot_uid(0) is not None else "an unprivileged user"
        memory = (
            f"memory: cgroup limit of {self.limits.memory_mb:g} MiB (files in /tmp included), "
            "process count capped by a pids cgroup"
            if self.cgroups()
            else f"memory: address-space limit and a {scratch_mb(self.limits)} MiB /tmp within "
            f"{self.limits.memory_mb:g} MiB; no child processes, memfd and shared memory denied"
        )
        return [
            "isolation: user, mount, PID, network, IPC and UTS namespaces; a private read-only root "
            f"with Python, its packages and layerlab only; {who}; a seccomp filter",
            memory,
        ]

    def close(self) -> None:
        with self._lock:
            if self._control is not None:
                self._control.close()
                self._control = None
            if self._process is not None:
                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
                self._process = None
            self._started = False

    # ------------------------------------------------------------------ zygote requests
    def _ask_locked(self, request: dict, fds=()) -> dict:
        try:
            socket.send_fds(self._control, [json.dumps(request).encode()], list(fds))
            data = self._control.recv(1 << 20)
        except OSError as error:
            raise SandboxError(f"lost the sandbox's warm interpreter: {error}") from None
        if not data:
            raise SandboxError("the sandbox's warm interpreter exited")
        return json.loads(data)

    def ask(self, request: dict, fds=()) -> dict:
        """Send one request to the zygote (starting it, or restarting it if it died); thread-safe."""
        if not self._started:
            self.start()
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self.note("the sandbox's warm interpreter had exited and was restarted")
                self._start_zygote()
            return self._ask_locked(request, fds)

    def note(self, warning: str) -> None:
        """Record (and print once) an isolation problem."""
        with self._warn_lock:
            if warning in self.warnings:
                return
            self.warnings.append(warning)
            if self._started:
                print(f"WARNING (grader sandbox): {warning}", file=sys.stderr)

    # ------------------------------------------------------------------ slots and users
    def acquire_slot(self) -> int:
        with self._slots:
            while not self._free_slots:
                self._slots.wait()
            return self._free_slots.pop(0)

    def release_slot(self, slot: int) -> None:
        with self._slots:
            self._free_slots.append(slot)
            self._free_slots.sort()
            self._slots.notify()

    def slot_uid(self, slot: int) -> int | None:
        """The user a slot's student processes run as (None when not root or not isolating)."""
        if not (self.root and self.isolate and self.switch_users):
            return None
        return UID_BASE + (os.getpid() % (1 << 22)) * SLOTS_PER_PROCESS + slot

    def stop(self, pid: int, namespaces: bool) -> None:
        """End student process `pid` (a keeper when in namespaces) and every process it made."""
        answer = self.ask({"op": "stop", "pid": pid, "group": not namespaces})
        if not answer.get("ok"):
            self.note(f"could not confirm that student process {pid} and its children ended")

    def session(self, hide=(), deadline: float | None = None) -> "Session":
        """A new, not yet started session; `deadline` is a time.monotonic() for the whole submission.

        `hide` (paths, or a function returning them, called once) is covered wherever it lies inside
        a tree the private root exposes (a course folder on the Python path, for instance).
        """
        return Session(self, hide, deadline)


class Session:
    """One submission's student process: cells, calls and values, with restarts after a crash."""

    def __init__(self, sandbox: Sandbox, hide=(), deadline: float | None = None):
        self.sandbox = sandbox
        self.limits = sandbox.limits
        self.hide = hide
        self.deadline = deadline
        self.output = _Output(int(self.limits.output_kb * 1024))
        self.notes: list[str] = []
        self.history: list[tuple[str, str]] = []
        self.skipped: dict[str, str] = {}
        self.generation = 0
        self.restarts = 0
        self.alive = False
        self.death: StudentError | None = None
        self.pid: int | None = None
        self.reaped = False
        self.sock: socket.socket | None = None
        self.slot: int | None = None
        self.uid: int | None = None
        self.namespaces = False
        self.workdir: str | None = None
        self.closed = False

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ process lifecycle
    def start(self) -> None:
        if self.slot is None:
            self.slot = self.sandbox.acquire_slot()
            self.uid = self.sandbox.slot_uid(self.slot)
            self.workdir = tempfile.mkdtemp(prefix="grader-student-")
        self._spawn()

    def _hidden(self) -> list[str]:
        """What to cover where it lies inside a tree the private root exposes: the grader package,
        the checkout holding it when that is a course, and the session's own `hide` paths."""
        if callable(self.hide):
            self.hide = self.hide()
        return sorted({*ALWAYS_HIDDEN, *(str(path) for path in self.hide)})

    def _config(self) -> dict:
        cpus = os.cpu_count() or 1
        return {
            "isolate": self.sandbox.isolate,
            "unsafe": self.sandbox.unsafe,
            "cgroups": self.sandbox.cgroups(),
            "cgroup_owner": os.getpid(),
            "slot": self.slot,
            "uid": self.uid,
            "gid": self.uid,
            "hide": self._hidden(),
            "memory_bytes": int(self.limits.memory_mb) * 2**20,
            "cpu_seconds": int(self.limits.notebook_timeout_s * cpus + 10),
            "file_bytes": 64 * 2**20,
            "nproc": 64 + 8 * cpus,
            "scratch_mb": scratch_mb(self.limits),
            "fallback_workdir": self.workdir,
            "expose": VISIBLE_TO_STUDENTS,
        }

    def _spawn(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        read_end, write_end = os.pipe()
        try:
            answer = self.sandbox.ask({"op": "spawn", "config": self._config()}, [child.fileno(), write_end])
        finally:
            child.close()
            os.close(write_end)
        if "pid" not in answer:
            os.close(read_end)
            parent.close()
            raise SandboxError(f"could not start a student process: {answer.get('error')}")
        self.pid, self.sock, self.reaped = answer["pid"], parent, False
        self.output.attach(read_end)
        try:
            hello = json.loads(protocol.recv_frame(parent, time.monotonic() + HELLO_TIMEOUT_S, 65536))
        except (protocol.ChannelClosed, protocol.ChannelTimeout, protocol.ProtocolError, ValueError) as error:
            self._kill()
            raise SandboxError(f"the student process did not start: {error}") from None
        if not hello.get("ready"):
            self._kill()
            if hello.get("unavailable"):
                raise IsolationUnavailable(
                    f"{hello.get('error')}: student code is not run without isolation "
                    f"({UNSAFE_FLAG} overrides this)"
                )
            raise SandboxError(f"the student process could not be isolated: {hello.get('error')}")
        self.namespaces = bool(hello.get("namespaces"))
        for warning in hello.get("missing", []):
            self.sandbox.note(warning)
        if self.uid is not None and hello.get("uid") != self.uid:
            self.sandbox.switch_users = False
            self.uid = None
        self.alive, self.death = True, None
        self.generation += 1

    def _kill(self) -> None:
        self.alive = False
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if not self.reaped and self.pid is not None:
            self.sandbox.stop(self.pid, self.namespaces)
            self.reaped = True
        self.output.wait()

    def _exit_reason(self) -> str:
        try:
            status = self.sandbox.ask({"op": "reap", "pid": self.pid, "wait": 0.5})
        except SandboxError:
            return "the process ended"
        self.reaped = "running" not in status
        if "signal" in status:
            number = status["signal"]
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = f"signal {number}"
            return f"the process was killed by {name}{SIGNAL_HINTS.get(number, '')}"
        if status.get("exit") == protocol.LOOP_FAILED_EXIT:
            return "the student code closed or overwrote the process's connection to the grader"
        if "exit" in status:
            return f"the process exited with status {status['exit']}"
        return "the process closed its connection to the grader"

    def _die(self, error: StudentError) -> StudentError:
        self._kill()
        self.death = error
        return error

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.slot is not None:
            try:
                self._kill()
            finally:
                self.sandbox.release_slot(self.slot)
                shutil.rmtree(self.workdir, ignore_errors=True)

    # ------------------------------------------------------------------ time
    def remaining(self) -> float:
        return float("inf") if self.deadline is None else self.deadline - time.monotonic()

    def _timeout(self) -> tuple[float, str]:
        limit = float(self.limits.part_timeout_s)
        left = self.remaining()
        if left < limit:
            return max(left, 0.0), (
                f"the notebook's time limit of {self.limits.notebook_timeout_s:g} s was used up"
            )
        return limit, f"it did not finish within {limit:g} s"

    # ------------------------------------------------------------------ requests
    def _request(self, header: dict, body: bytes, what: str, callables=()) -> memoryview:
        if not self.alive:
            raise self.death or StudentCrashed("the student process is not running")
        timeout, why = self._timeout()
        if timeout <= 0:
            raise self._die(StudentTimeout(f"{what} was not run: {why}"))
        deadline = time.monotonic() + timeout
        request_id = int.from_bytes(os.urandom(8), "little")
        try:
            protocol.send_frame(
                self.sock, protocol.encode_request({**header, "id": request_id}, body), deadline
            )
            for _ in range(MAX_CALLBACKS + 1):
                kind, reply = protocol.recv_reply(self.sock, request_id, deadline)
                if kind == protocol.REPLY:
                    return reply
                answer = protocol.encode_request(
                    {"op": "callback", "id": request_id}, answer_callback(callables, reply)
                )
                protocol.send_frame(self.sock, answer, deadline)
            raise protocol.ProtocolError(f"more than {MAX_CALLBACKS} calls of its callable arguments")
        except protocol.ChannelTimeout:
            raise self._die(StudentTimeout(f"{what}: {why}")) from None
        except protocol.ChannelClosed:
            reason = self._exit_reason()
            raise self._die(StudentCrashed(f"{what} ended the process: {reason}")) from None
        except protocol.ProtocolError as error:
            raise self._die(StudentCrashed(f"{what} broke the connection to the grader ({error})")) from None

    def _reply_data(self, body: bytes, what: str):
        try:
            return codec.loads(body)
        except codec.DecodeError as error:
            raise StudentCrashed(f"{what}: the reply could not be read ({error})") from None

    def ensure_alive(self) -> None:
        """Restart a dead student process and replay the cells run so far (except culprits)."""
        while not self.alive:
            if self.restarts >= MAX_RESTARTS:
                raise self.death or StudentCrashed("the student process kept ending")
            if self.remaining() <= 0:
                raise StudentTimeout(
                    f"the notebook's time limit of {self.limits.notebook_timeout_s:g} s was used up"
                )
            self.restarts += 1
            if self.slot is None:
                self.start()
            else:
                self._spawn()
            for label, source in list(self.history):
                if label in self.skipped:
                    continue
                outcome = self._execute(label, source)
                if outcome.status in ("timeout", "crashed"):
                    break

    def _execute(self, label: str, source: str) -> CellOutcome:
        """Run one cell, then check the connection is still in step (a cell that wrote into it is
        the one to blame and skip, not whichever request comes next)."""
        try:
            body = self._request({"op": "exec", "source": source, "label": label}, b"", label)
            self._request({"op": "ping"}, b"", label)
        except StudentTimeout as error:
            self.skipped[label] = error.reason
            self.notes.append(f"{label} was skipped: {error.reason}")
            return CellOutcome(label, "timeout", error.reason)
        except StudentCrashed as error:
            self.skipped[label] = error.reason
            self.notes.append(f"{label} was skipped: {error.reason}")
            return CellOutcome(label, "crashed", error.reason)
        try:
            data = self._reply_data(body, label)
        except StudentCrashed as error:
            return CellOutcome(label, "raised", error.reason)
        if type(data) is dict and type(data.get("error")) is dict:
            error = data["error"]
            text = f"{error.get('type', 'Exception')}: {error.get('message', '')}"
            where = str(error.get("where", ""))
            return CellOutcome(label, "raised", text + (f"\n{where}" if where else ""))
        return CellOutcome(label, "ok")

    def run_cell(self, label: str, source: str) -> CellOutcome:
        """Run one cell (labels must be unique); a hang or crash is recorded, the process restarted later."""
        if not self.alive and self.slot is None:
            self.start()
        try:
            self.ensure_alive()
        except StudentError as error:
            return CellOutcome(label, "skipped", error.reason)
        self.history.append((label, source))
        return self._execute(label, source)

    def probe(self, name: str) -> dict:
        """{"defined": bool, "callable": bool, "type": str} for a name in the student's namespace."""
        self.ensure_alive()
        data = self._reply_data(
            self._request({"op": "probe", "name": name}, b"", f"looking up `{name}`"), f"looking up `{name}`"
        )
        if type(data) is not dict or type(data.get("defined")) is not bool:
            raise StudentCrashed(f"looking up `{name}`: the reply could not be read")
        return data

    def value(self, name: str):
        """The decoded value of a variable; NotDefined when the notebook does not define it."""
        self.ensure_alive()
        what = f"reading `{name}`"
        data = self._reply_data(self._request({"op": "value", "name": name}, b"", what), what)
        if type(data) is not dict:
            raise StudentCrashed(f"{what}: the reply could not be read")
        if "error" in data:
            error = data["error"] if type(data["error"]) is dict else {}
            raise StudentCrashed(f"{what} failed: {error.get('type', 'error')}: {error.get('message', '')}")
        if not data.get("defined"):
            raise NotDefined(f"the notebook does not define `{name}`")
        return data.get("value")

    def call(self, name: str, wire_args: bytes, generation: int | None = None, callables=()) -> memoryview:
        """Call a student function on encoded arguments; returns the reply for decode_reply."""
        if generation is not None and generation != self.generation:
            raise self.death or StudentCrashed(
                f"`{name}` is no longer available: the student process was restarted"
            )
        return self._request({"op": "call", "name": name}, wire_args, f"calling `{name}`", callables)

    def output_text(self) -> str:
        return self.output.text()
