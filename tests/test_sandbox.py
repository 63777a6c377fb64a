"""The sandbox and grade_submission: isolation, limits, restarts, malformed notebooks, the real course."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attacks import kit
from grader.codec import CallableSpec, LinearData, TensorData, Unsupported
from grader.course import load_course
from grader.result import Status
from grader.sandbox import RemoteFunction, Sandbox, SandboxError, hidden_paths
from grader.sandbox import runner
from grader.sandbox.isolation import STUDENT_UID, SYSTEM_TREES
from grader.student import LocalFunction, NotDefined, StudentCrashed, StudentRaised, StudentTimeout
from grader.submission import SubmissionResult, grade_submission

pytestmark = [pytest.mark.xdist_group("sandbox"), pytest.mark.slow]

ROOT = os.geteuid() == 0
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return kit.make_course(tmp_path_factory.mktemp("sandbox-course") / "course")


@pytest.fixture(scope="module")
def sandbox(course):
    with Sandbox(course.limits) as box:
        yield box


@pytest.fixture
def session(sandbox, course):
    with sandbox.session(hide=hidden_paths(course.root)) as live:
        live.start()
        yield live


def grade(course, sandbox, path, student="alice"):
    return grade_submission(course, kit.ASSIGNMENT, path, student, "test-secret", sandbox)


def run(session, source, label=None):
    label = label or f"<cell {len(session.history) + 1}>"
    return session.run_cell(label, source)


def wait_until_gone(marker: str, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = kit.processes_with(marker)
        if not left:
            return []
        time.sleep(0.02)
    return kit.processes_with(marker)


# ----------------------------------------------------------------------------- the warm interpreter


def test_zygote_preloads_libraries_and_no_grading_code(sandbox):
    assert {"numpy", "torch", "matplotlib.pyplot"} <= set(sandbox.info["preloaded"])
    assert sandbox.info["forbidden_modules"] == []


def test_every_isolation_mechanism_is_available_as_root(sandbox):
    assert sandbox.warnings == []


def test_student_process_has_agg_backend_and_preloaded_torch(session):
    assert run(
        session,
        "import sys, matplotlib\nbackend = matplotlib.get_backend()\n"
        "warm = 'torch' in sys.modules\nipython = 'IPython' in sys.modules\n"
        "grading = sorted(m for m in sys.modules if m.startswith(('grader.checks', 'grader.reference')))",
    ).ok
    assert session.value("backend").lower() == "agg"
    assert session.value("warm") is True
    assert session.value("ipython") is False and session.value("grading") == []


def test_student_runs_as_slot_user_in_empty_private_dir_with_scrubbed_env(session, monkeypatch):
    assert run(
        session,
        "import os\nwho = (os.getuid(), os.getgid(), os.getcwd(), os.listdir('.'),\n"
        "       sorted(os.environ), os.getpid() == 1)",
    ).ok
    uid, gid, cwd, listing, env, init = session.value("who")
    assert uid == gid == (session.uid if ROOT else STUDENT_UID) and uid != 0
    assert cwd == "/tmp/work" and listing == []
    assert set(env) <= {
        "PATH",
        "HOME",
        "TMPDIR",
        "LANG",
        "MPLBACKEND",
        "PYTHONDONTWRITEBYTECODE",
        "MPLCONFIGDIR",
    }
    assert init is True  # the first process of its own PID namespace


def test_secret_and_nbgrader_variables_never_reach_student_code(sandbox, monkeypatch):
    monkeypatch.setenv("SANDBOX_TEST_SECRET", "do-not-leak-4411")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    with sandbox.session() as live:
        live.start()
        assert run(live, "import os\nenv = dict(os.environ)").ok
        env = live.value("env")
    assert "SANDBOX_TEST_SECRET" not in env and "NBGRADER_EXECUTION" not in env
    assert "do-not-leak-4411" not in json.dumps(env)


# ----------------------------------------------------------------------------- isolation


def test_each_submission_gets_a_fresh_process(sandbox, course):
    with sandbox.session() as first:
        first.start()
        assert run(
            first,
            "import builtins, numpy as np\nbuiltins.LEFT_OVER = 1\nnp.LEFT_OVER = 2",
        ).ok
        first_pid = first.pid
    with sandbox.session() as second:
        second.start()
        assert run(
            second,
            "import builtins, numpy as np, os\n"
            "seen = (hasattr(builtins, 'LEFT_OVER'), hasattr(np, 'LEFT_OVER'), os.getpid())",
        ).ok
        leftover_builtin, leftover_numpy, _ = second.value("seen")
        second_pid = second.pid
    assert not leftover_builtin and not leftover_numpy
    assert second_pid != first_pid


def test_files_written_by_one_student_are_invisible_to_the_next(sandbox):
    places = [
        "/tmp/note.txt",
        "/var/tmp/note.txt",
        "/dev/shm/note.txt",
        "note.txt",
        os.path.expanduser("~") + "/note.txt",
        str(REPO / "note.txt"),
        "/work/note.txt",
    ]
    writer = (
        "import os\nwritten = []\nfor p in %r:\n    try:\n        open(p, 'w').write('from alice')\n"
        "        written.append(p)\n    except OSError:\n        pass\n" % places
    )
    with sandbox.session() as alice:
        alice.start()
        assert run(alice, writer).ok
        assert "/tmp/note.txt" in alice.value("written")
    with sandbox.session() as bob:
        bob.start()
        assert run(bob, "import os\nfound = [p for p in %r if os.path.exists(p)]" % places).ok
        assert bob.value("found") == []
    assert not Path("/var/tmp/note.txt").exists() and not (REPO / "note.txt").exists()


def test_student_cannot_read_course_sources_reference_or_grader(session, course):
    secrets = [
        REPO / "grader" / "reference" / "shapes.py",
        REPO / "grader" / "checks" / "base.py",
        REPO / "course.yml",
        REPO / "source" / "01_shapes" / "01_shapes.ipynb",
        course.root / "source" / kit.ASSIGNMENT / f"{kit.ASSIGNMENT}.ipynb",
        course.root / "course.yml",
    ]
    probe = (
        "import os\nread = {}\nfor p in %r:\n    try:\n        read[p] = open(p).read()\n"
        "    except OSError as e:\n        read[p] = type(e).__name__\n"
        "listed = {d: os.listdir(d) if os.path.isdir(d) else None for d in %r}\n"
        "try:\n    import grader.reference.shapes\n    imported = True\n"
        "except ImportError:\n    imported = False\n"
    )
    folders = [str(REPO / "grader"), str(REPO / "source"), str(course.root)]
    assert run(session, probe % ([str(p) for p in secrets], folders)).ok
    read = session.value("read")
    for path in secrets:
        assert read[str(path)] in ("", "FileNotFoundError"), f"student code read {path}"
    assert all(not listing for listing in session.value("listed").values())
    assert session.value("imported") is False


def test_private_root_holds_no_handle_to_the_outside(sandbox, monkeypatch):
    from grader.sandbox import runner

    doubled = [runner.VISIBLE_TO_STUDENTS[-1] + "/", runner.VISIBLE_TO_STUDENTS[-1] + "/."]
    monkeypatch.setattr(runner, "VISIBLE_TO_STUDENTS", runner.VISIBLE_TO_STUDENTS + doubled)
    with sandbox.session() as live:
        live.start()
        assert run(
            live,
            "import os\nfds = {}\nfor fd in os.listdir('/proc/self/fd'):\n    try:\n"
            "        fds[int(fd)] = os.readlink('/proc/self/fd/' + fd)\n    except OSError:\n"
            "        pass",
        ).ok
        fds = live.value("fds")
    assert sorted(fds)[:4] == [0, 1, 2, 3] and fds[0] == "/dev/null"
    outside = {fd: target for fd, target in fds.items() if target.startswith("/") and target != "/dev/null"}
    assert outside == {}


def test_student_sees_no_other_files_on_the_machine(session, tmp_path_factory):
    decoy_folder = Path(tempfile.mkdtemp(prefix="another-course-", dir="/var/tmp"))
    try:
        decoy = decoy_folder / "source.ipynb"
        decoy.write_text("instructor notes")
        decoy.chmod(0o644)
        decoy_folder.chmod(0o755)
        probe = (
            "import os\nseen = {}\nfor p in %r:\n    try:\n        seen[p] = open(p).read()\n"
            "    except OSError as e:\n        seen[p] = type(e).__name__\n"
            "top = sorted(os.listdir('/'))\n"
        )
        course_source = str(REPO / "source" / "01_shapes" / "01_shapes.ipynb")
        places = [str(decoy), course_source, "/etc/hostname"]
        assert run(session, probe % places).ok
        seen = session.value("seen")
        assert seen[str(decoy)] == "FileNotFoundError"
        assert seen[course_source] == "FileNotFoundError"
        private_root = {Path(tree).name for tree in SYSTEM_TREES} | {"dev", "proc", "tmp", "var"}
        exposed = {Path(os.path.realpath(path)).parts[1] for path in runner.VISIBLE_TO_STUDENTS}
        top = set(session.value("top"))
        assert top <= private_root | exposed, f"unexpected entries in /: {top - private_root - exposed}"
        assert "sys" not in top
    finally:
        shutil.rmtree(decoy_folder, ignore_errors=True)


def test_no_network_not_even_the_graders_loopback(session):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        assert run(
            session,
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
            "    reached = 'connected'\nexcept OSError as e:\n    reached = type(e).__name__",
        ).ok
        assert session.value("reached") != "connected"
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


def test_student_sees_only_its_own_processes(session):
    assert run(
        session,
        "import os\nvisible = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\nme = os.getpid()",
    ).ok
    assert session.value("visible") == [session.value("me")]
    assert os.getpid() not in session.value("visible")


def test_output_is_captured_and_capped_without_blocking(session):
    outcome = run(
        session,
        "import sys\nprint('first line')\nchunk = 'x' * 65536\n"
        "for _ in range(800):\n    sys.stdout.write(chunk)\nprint('done', file=sys.stderr)",
    )
    assert outcome.ok
    session.close()
    text = session.output_text()
    assert text.startswith("first line")
    assert len(text.encode()) <= session.limits.output_kb * 1024 + 200
    assert "output limit reached" in text


def test_process_tree_is_gone_after_the_session(sandbox):
    live = sandbox.session()
    live.start()
    spawn = (
        "import os, subprocess, time\ntry:\n    sleeper = subprocess.Popen(['sleep', '300.4471'])\n"
        "    if os.fork() == 0:\n        os.setsid()\n        if os.fork() == 0:\n"
        "            os.execvp('sleep', ['sleep', '300.4471'])\n        os._exit(0)\n"
        "    time.sleep(0.2)\n    made = True\nexcept OSError:\n    made = False\n"
    )
    assert run(live, spawn).ok
    if sandbox.cgroups():
        assert live.value("made") is True and len(kit.processes_with("300.4471")) == 2
    else:  # no cgroup to count children's memory: no children at all
        assert live.value("made") is False
    live.close()
    assert wait_until_gone("300.4471") == []


def test_fork_bomb_is_capped_and_cleaned_up(sandbox):
    live = sandbox.session()
    live.limits = dataclasses.replace(
        live.limits, part_timeout_s=20
    )  # ~100 forks of a warm interpreter, on a busy machine
    live.start()
    bomb = (
        "import os\nn = 0\nwhile True:\n    try:\n        pid = os.fork()\n    except OSError:\n"
        "        break\n    if pid == 0:\n        import time\n        time.sleep(300)\n        os._exit(0)\n"
        "    n += 1\n"
    )
    outcome = run(live, bomb)
    assert outcome.ok
    if sandbox.cgroups():
        assert 0 < live.value("n") < 64 + 8 * (os.cpu_count() or 1)
    else:
        assert live.value("n") == 0
    live.close()
    assert kit.descendants(sandbox._process.pid) == []


def test_memory_cap_turns_a_huge_allocation_into_an_error(session):
    outcome = run(session, "import numpy as np\nbig = np.ones(50 * 2**30 // 8)")
    assert outcome.status == "raised" and "MemoryError" in outcome.message
    assert run(session, "small = np.ones(1000).sum()").ok
    assert session.value("small") == 1000.0


# ----------------------------------------------------------------------------- timeouts, crashes, restarts


def test_hanging_cell_is_skipped_and_state_replayed(session):
    assert run(session, "a = 20", "<cell a>").ok
    hung = run(session, "while True:\n    pass", "<cell hang>")
    assert hung.status == "timeout" and "did not finish within" in hung.message
    assert run(session, "b = a + 1", "<cell b>").ok
    assert session.value("b") == 21
    assert session.restarts == 1 and "<cell hang>" in session.skipped


def test_exiting_cell_is_skipped_with_its_exit_status(session):
    assert run(session, "a = 1").ok
    died = run(session, "import os\nos._exit(7)", "<cell exit>")
    assert died.status == "crashed" and died.message.endswith("the process exited with status 7")
    assert run(session, "b = a + 1").ok and session.value("b") == 2
    cut = run(session, "import os\nos.close(3)", "<cell cut>")
    assert (
        cut.status == "crashed"
        and "closed or overwrote the process's connection to the grader" in cut.message
    )
    assert run(session, "c = b + 1").ok and session.value("c") == 3


def test_crash_inside_a_call_costs_only_that_call(session):
    assert run(session, "import os\ndef bad(x):\n    os._exit(3)\ndef good(x):\n    return x + 1").ok
    bad = RemoteFunction(session, "bad")
    with pytest.raises(StudentCrashed, match="status 3"):
        bad(np.ones(2))
    with pytest.raises(StudentCrashed):
        bad(np.ones(2))
    session.ensure_alive()
    assert RemoteFunction(session, "good")(np.ones(2)).tolist() == [2.0, 2.0]


def test_hanging_call_times_out(session):
    assert run(session, "def slow(x):\n    while True:\n        pass").ok
    with pytest.raises(StudentTimeout, match="did not finish within"):
        RemoteFunction(session, "slow")(1)


def test_notebook_deadline_stops_everything(sandbox):
    with sandbox.session(deadline=time.monotonic() + 1.5) as live:
        live.start()
        outcome = run(live, "while True:\n    pass")
        assert outcome.status == "timeout" and "notebook's time limit" in outcome.message
        with pytest.raises(StudentTimeout):
            live.probe("anything")


# ----------------------------------------------------------------------------- the data boundary


def test_remote_function_behaves_like_local_function(session):
    source = (
        "import numpy as np\n"
        "def scale(x, factor):\n    return x * factor\n"
        "def inplace(x):\n    x *= 2\n    return x\n"
        "def stub(x):\n    raise NotImplementedError('Task 9.9: write it')\n"
        "def broken(x):\n    return {}['missing']\n"
    )
    assert run(session, source).ok
    namespace = {}
    exec(source, namespace)
    x = np.arange(7.0).reshape(7, 1)
    for name, args in [("scale", (x, 3)), ("inplace", (x,))]:
        remote, local = RemoteFunction(session, name), LocalFunction(namespace[name])
        assert np.array_equal(remote(*args), local(*args))
        assert remote.last_mutated == local.last_mutated
        assert remote.last_returned_input == local.last_returned_input
    assert RemoteFunction(session, "inplace").last_mutated == ()
    with pytest.raises(StudentRaised) as raised:
        RemoteFunction(session, "stub")(x)
    assert raised.value.not_implemented and "Task 9.9" in raised.value.message
    with pytest.raises(StudentRaised, match="KeyError"):
        RemoteFunction(session, "broken")(x)


def test_values_arrive_as_data(session):
    assert run(
        session,
        "import torch\nt = torch.ones(2, 3, requires_grad=True)\nlayer = torch.nn.Linear(3, 2)\n"
        "gen = (i for i in range(3))\nclass Liar:\n    def __eq__(self, other):\n        return True\n"
        "liar = Liar()\nnums = [1, 2.5, (3, 'x')]",
    ).ok
    tensor = session.value("t")
    assert type(tensor) is TensorData and tensor.array.shape == (2, 3) and tensor.requires_grad
    assert type(session.value("layer")) is LinearData
    assert type(session.value("gen")) is Unsupported and type(session.value("liar")) is Unsupported
    assert session.value("nums") == [1, 2.5, (3, "x")]
    with pytest.raises(NotDefined):
        session.value("never_defined")
    assert session.probe("never_defined") == {"defined": False}


def test_concurrent_sessions_get_distinct_users(sandbox):
    found, errors = {}, []

    def work(index):
        try:
            with sandbox.session() as live:
                live.start()
                run(live, f"import os\nme = (os.getuid(), {index} * 2)")
                found[index] = live.value("me")
        except Exception as error:  # surfaced by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert sorted(value for _, value in found.values()) == [0, 2, 4]
    if ROOT:
        assert len({uid for uid, _ in found.values()}) == 3


def test_without_isolation_still_separate_process_with_a_warning(course, tmp_path):
    path = kit.write_submission(tmp_path / "alice" / "nb.ipynb")
    with Sandbox(course.limits, isolate=False) as loose:
        assert any("isolation is turned off" in warning for warning in loose.warnings)
        result = grade(course, loose, path)
    assert kit.scores(result) == kit.FULL_MARKS
    assert any("isolation is turned off" in warning for warning in result.warnings)


# ----------------------------------------------------------------------------- grade_submission


def test_honest_submission_gets_full_marks(course, sandbox, tmp_path):
    path = kit.write_submission(tmp_path / "alice" / "nb.ipynb")
    grade(course, sandbox, path)
    result = grade(course, sandbox, path)  # a second time, on the warm sandbox
    assert isinstance(result, SubmissionResult) and result.error is None
    assert kit.scores(result) == kit.FULL_MARKS
    assert [p.id for p in result.parts] == ["double", "magic", "explain", "square", "formula"]
    assert kit.part(result, "explain").status == Status.MANUAL
    assert result.answers["explain"] == kit.HONEST["explain"]
    assert result.answers["double"] == kit.HONEST["answer_double"]
    assert (result.score, result.max_score) == (5.0, 6.0)


def test_test_cells_and_illustrations_never_run_and_extra_cells_are_ignored(course, sandbox, tmp_path):
    extra = [kit.code("print('EXTRA-CELL-RAN')\ndef square(x):\n    return 0 * x\n")]
    path = kit.write_submission(tmp_path / "alice" / "nb.ipynb", extra=extra)
    result = grade(course, sandbox, path)
    assert kit.scores(result) == kit.FULL_MARKS
    for marker in (kit.TEST_CELL_MARKER, kit.ILLUSTRATION_MARKER, "EXTRA-CELL-RAN"):
        assert marker not in result.output


def test_locked_cells_come_from_the_source_notebook(course, sandbox, tmp_path):
    cells = kit.submission_cells()
    cells[1] = dict(cells[1], source="import numpy as np\nSCALE = 3.0\n")
    result = grade(course, sandbox, kit.write_submission(tmp_path / "a.ipynb", cells=cells))
    assert kit.part(result, "double").score == 2.0


def test_same_notebook_graded_twice_gives_identical_results(course, sandbox, tmp_path):
    overrides = {"answer_square": "def square(x):\n    return x * 2\n", "answer_magic": "magic = 41\n"}
    path = kit.write_submission(tmp_path / "alice" / "nb.ipynb", overrides)
    first, second = grade(course, sandbox, path), grade(course, sandbox, path)
    assert first.to_dict() == second.to_dict()
    assert kit.scores(first)["square"] == 0 and kit.scores(first)["magic"] == 0


def test_result_dict_has_the_documented_keys(course, sandbox, tmp_path):
    result = grade(course, sandbox, kit.write_submission(tmp_path / "a.ipynb"))
    data = result.to_dict()
    assert list(data) == [
        "notebook",
        "assignment",
        "student",
        "score",
        "max_score",
        "parts",
        "error",
        "warnings",
    ]
    assert data["parts"][0] == result.parts[0].to_dict()
    json.dumps(data)


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"{not json", "invalid JSON"),
        (b"[" * 100_000, "invalid JSON"),
        (bytes(range(256)) * 40, "not UTF-8"),
        (b"", "is empty"),
        (b"[1, 2, 3]", "no list of cells"),
        (json.dumps({"cells": [], "nbformat": 3}).encode(), "nbformat 3"),
        (json.dumps({"cells": [{"cell_type": "code", "source": 5}], "nbformat": 4}).encode(), "cell 1"),
        (
            json.dumps({"cells": ["oops"], "nbformat": 4}).encode(),
            "cell 1 is not a notebook cell (it is a str",
        ),
        (
            json.dumps({"cells": [{"cell_type": 7}], "nbformat": 4}).encode(),
            "cell 1 is not a notebook cell (its cell_type is 7)",
        ),
        (
            json.dumps({"cells": [{"cell_type": "code", "source": ["x = 1", None]}], "nbformat": 4}).encode(),
            "cell 1",
        ),
    ],
)
def test_malformed_notebook_gives_clear_error_and_zeros(course, sandbox, tmp_path, content, expected):
    path = tmp_path / "broken.ipynb"
    path.write_bytes(content)
    result = grade(course, sandbox, path)
    assert result.error and expected in result.error
    assert [p.id for p in result.parts] == [p.id for p in course.assignment(kit.ASSIGNMENT).parts]
    assert all(p.score == 0 and p.status == Status.ERROR and expected in p.feedback for p in result.parts)


def test_missing_file_and_unknown_assignment(course, sandbox, tmp_path):
    missing = grade(course, sandbox, tmp_path / "nope.ipynb")
    assert "cannot be read" in missing.error and len(missing.parts) == 5
    unknown = grade_submission(course, "42_unknown", tmp_path / "nope.ipynb", "alice", "s", sandbox)
    assert "unknown assignment" in unknown.error and unknown.parts == []


def test_notebook_of_another_assignment_is_rejected(course, sandbox, tmp_path):
    other = [
        kit.code(
            "def linear_forward(x, W, b):\n    return x",
            {"grade_id": "answer_linear_forward", "solution": True},
        )
    ]
    result = grade(course, sandbox, kit.write_submission(tmp_path / "other.ipynb", cells=other))
    assert "none of the answer cells" in result.error
    assert [p.id for p in result.parts] == [p.id for p in course.assignment(kit.ASSIGNMENT).parts]
    assert all(
        p.score == 0 and p.status == Status.ERROR and "none of the answer cells" in p.feedback
        for p in result.parts
    )


def test_a_sandbox_failure_keeps_the_free_text_answer_and_asks_for_a_regrade(course, tmp_path):
    class NoSessions:
        warnings: list[str] = []

        def session(self, **_):
            raise SandboxError("no student process can start")

    result = grade(course, NoSessions(), kit.write_submission(tmp_path / "a.ipynb"))
    assert "could not run this notebook safely: no student process can start" in result.error and result.retry
    assert kit.part(result, "explain").status == Status.MANUAL
    assert all(p.score == 0 and p.status == Status.ERROR for p in result.parts if p.id != "explain")


def test_deleted_answer_cells_cost_only_their_parts(course, sandbox, tmp_path):
    path = kit.write_submission(tmp_path / "a.ipynb", drop=("answer_square", "explain"))
    result = grade(course, sandbox, path)
    assert result.error is None
    assert kit.scores(result) == {**kit.FULL_MARKS, "square": 0.0}
    assert "no answer cell" in kit.part(result, "square").feedback
    assert "no answer cell" in kit.part(result, "explain").feedback
    assert kit.part(result, "explain").status == Status.FAILED


def test_duplicated_answer_cell_uses_the_first_and_says_so(course, sandbox, tmp_path):
    cells = kit.submission_cells({"answer_square": "def square(x):\n    return x + 1\n"})
    index = next(
        i for i, c in enumerate(cells) if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer_square"
    )
    cells.insert(index + 1, kit.answer("answer_square", kit.HONEST["answer_square"]))
    result = grade(course, sandbox, kit.write_submission(tmp_path / "dup.ipynb", cells=cells))
    assert kit.part(result, "square").score == 0
    assert "the first one was graded" in kit.part(result, "square").feedback
    assert any("answer_square" in warning for warning in result.warnings)


def test_reordered_cells_and_list_sources_are_fine(course, sandbox, tmp_path):
    cells = kit.submission_cells()[::-1]
    for cell in cells:
        cell["source"] = cell["source"].splitlines(keepends=True)
    result = grade(course, sandbox, kit.write_submission(tmp_path / "rev.ipynb", cells=cells))
    assert kit.scores(result) == kit.FULL_MARKS


def test_answer_cell_of_the_wrong_type(course, sandbox, tmp_path):
    cells = kit.submission_cells()
    for cell in cells:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "answer_magic":
            cell["cell_type"] = "markdown"
    result = grade(course, sandbox, kit.write_submission(tmp_path / "md.ipynb", cells=cells))
    assert kit.part(result, "magic").score == 0 and "markdown cell" in kit.part(result, "magic").feedback
    assert kit.part(result, "double").score == 2


def test_failing_answer_cells_are_reported_per_part(course, sandbox, tmp_path):
    overrides = {
        "answer_magic": "magic = undefined_name\n",
        "answer_double": "def double(x):\n    raise NotImplementedError('Task 1.1: double x')\n",
        "answer_formula": "import os\nos._exit(1)\n",
    }
    result = grade(course, sandbox, kit.write_submission(tmp_path / "a.ipynb", overrides))
    magic, double, formula = (kit.part(result, name) for name in ("magic", "double", "formula"))
    assert magic.score == 0 and "NameError" in magic.feedback
    assert double.score == 0 and "not-implemented" in double.misconceptions
    assert formula.score == 0 and formula.status == Status.ERROR and "skipped" in formula.feedback
    assert kit.part(result, "square").score == 1


def test_grading_submissions_in_parallel_threads(course, sandbox, tmp_path):
    paths = [
        kit.write_submission(
            tmp_path / f"s{i}" / "nb.ipynb", {"answer_magic": f"magic = {42 if i % 2 == 0 else 7}\n"}
        )
        for i in range(4)
    ]
    results = [None] * 4
    threads = [
        threading.Thread(target=lambda i=i: results.__setitem__(i, grade(course, sandbox, paths[i], f"s{i}")))
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [kit.scores(r)["magic"] for r in results] == [1.0, 0.0, 1.0, 0.0]
    assert all(kit.scores(r)["double"] == 2.0 for r in results)


def test_hidden_paths_keep_the_python_environment(course):
    hidden = hidden_paths(course.root)
    assert str(course.root / "source") in hidden and str(course.root / "course.yml") in hidden
    assert str(REPO / "grader") in hidden and str(REPO / "source") in hidden
    prefix = str(Path(sys.prefix).resolve())
    assert not any(prefix == path or prefix.startswith(path + "/") for path in hidden)


REFUSED_SCRIPT = """
import errno, json, sys
import pyseccomp
sys.path.insert(0, {tests!r})
from pathlib import Path
from attacks import kit
from grader.sandbox import IsolationUnavailable, Sandbox
from grader.submission import grade_submission
rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "unshare")  # a kernel that refuses namespaces
rules.load()
course = kit.make_course(Path({root!r}))
answer = "import os\\nprint('UID', os.getuid())\\nmagic = 42"
path = kit.write_submission(Path({root!r}) / "nb.ipynb", {{"answer_magic": answer}})
try:
    with Sandbox(course.limits) as box:
        result = grade_submission(course, kit.ASSIGNMENT, path, "alice", "s", box)
except IsolationUnavailable as error:
    print(json.dumps({{"refused": str(error)}}))
    sys.exit(3)
print(json.dumps({{"scores": kit.scores(result), "warnings": result.warnings, "output": result.output}}))
"""


def _without_namespaces(tmp_path, unsafe: bool):
    script = tmp_path / "refused.py"
    script.write_text(REFUSED_SCRIPT.format(tests=str(REPO / "tests"), root=str(tmp_path / "course")))
    env = {key: value for key, value in os.environ.items() if key != runner.UNSAFE_ENV}
    if unsafe:
        env[runner.UNSAFE_ENV] = "1"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env
    )
    return done, json.loads(done.stdout.strip().splitlines()[-1])


def test_without_namespaces_student_code_is_refused_in_one_line(tmp_path):
    done, report = _without_namespaces(tmp_path, unsafe=False)
    assert done.returncode == 3, done.stderr[-2000:]
    reason = report["refused"]
    assert "\n" not in reason and "namespaces" in reason and runner.UNSAFE_FLAG in reason
    assert "UID" not in done.stdout


def test_without_namespaces_the_override_grades_and_says_once_what_is_exposed(tmp_path):
    done, report = _without_namespaces(tmp_path, unsafe=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert report["scores"] == kit.FULL_MARKS
    assert "UID " in report["output"]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING (grader sandbox)")]
    assert len(warnings) == 1 and "can read every file" in warnings[0] and "gradebook" in warnings[0]
    assert any("isolation was overridden" in warning for warning in report["warnings"])


def test_a_dead_warm_interpreter_is_restarted(sandbox):
    sandbox._process.kill()
    sandbox._process.wait()
    with sandbox.session() as live:
        live.start()
        assert run(live, "x = 6 * 7").ok and live.value("x") == 42
    assert any("restarted" in warning for warning in sandbox.warnings)
    sandbox.warnings.remove(next(w for w in sandbox.warnings if "restarted" in w))


# ----------------------------------------------------------------------------- the real course


def _real_assignments():
    course = load_course()
    return [a.id for a in course.assignments]


@pytest.fixture(scope="module")
def real_sandbox():
    with Sandbox(load_course().limits) as box:
        yield box


@pytest.mark.parametrize("assignment_id", _real_assignments())
def test_real_source_notebook_earns_every_automatic_point(assignment_id, real_sandbox):
    course = load_course()
    assignment = course.assignment(assignment_id)
    result = grade_submission(
        course,
        assignment_id,
        course.root / "source" / assignment_id / assignment.notebook,
        "reference-student",
        "test-secret",
        real_sandbox,
    )
    assert result.error is None
    assert [p.id for p in result.parts] == [p.id for p in assignment.parts]
    for part in result.parts:
        expected = Status.MANUAL if assignment.part(part.id).kind == "manual" else Status.PASSED
        assert part.status == expected, f"{part.id}: {part.feedback}"


# ----------------------------------------------------------------------------- callable arguments

CHEATS = {
    ("05_matmul_benchmark", "time_op"): (
        "import numpy as np\ndef time_op(fn, warmup, repeat, timer, sync=None):\n"
        "    return float(np.median(fn.__self__.durations))\n"
    ),
    ("03_gradients", "numerical_gradient"): "def numerical_gradient(f, x):\n    return f.gradient(x)\n",
}


def test_callable_arguments_hold_nothing_but_a_way_back_to_the_grader(session):
    source = (
        "def peek(fn, warmup, repeat, timer, sync=None):\n"
        "    import gc, sys\n"
        "    seen = [type(fn).__name__, sorted(a for a in dir(fn) if not a.startswith('__'))]\n"
        "    seen.append(getattr(fn, '__closure__', None) is None and not hasattr(fn, '__self__'))\n"
        "    seen.append(any(type(o) is list and 0.3141592 in o for o in gc.get_objects()) or any(\n"
        "        b'0.3141592' in bytes(v) for f in sys._current_frames().values() for g in [f, f.f_back]\n"
        "        if g for v in g.f_locals.values() if type(v) in (bytes, bytearray, memoryview)))\n"
        "    return seen\n"
        "def honest(fn, warmup, repeat, timer, sync=None):\n"
        "    times = []\n"
        "    for _ in range(repeat):\n"
        "        start = timer()\n        fn()\n        times.append(timer() - start)\n"
        "    return sorted(times)[len(times) // 2]\n"
    )
    assert run(session, source).ok
    device = {
        "device_id": "d",
        "durations": [0.3141592, 0.2718281, 0.1414213],
        "asynchronous": False,
        "launch_overhead": 0.0,
    }
    arguments = [
        CallableSpec("fake_device_fn", device),
        0,
        3,
        CallableSpec("fake_device_timer", device),
        None,
    ]
    kind, attributes, opaque, found = RemoteFunction(session, "peek")(*arguments)
    assert kind == "Callback" and attributes == ["_channel", "_index"] and opaque is True and found is False
    honest = RemoteFunction(session, "honest")
    assert honest(*arguments) == pytest.approx(0.2718281)
    device_run = honest.last_callables[0].__self__
    assert device_run.calls == 3 and len(device_run.clock_reads) == 6


@pytest.mark.parametrize("assignment_id, part_id", sorted(CHEATS))
def test_reading_the_answer_off_a_callable_argument_scores_nothing(
    assignment_id, part_id, real_sandbox, tmp_path
):
    course = load_course()
    assignment = course.assignment(assignment_id)
    notebook = json.loads((course.root / "source" / assignment_id / assignment.notebook).read_text())
    replaced = 0
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == f"answer_{part_id}":
            cell["source"], replaced = CHEATS[assignment_id, part_id], replaced + 1
    assert replaced == 1
    path = tmp_path / assignment.notebook
    path.write_text(json.dumps(notebook))
    result = grade_submission(course, assignment_id, path, "mallory", "test-secret", real_sandbox)
    scores = {part.id: part for part in result.parts}
    assert scores[part_id].score == 0 and "AttributeError" in scores[part_id].feedback
    automatic = [p for p in assignment.parts if p.kind != "manual" and p.id != part_id]
    assert all(scores[p.id].status == Status.PASSED for p in automatic)


# ----------------------------------------------------------------------------- a hostile reply

HOSTILE_REPLY_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
import numpy as np
import grader.submission  # the grading side, as autograde loads it
sys.path.insert(0, {tests!r})
from attacks.snippets import FORGED_HEADER_REPLY
from grader.sandbox import RemoteFunction, Sandbox
from grader.student import StudentCrashed
def peak():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) * 1024
with Sandbox() as box, box.session() as live:
    live.start()
    assert live.run_cell("forge", FORGED_HEADER_REPLY + "def honest(x):\\n    return 2 * x\\n").ok
    for _ in range(3):
        RemoteFunction(live, "honest")(np.ones(1000))
    baseline = peak()
    try:
        RemoteFunction(live, "double")(np.ones(3))
        reason = "accepted"
    except StudentCrashed as error:
        reason = error.reason
    print(baseline, peak(), reason)
"""


def test_a_hostile_reply_costs_the_grader_less_than_its_baseline_memory(tmp_path):
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE_REPLY_SCRIPT.format(repo=str(REPO), tests=str(REPO / "tests")))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    baseline, peak, reason = done.stdout.strip().splitlines()[-1].split(" ", 2)
    assert "exceeds the" in reason  # the forged 64 MiB header was refused before it was read
    assert int(peak) <= 2 * int(baseline)


def test_the_command_line_names_the_sandbox_override():
    from grader import cli

    assert (cli.UNSAFE_FLAG, cli.UNSAFE_ENV) == (runner.UNSAFE_FLAG, runner.UNSAFE_ENV)


# ----------------------------------------------------------------------------- install layouts

LAYOUT_CELL = """
import json, os, grader
package = os.path.dirname(grader.__file__)
read = {{}}
inside = [os.path.join(package, "reference", "shapes.py"), os.path.join(package, "checks", "base.py")]
for path in {secrets!r} + inside:
    try:
        read[path] = open(path).read()[:40]
    except OSError as error:
        read[path] = type(error).__name__
listed = {{}}
for folder in {folders!r} + [package]:
    try:
        listed[folder] = sorted(os.listdir(folder))
    except OSError as error:
        listed[folder] = type(error).__name__
try:
    import grader.reference.shapes
    imported = "imported"
except ImportError as error:
    imported = type(error).__name__
import layerlab
probe = json.dumps([read, listed, imported])
"""
LAYOUT_PROBE = """
import json, sys
import grader
from grader.sandbox import Sandbox, hidden_paths
with Sandbox() as box, box.session(hide=hidden_paths({course!r})) as live:
    live.start()
    assert live.run_cell("probe", {cell!r}).ok, live.output_text()
    print(json.dumps({{"grader": grader.__file__, "probe": live.value("probe")}}))
"""
LAYOUTS = ("wheel", "venv inside the course", "PYTHONPATH checkout")


@pytest.fixture(scope="module")
def project_wheel(tmp_path_factory):
    """The project built as a wheel (from a copy, so the checkout stays untouched)."""
    source, out = tmp_path_factory.mktemp("wheel-source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md", "grader", "layerlab"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, source / name)
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
    done = subprocess.run([*build, "-w", str(out), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return next(out.glob("*.whl"))


def _venv_with_wheel(folder: Path, wheel: Path) -> Path:
    """A venv at `folder` with the project's wheel installed (this venv's packages behind it)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    site = next(folder.glob("lib/python3*/site-packages"))
    dependencies = next(path for path in sys.path if Path(path).name == "site-packages")
    (site / "dependencies.pth").write_text(dependencies + "\n")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return folder / "bin" / "python"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_no_install_layout_shows_the_grader_or_the_course(layout, project_wheel, tmp_path):
    course = kit.make_course(tmp_path / "course").root
    (course / "gradebook.db").write_text("grades")
    kit.write_submission(course / "submitted" / "ada" / kit.ASSIGNMENT / f"{kit.ASSIGNMENT}.ipynb")
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if layout == "wheel":
        python = _venv_with_wheel(tmp_path / "venv", project_wheel)
    elif layout == "venv inside the course":
        python = _venv_with_wheel(course / ".venv", project_wheel)
    else:  # the course folder is a checkout, run from source
        for name in ("grader", "layerlab"):
            shutil.copytree(REPO / name, course / name)
        python, env["PYTHONPATH"] = Path(sys.executable), str(course)
    secrets = [
        str(course / "source" / kit.ASSIGNMENT / f"{kit.ASSIGNMENT}.ipynb"),
        str(course / "gradebook.db"),
        str(course / "course.yml"),
        str(course / "submitted" / "ada" / kit.ASSIGNMENT / f"{kit.ASSIGNMENT}.ipynb"),
        str(REPO / "grader" / "reference" / "shapes.py"),
    ]
    folders = [str(course), str(course / "source"), str(course / "submitted"), str(REPO)]
    cell = LAYOUT_CELL.format(secrets=secrets, folders=folders)
    probe = tmp_path / "probe.py"
    probe.write_text(LAYOUT_PROBE.format(course=str(course), cell=cell))
    done = subprocess.run(
        [str(python), "-P", str(probe)], capture_output=True, text=True, timeout=300, cwd="/", env=env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    package = Path(report["grader"]).parent
    if layout == "PYTHONPATH checkout":
        assert package == course / "grader"
    else:
        assert package.parent.name == "site-packages" and package.is_relative_to(python.parent.parent)
    read, listed, imported = json.loads(report["probe"])
    assert len(read) == len(secrets) + 2
    for path, text in read.items():
        assert text in ("", "FileNotFoundError"), f"{layout}: student code read {path}"
    assert imported in ("ModuleNotFoundError", "ImportError"), layout
    for folder, names in listed.items():
        assert names == "FileNotFoundError" or set(names) <= {".venv", "layerlab"}, (
            f"{layout}: {folder}: {names}"
        )


def test_memory_held_by_children_and_files_stays_under_the_one_ceiling(sandbox):
    hog = (
        "import os, time\nkids = 0\nwith open('/tmp/blob', 'wb') as handle:\n"
        "    try:\n        handle.write(b'z' * (100 * 2**20))\n    except OSError:\n        pass\n"
        "for _ in range(5):\n    try:\n        if os.fork() == 0:\n"
        "            block = b'y' * (400 * 2**20)\n            time.sleep(30)\n            os._exit(0)\n"
        "        kids += 1\n    except OSError:\n        break\ntime.sleep(1)\n"
    )
    with sandbox.session() as live:
        live.start()
        assert run(live, hog).ok
        if not sandbox.cgroups():  # no cgroup to count them: no children at all
            assert live.value("kids") == 0
            return
        group = Path(sandbox.cgroups()["memory"]) / f"{os.getpid()}-{sandbox.info['pid']}-{live.slot}"
        peak = int((group / "memory.max_usage_in_bytes").read_text())
    limit = sandbox.limits.memory_mb * 2**20
    assert int((group / "memory.limit_in_bytes").read_text()) == limit
    assert 100 * 2**20 < peak <= limit
