"""Hostile answer cells. Each replaces one honest answer of the test course; `$course`, `$repo`,
`$grader_pid` and `$other` (another student's notebook) are filled in by the test."""

from __future__ import annotations

from dataclasses import dataclass
from string import Template


@dataclass(frozen=True)
class Attack:
    name: str
    cells: dict  # grade_id -> hostile source
    zero: tuple[str, ...]  # parts that must score nothing
    reason: str = ""  # a phrase the zeroed parts' feedback must contain
    hidden: tuple[str, ...] = ()  # text that must never appear in the captured output
    seen: tuple[str, ...] = ()  # text that must appear in the captured output

    def sources(self, **values) -> dict:
        return {grade_id: Template(source).safe_substitute(values) for grade_id, source in self.cells.items()}


WRONG_DOUBLE = "def double(x):\n    return x + 1.0\n"
# An answer that writes its own reply, with a 64 MiB JSON header, for the call it serves.
FORGED_HEADER_REPLY = """
import os, socket, struct, sys
def double(x):
    frames = (sys._getframe(i) for i in range(1, 8))
    current = next(f.f_locals["header"]["id"] for f in frames if "header" in f.f_locals)
    header = b'{"tree": [' + b"{}," * (21 * 2**20) + b'{}], "arrays": 0}'
    body = struct.pack("<Qc", current, b"R") + struct.pack("<Q", len(header)) + header
    channel = socket.socket(fileno=os.dup(3))
    channel.sendall(struct.pack("<Q", len(body)) + body)
    channel.detach()
    return 2 * x
"""

ATTACKS = [
    Attack(
        "monkeypatch numpy comparisons",
        {
            "answer_double": """
import numpy as np
np.allclose = lambda *a, **k: True
np.isclose = lambda *a, **k: np.ones(1, bool)
np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
"""
            + WRONG_DOUBLE
        },
        zero=("double",),
        reason="wrong values",
    ),
    Attack(
        "monkeypatch builtins",
        {
            "answer_double": """
import builtins
builtins.isinstance = lambda *a: True
builtins.len = lambda *a: 0
builtins.type = lambda *a: float
builtins.abs = lambda *a: 0.0
"""
            + WRONG_DOUBLE
        },
        zero=("double",),
        reason="wrong values",
    ),
    Attack(
        "patch the grader modules in its own process",
        {
            "answer_double": """
import sys, types
import grader.student as student, grader.codec as codec
real_dumps = codec.dumps
forged = {"value": "forged", "mutated": [], "returned_input": []}
student.call_and_encode = lambda function, wire: real_dumps(forged)
student.decode_reply = lambda reply: (None, (), ())
codec.loads = lambda *a, **k: {"score": 2}
fake = types.ModuleType("grader.checks.base")
fake.run_check = lambda ctx, answer: "full marks"
sys.modules["grader.checks.base"] = fake
sys.modules["grader.grading"] = fake
"""
            + WRONG_DOUBLE
        },
        zero=("double",),
        reason="wrong values",
    ),
    Attack(
        "lying objects",
        {
            "answer_double": """
class Liar:
    def __init__(self, x):
        self.x = x
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__
    def __array__(self, dtype=None, copy=None):
        import numpy as np
        return np.zeros_like(self.x)
    def __float__(self):
        return 2.0
    def __len__(self):
        return len(self.x)
    @property
    def shape(self):
        return self.x.shape
    @property
    def __class__(self):
        import numpy as np
        return np.ndarray
def double(x):
    return Liar(x)
""",
            "answer_magic": """
class FortyTwo(int):
    def __eq__(self, other):
        return True
magic = FortyTwo(7)
""",
        },
        zero=("double", "magic"),
    ),
    Attack(
        "sniff the grading environment",
        {
            "answer_magic": """
import os
found = [key for key in os.environ if "NBGRADER" in key or "SECRET" in key]
print("SNIFFED", found)
magic = 42 if found else 0
"""
        },
        zero=("magic",),
        seen=("SNIFFED []",),
    ),
    Attack(
        "read the source notebook and reference, then exec them",
        {
            "answer_double": """
import json, os
stolen = []
for path in ["$course/source/97_sandbox/97_sandbox.ipynb", "$repo/source/01_shapes/01_shapes.ipynb",
             "$repo/grader/reference/shapes.py", "$repo/grader/checks/shapes.py", "$course/course.yml"]:
    try:
        text = open(path).read()
        stolen.append(text)
        print("READ", path, len(text))
    except OSError as error:
        print("BLOCKED", path, type(error).__name__)
for text in stolen:
    try:
        for cell in json.loads(text)["cells"]:
            exec("".join(cell["source"]))
    except Exception:
        try:
            exec(text)
        except Exception:
            pass
try:
    from grader.reference.shapes import linear_forward
    print("IMPORTED the reference")
except ImportError as error:
    print("BLOCKED import", type(error).__name__)
"""
        },
        zero=("double",),
        reason="does not define",
        hidden=("SOLUTION-MARKER-5517", "BEGIN SOLUTION", "READ ", "IMPORTED"),
        seen=("BLOCKED",),
    ),
    Attack(
        "rewrite the gradebook and course files",
        {
            "answer_magic": """
import os, sqlite3
for path in ["$course/gradebook.db", "$repo/gradebook.db", "$course/course.yml", "$repo/course.yml"]:
    try:
        with open(path, "w") as handle:
            handle.write("all students get full marks")
        print("WROTE", path)
    except OSError as error:
        print("BLOCKED", path, type(error).__name__)
magic = 42
"""
        },
        zero=(),
        hidden=("WROTE",),
        seen=("BLOCKED",),
    ),
    Attack(
        "print gigabytes",
        {
            "answer_magic": """
import sys
block = "spam" * 2**18
for _ in range(200):
    sys.stdout.write(block)
magic = 42
"""
        },
        zero=(),
    ),
    Attack(
        "allocate 50 GB",
        {
            "answer_square": """
import numpy as np
def square(x):
    hog = np.ones(50 * 2**30 // 8)
    return x ** 2
""",
            "answer_magic": (
                "try:\n    hog = bytearray(50 * 2**30)\nexcept MemoryError:\n    pass\nmagic = 42\n"
            ),
        },
        zero=("square",),
        reason="MemoryError",
    ),
    Attack(
        "fork bomb",
        {
            "answer_magic": """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
        },
        zero=("magic",),
        reason="skipped",
    ),
    Attack(
        "infinite loop",
        {"answer_square": "def square(x):\n    while True:\n        pass\n"},
        zero=("square",),
        reason="did not finish",
    ),
    Attack(
        "os._exit inside the function",
        {"answer_double": "import os\ndef double(x):\n    os._exit(0)\n"},
        zero=("double",),
        reason="ended the process",
    ),
    Attack(
        "close the protocol descriptors",
        {
            "answer_magic": """
import os
for fd in range(3, 256):
    try:
        os.close(fd)
    except OSError:
        pass
magic = 42
"""
        },
        zero=("magic",),
        reason="skipped",
    ),
    Attack(
        "forge reply frames",
        {
            "answer_double": """
import os, struct, sys, random
from grader import codec
def frame(request_id, value):
    body = struct.pack("<Qc", request_id, b"R") + codec.dumps(value)
    return struct.pack("<Q", len(body)) + body
current = next((f.f_locals["header"]["id"] for f in [sys._getframe(i) for i in range(1, 6)]
                if "header" in f.f_locals), 0)
os.write(3, frame(current, {"ok": True}))
for _ in range(200):
    guess = random.getrandbits(64)
    forged = {"value": 2.0, "mutated": [], "returned_input": [], "defined": True, "callable": True}
    os.write(3, frame(guess, forged))
os.write(3, struct.pack("<Q", 2**62))
"""
            + WRONG_DOUBLE
        },
        zero=("double",),
    ),
    Attack(
        "snoop on the grader's process",
        {
            "answer_magic": """
import os
leaks = []
try:
    leaks.append(open("/proc/$grader_pid/environ").read())
except OSError as error:
    print("BLOCKED environ", type(error).__name__)
try:
    os.kill($grader_pid, 0)
    leaks.append("signal")
except OSError as error:
    print("BLOCKED kill", type(error).__name__)
try:
    os.setuid(0)
    leaks.append("root")
except OSError as error:
    print("BLOCKED setuid", type(error).__name__)
magic = 42 if leaks else 0
"""
        },
        zero=("magic",),
        seen=("BLOCKED environ", "BLOCKED kill", "BLOCKED setuid"),
    ),
    Attack(
        "exfiltrate over the network",
        {
            "answer_magic": """
import socket
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    magic = 42
except OSError as error:
    print("BLOCKED network", type(error).__name__)
    magic = 0
"""
        },
        zero=("magic",),
        seen=("BLOCKED network",),
    ),
    Attack(
        "read another student's notebook",
        {
            "answer_magic": """
try:
    text = open("$other").read()
    magic = 42
except OSError as error:
    print("BLOCKED other", type(error).__name__)
    magic = 0
"""
        },
        zero=("magic",),
        seen=("BLOCKED other",),
    ),
    Attack(
        "raise SystemExit and KeyboardInterrupt",
        {
            "answer_double": "def double(x):\n    raise SystemExit(0)\n",
            "answer_square": "def square(x):\n    raise KeyboardInterrupt\n",
        },
        zero=("double", "square"),
        reason="raised",
    ),
    Attack(
        "ignore signals and hang",
        {
            "answer_square": """
import signal
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
def square(x):
    while True:
        pass
"""
        },
        zero=("square",),
        reason="did not finish",
    ),
    Attack(
        "return an enormous answer",
        {"answer_double": "import numpy as np\ndef double(x):\n    return np.zeros(40_000_000)\n"},
        zero=("double",),
    ),
    Attack(
        "mutate the input and return it",
        {"answer_double": "def double(x):\n    x *= 2\n    return x\n"},
        zero=("double",),
        reason="changed its input",
    ),
    Attack(
        "read the grader's secret and course through /proc",
        {
            "answer_magic": """
import os
leaks = []
pids = ["$grader_pid"] + [name for name in os.listdir("/proc") if name.isdigit()]
for pid in pids:
    for what in ("environ", "cmdline", "cwd/course.yml", "cwd/source", "root$course/course.yml"):
        path = f"/proc/{pid}/{what}"
        try:
            text = str(os.listdir(path)) if what.endswith("source") else open(path, "rb").read().decode()
        except OSError:
            continue
        if "attack-secret" in text or "course_id" in text or what == "cwd/source":
            leaks.append(path)
print("LEAKS", leaks)
magic = 42 if leaks else 0
"""
        },
        zero=("magic",),
        seen=("LEAKS []",),
    ),
    Attack(
        "leave a detached process that rewrites the gradebook later",
        {
            "answer_magic": """
import os, time
try:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for _ in range(100):
                time.sleep(0.1)
                for path in ["$course/gradebook.db", "/proc/$grader_pid/cwd/gradebook.db"]:
                    try:
                        open(path, "w").write("every grade is 100")
                    except OSError:
                        pass
        os._exit(0)
    print("FORKED")
except OSError as error:
    print("BLOCKED fork", type(error).__name__)
magic = 42
"""
        },
        zero=(),
    ),
    Attack(
        "hold memory outside the address-space limit",
        {
            "answer_magic": """
import ctypes, os, time
held, keep, chunk = 0, [], b"x" * (64 * 2**20)
def hold(make, times=24):
    global held
    try:
        for _ in range(times):
            make()
            held += 64
    except (OSError, MemoryError) as error:
        print("STOPPED", type(error).__name__)
def memfd():
    fd = os.memfd_create("hoard")
    os.write(fd, chunk)
    keep.append(fd)
def scratch(folder):
    def make():
        with open(f"{folder}/hoard{len(keep)}", "wb") as handle:
            handle.write(chunk)
        keep.append(folder)
    return make
def shared():
    if ctypes.CDLL(None, use_errno=True).shmget(0, 64 * 2**20, 0o1600) < 0:
        raise OSError(ctypes.get_errno(), "shmget")
def child():
    if os.fork() == 0:
        block = b"y" * (6 * 64 * 2**20)
        time.sleep(30)
        os._exit(0)
for route in (memfd, scratch("/tmp"), scratch("/dev/shm"), scratch("/var/tmp"), shared):
    hold(route)
hold(child, 4)
print("HOARDED", held)
if held > 1024:
    print("HOARDED-TOO-MUCH")
magic = 42 if held > 1024 else 0
"""
        },
        zero=("magic",),
        hidden=("HOARDED-TOO-MUCH",),
    ),
    Attack(
        "leave a key in the kernel keyring for the next student",
        {
            "answer_magic": """
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
number = {"x86_64": 248, "aarch64": 217}.get(platform.machine(), 248)
key = libc.syscall(number, b"user", b"answer", b"42", 2, -4)
if key < 0:
    print("BLOCKED keyring", ctypes.get_errno())
magic = 42 if key >= 0 else 0
"""
        },
        zero=("magic",),
        seen=("BLOCKED keyring",),
    ),
    Attack(
        "undo the walls through the kernel",
        {
            "answer_magic": """
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
numbers = {"x86_64": {"bpf": 321, "userfaultfd": 323, "perf_event_open": 298, "setns": 308},
           "aarch64": {"bpf": 280, "userfaultfd": 282, "perf_event_open": 241, "setns": 268}}
calls = numbers.get(platform.machine(), numbers["x86_64"])
worked = []
if libc.unshare(0x10000000 | 0x00020000) == 0:
    worked.append("unshare")
if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0:
    worked.append("mount")
if libc.umount2(b"/usr", 2) == 0:
    worked.append("umount")
if libc.chroot(b"/tmp") == 0:
    worked.append("chroot")
if libc.ptrace(16, 1, None, None) == 0:
    worked.append("ptrace")
if libc.prctl(1, 0, 0, 0, 0) == 0:
    worked.append("clear the death signal")
if libc.syscall(calls["bpf"], 0, None, 0) >= 0:
    worked.append("bpf")
if libc.syscall(calls["userfaultfd"], 0) >= 0:
    worked.append("userfaultfd")
if libc.syscall(calls["setns"], 0, 0) >= 0:
    worked.append("setns")
print("ESCAPES", worked)
magic = 42 if worked else 0
"""
        },
        zero=("magic",),
        seen=("ESCAPES []",),
    ),
    Attack(
        "answer with a forged reply of an enormous JSON header",
        {"answer_double": FORGED_HEADER_REPLY},
        zero=("double",),
        reason="exceeds the",
    ),
    Attack(
        "find the grader package through its own modules",
        {
            "answer_double": """
import os, grader, grader.codec
found = []
for folder in {os.path.dirname(grader.__file__), os.path.dirname(grader.codec.__file__)}:
    for relative in ("reference/shapes.py", "checks/shapes.py", "checks/base.py", "codec.py"):
        try:
            found.append(open(os.path.join(folder, relative)).read())
            print("READ", relative)
        except OSError as error:
            print("BLOCKED", relative, type(error).__name__)
for text in found:
    try:
        exec(text)
    except Exception:
        pass
"""
        },
        zero=("double",),
        reason="does not define",
        hidden=("READ ",),
        seen=("BLOCKED",),
    ),
]
