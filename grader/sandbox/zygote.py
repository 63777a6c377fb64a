"""The warm interpreter student processes are forked from, and the loop each of them runs.

Started once per `Sandbox` as `python -m grader.sandbox.zygote FD`, it imports NumPy, PyTorch
and Matplotlib (Agg) once, then serves requests from the grader on the control socket FD:

- spawn: fork a fresh keeper and student process (grader/sandbox/isolation.py) on the socket
  and output pipe passed along (SCM_RIGHTS);
- stop: end a student process and every process it made, and confirm it (see `Zygote.stop`);
- reap: the exit status of a finished student process;
- info: the preloaded modules, the interpreter's address-space size and what the host allows.

It never imports grader.reference, grader.checks or any course file, and it runs no student
code itself: each student process is a fresh fork, used for one submission only.
"""

from __future__ import annotations

import builtins
import json
import operator
import os
import re
import signal
import socket
import time
import sys
import traceback

from grader.sandbox.protocol import LOOP_FAILED_EXIT

PRELOAD = (
    "numpy",
    "torch",
    "torch.nn",
    "torch.nn.functional",
    "matplotlib",
    "matplotlib.pyplot",
    "sympy",
    "grader.codec",
    "grader.fakes",
    "grader.student",
)
FORBIDDEN = ("grader.reference", "grader.checks", "grader.grading", "grader.submission")
GUARDED = {
    "builtins": None,
    "json": None,
    "struct": None,
    "io": None,
    "os": None,
    "select": None,
    "time": None,
    "traceback": None,
    "numpy": None,
    "numpy.lib.format": None,
    "socket": ("socket", "timeout", "send_fds"),
    "torch": ("Tensor", "bfloat16", "float16", "nn"),
    "torch.nn": ("Linear", "Parameter"),
    "grader.codec": None,
    "grader.student": None,
    "grader.fakes": None,
    "grader.sandbox.protocol": None,
    "grader.sandbox.zygote": None,
}
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
CONTROL_BYTES = 1 << 20
STOP_WAIT_S = 5.0
MAGIC_LINE = re.compile(r"^(\s*)[%!].*$", re.MULTILINE)


def preload() -> list[str]:
    """Import the libraries student code uses, so each fork starts warm; returns those loaded."""
    os.environ["MPLBACKEND"] = "Agg"
    loaded = []
    for name in PRELOAD:
        try:
            __import__(name)
            loaded.append(name)
        except Exception:  # an optional library missing here only costs warm-up time later
            pass
    if "matplotlib" in sys.modules:
        sys.modules["matplotlib"].use("Agg")
    return loaded


# ----------------------------------------------------------------------------- student process


def _display(*objects, **_):
    for value in objects:
        print(repr(value))


def _without_magics(source: str) -> str:
    return MAGIC_LINE.sub(lambda match: f"{match.group(1)}pass", source)


def _student_traceback(error: BaseException) -> str:
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename.startswith("<")]
    return "".join(traceback.format_list(frames[-3:]))[:2000]


def _error_record(error: BaseException) -> dict:
    return {
        "error": {
            "type": type(error).__name__[:80],
            "message": str(error)[:2000],
            "where": _student_traceback(error),
        }
    }


def _flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass


class Guard:
    """Undoes student monkeypatching of the modules the reply path relies on.

    Module attributes present at fork time are put back after every piece of student code
    runs, so e.g. `builtins.len = None` or `np.array_equal = lambda *a: True` cannot break
    or bend the encoding of answers. (It changes no verdict either way: those are computed by
    the grader from the data; this keeps one student's patch from costing their later parts.)
    """

    def __init__(self, guarded=GUARDED):
        self.saved = []
        for name, only in guarded.items():
            if name in sys.modules:
                namespace = vars(sys.modules[name])
                keys = tuple(key for key in (only or namespace) if key in namespace)
                if len(keys) > 1:
                    self.saved.append(
                        (namespace, keys, operator.itemgetter(*keys), tuple(namespace[key] for key in keys))
                    )

    def restore(self, _any=any, _map=map, _zip=zip, _is_not=operator.is_not, _missing=object()) -> None:
        for namespace, keys, current_values, values in self.saved:
            try:
                if not _any(_map(_is_not, current_values(namespace), values)):
                    continue
            except KeyError:
                pass
            for key, value in _zip(keys, values):
                if namespace.get(key, _missing) is not value:
                    namespace[key] = value


class StudentLoop:
    """Runs inside the student process: executes cells, answers calls and value requests."""

    def __init__(self, sock: socket.socket):
        from grader import codec, fakes, student
        from grader.sandbox import protocol

        self.codec, self.fakes, self.student, self.protocol = codec, fakes, student, protocol
        self.sock = sock
        self.current = 0
        self.guard = Guard()
        self.namespace = {"__name__": "__main__", "__builtins__": builtins, "display": _display}

    def reply(self, request_id: int, body: bytes) -> None:
        _flush()
        self.protocol.send_frame(self.sock, self.protocol.encode_reply(request_id, body))

    def invoke(self, function, args):
        try:
            return function(*args)
        finally:
            self.guard.restore()

    def handle(self, header: dict, body: bytes) -> bytes:
        self.guard.restore()
        op, dumps = header["op"], self.codec.dumps
        if op == "exec":
            return dumps(self.execute(header["source"], header["label"]))
        if op == "ping":
            return b""
        name = header["name"]
        if name not in self.namespace:
            return dumps({"defined": False})
        value = self.namespace[name]
        if op == "probe":
            return dumps(
                {
                    "defined": True,
                    "callable": callable(value),
                    "type": f"{type(value).__module__}.{type(value).__qualname__}"[:120],
                }
            )
        if op == "value":
            return dumps({"defined": True, "value": value})
        if op == "call":
            callback = self.fakes.Callback
            return self.student.call_and_encode(
                lambda *args: self.invoke(value, args),
                body,
                lambda spec, index: callback(self, index, spec.kind),
            )
        raise ValueError(f"unknown request {op!r}")

    def callback(self, index: int, args: list):
        """Ask the grader to run callable argument `index` of the current call (see grader.fakes)."""
        protocol, codec = self.protocol, self.codec
        request = codec.dumps({"index": index, "args": args})
        protocol.send_frame(self.sock, protocol.encode_reply(self.current, request, protocol.CALLBACK))
        header, body = protocol.decode_request(
            protocol.recv_frame(self.sock, max_bytes=protocol.MAX_REQUEST_BYTES)
        )
        data = codec.loads(body) if header.get("op") == "callback" else {"error": "the grader did not answer"}
        if type(data) is not dict or "error" in data:
            raise self.fakes.CallbackError(str(data.get("error") if type(data) is dict else data))
        return data.get("value")

    def execute(self, source: str, label: str) -> dict:
        try:
            try:
                code = compile(source, label, "exec")
            except SyntaxError:
                stripped = _without_magics(source)
                if stripped == source:
                    raise
                code = compile(stripped, label, "exec")
            exec(code, self.namespace)
        except BaseException as error:  # the student's exception, SystemExit included
            self.guard.restore()
            return _error_record(error)
        self.guard.restore()
        return {"ok": True}

    def run(self) -> None:
        protocol = self.protocol
        while True:
            try:
                payload = protocol.recv_frame(self.sock, max_bytes=protocol.MAX_REQUEST_BYTES)
            except protocol.ChannelClosed:
                return
            header, body = protocol.decode_request(payload)
            self.current = header["id"]
            try:
                answer = self.handle(header, body)
            except BaseException as error:
                self.guard.restore()
                try:
                    answer = self.codec.dumps(_error_record(error))
                except BaseException:
                    answer = b""
            self.reply(header["id"], answer)


def _student_process(config: dict, sock_fd: int, output_fd: int, control: socket.socket) -> None:
    """In the forked child: rewire file descriptors, isolate, say hello, then serve requests."""
    from grader.sandbox import isolation, protocol

    control.detach()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.dup2(sock_fd, 3)
    os.closerange(4, os.sysconf("SC_OPEN_MAX") if os.sysconf("SC_OPEN_MAX") > 0 else 4096)
    sock = socket.socket(fileno=3)
    try:
        alive = isolation.enter_namespaces(config)  # only the student process comes back
        missing = isolation.enter(config, alive)
        hello = {"ready": True, "missing": missing, "namespaces": alive is not None, "uid": os.getuid()}
    except isolation.NamespacesUnavailable as error:
        hello = {"ready": False, "unavailable": True, "error": str(error)}
    except BaseException as error:
        hello = {"ready": False, "error": f"{type(error).__name__}: {error}"}
    protocol.send_frame(sock, json.dumps(hello).encode())
    if not hello["ready"]:
        os._exit(70)
    StudentLoop(sock).run()
    _flush()
    os._exit(0)


# ----------------------------------------------------------------------------- the server


def _reap_all() -> dict[int, int]:
    finished = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return finished
        if pid == 0:
            return finished
        finished[pid] = status


def _ours_or_orphaned(group: str) -> bool:
    """A slot group of this warm interpreter, or of a grader that no longer runs."""
    owner, _, rest = group.partition("-")
    if not owner.isdigit():
        return False
    return rest.split("-")[0] == str(os.getpid()) or not os.path.exists(f"/proc/{owner}")


def _describe_status(status: int) -> dict:
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    return {"exit": os.waitstatus_to_exitcode(status)}


class Zygote:
    def __init__(self, control: socket.socket, loaded: list[str]):
        self.control = control
        self.loaded = loaded
        self.finished: dict[int, int] = {}

    def spawn(self, config: dict, fds: list[int]) -> dict:
        if len(fds) != 2:
            return {"error": "spawn needs a socket and an output pipe"}
        pid = os.fork()
        if pid == 0:
            try:
                _student_process(config, fds[0], fds[1], self.control)
            finally:
                os._exit(LOOP_FAILED_EXIT)
        return {"pid": pid}

    def stop(self, pid: int, group: bool) -> dict:
        """End a student process and everything it made; ok once that is confirmed.

        Without `group`, `pid` is a keeper: SIGTERM makes it kill its PID namespace's init, and it
        exits only after the kernel has ended every process in that namespace. With `group`
        (no namespaces) the process group is killed. Only unreaped children are signalled.
        """
        self.finished.update(_reap_all())
        if self.finished.pop(pid, None) is not None:
            return {"ok": True}
        for how in ("gently", "forcibly"):
            try:
                if group:
                    os.killpg(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGTERM if how == "gently" and not group else signal.SIGKILL)
            except OSError:
                pass
            if "running" not in self.reap(pid, STOP_WAIT_S):
                return {"ok": True}
        return {"ok": False}

    def reap(self, pid: int, wait: float) -> dict:
        deadline = time.monotonic() + wait
        while True:
            self.finished.update(_reap_all())
            if pid in self.finished:
                return _describe_status(self.finished.pop(pid))
            if time.monotonic() >= deadline:
                return {"running": True}
            time.sleep(0.001)

    def info(self) -> dict:
        from grader.sandbox import isolation

        forbidden = sorted(name for name in sys.modules if name.startswith(FORBIDDEN))
        return {
            "pid": os.getpid(),
            "host": isolation.describe_host(),
            "preloaded": self.loaded,
            "vm_bytes": isolation.vm_size_bytes(),
            "forbidden_modules": forbidden,
            "threads": len(os.listdir("/proc/self/task")),
        }

    def leave(self) -> None:
        """Exit, removing the grader's cgroups (and those of graders that ended without doing so)."""
        from grader.sandbox import isolation

        self.finished.update(_reap_all())
        isolation.remove_cgroups(isolation.cgroup_paths(), _ours_or_orphaned)
        os._exit(0)

    def serve(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.control, CONTROL_BYTES, 4)
            except OSError:
                self.leave()
            if not data:
                self.leave()
            try:
                request = json.loads(data)
                op = request["op"]
                if op == "spawn":
                    answer = self.spawn(request["config"], fds)
                elif op == "stop":
                    answer = self.stop(int(request["pid"]), bool(request.get("group")))
                elif op == "reap":
                    answer = self.reap(int(request["pid"]), float(request.get("wait", 0)))
                elif op == "info":
                    answer = self.info()
                else:
                    answer = {"error": f"unknown request {op!r}"}
            except Exception as error:
                answer = {"error": f"{type(error).__name__}: {error}"}
            finally:
                for fd in fds:
                    os.close(fd)
            self.finished.update(_reap_all())
            self.control.sendall(json.dumps(answer).encode())


def main(argv: list[str]) -> int:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    control = socket.socket(fileno=int(argv[0]))
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    loaded = preload()
    try:  # the student processes' seccomp filters, built once here
        from grader.sandbox import isolation

        for allow_children in (False, True):
            isolation.seccomp_filter(allow_children)
    except Exception:  # reported by the first student process that needs it
        pass
    control.sendall(json.dumps({"ready": True, "preloaded": loaded}).encode())
    Zygote(control, loaded).serve()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
