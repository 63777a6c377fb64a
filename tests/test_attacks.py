"""Hostile submissions: each gets no credit it did not earn, with a recorded reason, while the
honest parts of the same notebook still score and nothing outlives the student's process."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from attacks import kit
from attacks.snippets import ATTACKS
from grader.sandbox import Sandbox
from grader.submission import grade_submission

pytestmark = [pytest.mark.xdist_group("sandbox"), pytest.mark.slow]

REPO = Path(__file__).resolve().parent.parent
TEST_USER = "layerstest"  # created by .ci/run
AS_USER_SUITES = ("tests/test_sandbox.py", "tests/test_attacks.py")
LOOPING = (
    "import subprocess, time\ntry:\n    subprocess.Popen(['sleep', '300.8812'])\nexcept OSError:\n"
    "    pass\nwhile True:\n    time.sleep(0.05)\n"
)
GRADEBOOK_TEXT = "the real gradebook"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = kit.make_course(tmp_path_factory.mktemp("attack-course") / "course")
    (course.root / "gradebook.db").write_text(GRADEBOOK_TEXT)
    return course


@pytest.fixture(scope="module")
def sandbox(course):
    with Sandbox(course.limits) as box:
        yield box


@pytest.fixture(scope="module")
def other_student(course, tmp_path_factory):
    return kit.write_submission(tmp_path_factory.mktemp("submitted") / "carol" / "nb.ipynb")


def grade(course, sandbox, path, student="mallory"):
    return grade_submission(course, kit.ASSIGNMENT, path, student, "attack-secret", sandbox)


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack.name for attack in ATTACKS])
def test_attack_earns_nothing_and_costs_only_its_own_parts(
    attack, course, sandbox, other_student, tmp_path, monkeypatch
):
    monkeypatch.setenv("SANDBOX_TEST_SECRET", "attack-secret")
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    sources = attack.sources(course=course.root, repo=REPO, grader_pid=os.getpid(), other=other_student)
    path = kit.write_submission(tmp_path / "mallory" / "nb.ipynb", sources)
    result = grade(course, sandbox, path)
    assert result.error is None
    for part in result.parts:
        if part.id in attack.zero:
            assert part.score == 0, f"{attack.name}: {part.id} earned {part.score}: {part.feedback}"
            assert part.feedback.strip()
            assert attack.reason in part.feedback, part.feedback
        else:
            assert part.score == kit.FULL_MARKS[part.id], (
                f"{attack.name}: honest {part.id} lost marks: {part.feedback}"
            )
    for text in attack.hidden:
        assert text not in result.output
    for text in attack.seen:
        assert text in result.output
    assert len(result.output.encode()) <= course.limits.output_kb * 1024 + 200
    assert kit.descendants(sandbox._process.pid) == []
    assert (course.root / "gradebook.db").read_text() == GRADEBOOK_TEXT
    assert (course.root / "course.yml").read_text() == kit.COURSE_YML


def test_files_left_by_one_student_do_not_reach_the_next(course, sandbox, tmp_path):
    planter = """
import os
for path in ["/tmp/answers.py", "/var/tmp/answers.py", "/dev/shm/answers.py",
             os.path.expanduser("~/answers.py"), "answers.py", "$course/answers.py"]:
    try:
        open(path, "w").write("magic = 42")
    except OSError:
        pass
magic = 0
"""
    reader = """
import os
magic = 0
for path in ["/tmp/answers.py", "/var/tmp/answers.py", "/dev/shm/answers.py",
             os.path.expanduser("~/answers.py"), "answers.py", "$course/answers.py"]:
    if os.path.exists(path):
        exec(open(path).read())
        print("FOUND", path)
"""
    from string import Template

    first = kit.write_submission(
        tmp_path / "alice" / "nb.ipynb", {"answer_magic": Template(planter).substitute(course=course.root)}
    )
    second = kit.write_submission(
        tmp_path / "bob" / "nb.ipynb", {"answer_magic": Template(reader).substitute(course=course.root)}
    )
    assert kit.scores(grade(course, sandbox, first, "alice"))["magic"] == 0
    result = grade(course, sandbox, second, "bob")
    assert kit.scores(result)["magic"] == 0 and "FOUND" not in result.output
    assert not (course.root / "answers.py").exists()


def test_tampered_test_cells_and_extra_cells_are_ignored(course, sandbox, tmp_path):
    cells = kit.submission_cells({"answer_double": "def double(x):\n    return x\n"})
    for cell in cells:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id == "double":
            cell["source"] = "def double(x):\n    return 2 * x\n"
    cells.append(kit.code("def double(x):\n    return 2 * x\n"))
    cells.append(kit.code("def double(x):\n    return 2 * x\n", {"grade_id": "extra", "solution": True}))
    result = grade(course, sandbox, kit.write_submission(tmp_path / "nb.ipynb", cells=cells))
    assert kit.scores(result)["double"] == 0
    assert kit.scores(result)["square"] == 1


def test_a_submission_renaming_cells_cannot_borrow_the_source_solution(course, sandbox, tmp_path):
    cells = [
        cell
        for cell in kit.submission_cells()
        if cell["metadata"].get("nbgrader", {}).get("grade_id") != "answer_double"
    ]
    result = grade(course, sandbox, kit.write_submission(tmp_path / "nb.ipynb", cells=cells))
    assert kit.scores(result)["double"] == 0 and "no answer cell" in kit.part(result, "double").feedback
    assert kit.SOLUTION_MARKER not in result.output


def test_kill_9_of_autograde_leaves_no_student_process(tmp_path):
    course = kit.make_course(tmp_path / "course")
    for student in ("ann", "bob", "cat"):
        notebook = course.root / "submitted" / student / kit.ASSIGNMENT / f"{kit.ASSIGNMENT}.ipynb"
        kit.write_submission(notebook, {"answer_double": LOOPING})
    process = subprocess.Popen(
        [sys.executable, "-m", "grader", "autograde", "--course", str(course.root), "--workers", "2"],
        cwd=REPO,
        env=dict(os.environ, SANDBOX_TEST_SECRET="kill-test"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        tree = []
        while len(tree) < 5 and time.monotonic() < deadline:  # zygote, two keepers, two students
            assert process.poll() is None, "autograde ended before its students ran"
            time.sleep(0.05)
            tree = kit.descendants(process.pid)
        assert len(tree) >= 5, f"autograde started too few processes: {tree}"
        tree = kit.descendants(process.pid)
        process.kill()
        process.wait(timeout=30)
        assert kit.wait_for_none(tree) == []
        assert kit.processes_with("300.8812") == []
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)


def _as_user(checkout: Path, args: list[str]) -> list[str]:
    """A command running this venv's Python with `args` as the test user, on a view of this checkout
    at `checkout`: a bind mount in a private mount namespace, so that a checkout under a folder the
    user cannot enter (such as /root) is reachable without changing its permissions."""
    python = Path(sys.executable)
    if python.is_relative_to(REPO):
        python = checkout / python.relative_to(REPO)
    environment = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(checkout),
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLCONFIGDIR": str(checkout.parent / "mpl"),
    }
    user = ["runuser", "-u", TEST_USER, "--", "env", "-i", *(f"{k}={v}" for k, v in environment.items())]
    script = 'mount --bind "$1" "$0" && shift && cd "$0" && exec "$@"'
    view = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script]
    return [*view, str(checkout), str(REPO), *user, str(python), *args]


def test_sandbox_and_attack_suites_pass_as_an_ordinary_user(tmp_path):
    if os.geteuid() != 0:  # this run is the ordinary user's: the walls must be the namespace ones
        with Sandbox() as box:
            assert box.namespaces and any("an unprivileged user" in line for line in box.describe())
        return
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        pytest.fail(f"no user {TEST_USER!r} to run the suites as (.ci/run creates it: useradd {TEST_USER})")
    if Path(sys.executable).resolve().is_relative_to("/root"):
        pytest.fail(
            f"the venv's Python {Path(sys.executable).resolve()} is private to root: rebuild the venv"
        )
    home = Path(tempfile.mkdtemp(prefix="layers-as-user-"))
    try:
        checkout = home / "checkout"
        checkout.mkdir()
        home.chmod(0o755)
        shutil.chown(home, TEST_USER)
        suites = [*AS_USER_SUITES, "-q", "-x", "-p", "no:xdist", "-p", "no:cacheprovider"]
        options = ["-k", "not ordinary_user", "--basetemp", str(home / "pytest")]
        done = subprocess.run(
            _as_user(checkout, ["-m", "pytest", *suites, *options]),
            capture_output=True,
            text=True,
            timeout=1500,
        )
    finally:
        if not os.path.ismount(checkout):  # the view lives only in the command's own namespace
            shutil.rmtree(home, ignore_errors=True)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "skipped" not in summary, summary


def _verdict_table(stdout: str) -> list[str]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("student "))
    end = next(i for i in range(start, len(lines)) if not lines[i].strip())
    return lines[start:end]


def test_demo_as_an_ordinary_user_gives_the_root_verdict_table(tmp_path):
    demo = ["-m", "grader", "demo", "--dir"]
    if os.geteuid() != 0:
        done = subprocess.run([sys.executable, *demo, str(tmp_path / "demo")], capture_output=True, text=True)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
        assert all(" ok " in line for line in _verdict_table(done.stdout)[2:])
        return
    as_root = subprocess.run(
        [sys.executable, *demo, str(tmp_path / "demo")], capture_output=True, text=True, cwd=REPO, timeout=900
    )
    assert as_root.returncode == 0, as_root.stderr[-3000:]
    home = Path(tempfile.mkdtemp(prefix="layers-demo-as-user-"))
    checkout = home / "checkout"
    try:
        checkout.mkdir()
        home.chmod(0o755)
        shutil.chown(home, TEST_USER)
        as_user = subprocess.run(
            _as_user(checkout, [*demo, str(home / "demo")]), capture_output=True, text=True, timeout=900
        )
    finally:
        if not os.path.ismount(checkout):
            shutil.rmtree(home, ignore_errors=True)
    assert as_user.returncode == 0 and "Traceback" not in as_user.stderr, as_user.stderr[-3000:]
    table = _verdict_table(as_root.stdout)
    assert len(table) > 10 and all(" ok " in line for line in table[2:])
    assert _verdict_table(as_user.stdout) == table
