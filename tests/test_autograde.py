"""autograde with the real sandboxed grader, on the demo class (built once per session).

The demo run is shared with tests/test_demo.py: it grades the demo class into a fresh course
folder; these tests compare its gradebook with `check --json`, read its feedback pages, rerun
it, and kill a second run with SIGKILL halfway to check that a rerun completes it exactly.
"""

from __future__ import annotations

import fcntl
import html
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import gradebook_dump

import grader
from grader.course import load_course
from grader.demo import DEMO_SECRET

REPO = Path(__file__).resolve().parent.parent
GRADER_DIR = str(Path(grader.__file__).resolve().parent)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("demo"),
]


def reference_lines() -> list[str]:
    """Distinctive lines of the reference solutions that must never reach a student."""
    lines = []
    for path in sorted((REPO / "grader" / "reference").glob("*.py")):
        for line in path.read_text().splitlines():
            line = line.strip()
            if line.startswith("return ") and len(line) > 30:
                lines.append(line)
    return lines


def python(*args, env=None, **kwargs):
    environment = dict(os.environ, **(env or {}))
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, env=environment, **kwargs
    )


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """(course dir, completed process) of `python -m grader demo --dir ...`, run once per test run.

    test_demo.py shares this fixture; xdist workers share the one run through a lock file.
    """
    root = tmp_path_factory.getbasetemp()
    shared = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    directory, record = shared / "demo-class" / "course", shared / "demo-class.json"
    with open(shared / "demo-class.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.is_file():
            directory.parent.mkdir(exist_ok=True)
            start = time.monotonic()
            done = python("-m", "grader", "demo", "--dir", str(directory), timeout=300)
            record.write_text(
                json.dumps(
                    {
                        "returncode": done.returncode,
                        "stdout": done.stdout,
                        "stderr": done.stderr,
                        "seconds": time.monotonic() - start,
                    }
                )
            )
    data = json.loads(record.read_text())
    done = subprocess.CompletedProcess(["demo"], data["returncode"], data["stdout"], data["stderr"])
    done.seconds = data["seconds"]
    return directory, done


def db_dump(course_dir: Path, students=None):
    return [row for row in gradebook_dump(course_dir) if students is None or row["student"] in students]


def test_gradebook_matches_check_json_per_part(demo_run):
    directory, done = demo_run
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {(r["student"], r["assignment"]): r for r in db_dump(directory)}
    course = load_course(directory / "course.yml")
    for student in ("max",):
        notebook = directory / "submitted" / student / "01_shapes" / "01_shapes.ipynb"
        checked = python(
            "-m",
            "grader",
            "check",
            str(notebook),
            "--student",
            student,
            "--json",
            "--course",
            str(directory),
            env={course.secret_env: DEMO_SECRET},
            timeout=120,
        )
        assert checked.returncode == 0, checked.stderr
        result = json.loads(checked.stdout)
        assert result["assignment"] == "01_shapes" and result["student"] == student
        grades = {name: (auto, needs) for name, auto, _, _, needs in rows[(student, "01_shapes")]["grades"]}
        comments = {name: text for name, text, _ in rows[(student, "01_shapes")]["comments"]}
        for part in result["parts"]:
            if part["status"] == "manual":
                assert grades[part["id"]] == (None, True)  # left for manual grading
                assert comments[part["id"]] is None or "No response" in comments[part["id"]]
            elif course.assignment("01_shapes").part(part["id"]).kind == "manual":  # left blank
                assert grades[part["id"]] == (0.0, False) and "no answer" in comments[part["id"]]
            else:
                assert grades[part["id"]] == (part["score"], False), part
                assert part["feedback"] in comments[f"answer_{part['id']}"]
                assert all(code in comments[f"answer_{part['id']}"] for code in part["misconceptions"])


def test_feedback_pages_reveal_no_tests_reference_or_paths(demo_run):
    directory, _ = demo_run
    pages = sorted((directory / "feedback").rglob("*.html"))
    assert pages
    forbidden = [
        "assert_part",
        "BEGIN HIDDEN TESTS",
        "grader.inline",
        "mark_scheme",
        GRADER_DIR,
        "site-packages",
        str(directory),
        *reference_lines(),
    ]
    for page in pages:
        text = html.unescape(page.read_text())
        student, assignment = page.parent.parent.name, page.parent.name
        notebook = json.loads(
            (directory / "submitted" / student / assignment / page.name).with_suffix(".ipynb").read_text()
        )
        own = "\n".join("".join(cell["source"]) for cell in notebook["cells"])
        for item in forbidden:
            assert item not in text or item in own, (page.relative_to(directory), item)  # only their own text
    max_page = (directory / "feedback" / "max" / "01_shapes" / "01_shapes.html").read_text()
    assert "missing-bias" in max_page and "np.asarray(W, dtype=float).T" in max_page


def test_rerun_grades_nothing_and_changes_nothing(demo_run):
    directory, _ = demo_run
    before = db_dump(directory)
    again = python(
        "-m",
        "grader",
        "autograde",
        "--course",
        str(directory),
        env={"LAYERS_GRADER_SECRET": DEMO_SECRET},
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert "already graded" in again.stderr and "unchanged" in again.stdout
    assert db_dump(directory) == before


def test_sigkill_halfway_then_rerun_loses_and_duplicates_nothing(demo_run, tmp_path):
    directory, _ = demo_run
    students = [
        "ada",
        "max",
        "sam",
        "tia",
        "x-allclose",
        "x-loop",
    ]  # x-loop runs into its 5 s limit: time to kill
    copy = tmp_path / "course"
    copy.mkdir()
    for name in ("course.yml", "source", "assignments"):
        source = directory / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, copy / name)
    for student in students:
        shutil.copytree(
            directory / "submitted" / student / "01_shapes", copy / "submitted" / student / "01_shapes"
        )
    malformed = {
        "zed": (b'{"cells": [ this is not json', "invalid JSON"),  # a recorded zero with the reason
        "yan": (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", "not UTF-8"),
        "wex": (b"[" * 100_000 + b"]" * 100_000, "invalid JSON"),
        "xia": (
            (directory / "submitted" / "ada" / "02_parameters" / "02_parameters.ipynb").read_bytes(),
            "none of the answer cells of assignment 01_shapes",
        ),
    }
    for student, (content, _) in malformed.items():
        broken = copy / "submitted" / student / "01_shapes" / "01_shapes.ipynb"
        broken.parent.mkdir(parents=True)
        broken.write_bytes(content)
    total = len(students) + len(malformed)
    env = dict(os.environ, LAYERS_GRADER_SECRET=DEMO_SECRET)
    process = subprocess.Popen(
        [sys.executable, "-m", "grader", "autograde", "--course", str(copy), "--workers", "1"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while len(list(copy.glob("autograded/*/*/results.json"))) < 2 and process.poll() is None:
        assert time.monotonic() < deadline, "autograde made no progress"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    graded_before = len(list(copy.glob("autograded/*/*/results.json")))
    assert 2 <= graded_before < total, "the kill came too late to test anything"
    rerun = python(
        "-m",
        "grader",
        "autograde",
        "--course",
        str(copy),
        env={"LAYERS_GRADER_SECRET": DEMO_SECRET},
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stderr
    summary = rerun.stdout.splitlines()[-1]
    assert summary == f"{total - graded_before} graded, {graded_before} unchanged since the last run."
    expected = [row for row in db_dump(directory, students) if row["assignment"] == "01_shapes"]
    assert db_dump(copy, students) == expected
    for student, (_, reason) in malformed.items():
        row = db_dump(copy, [student])[0]
        assert all(auto in (0.0, None) for _, auto, *_ in row["grades"]), student
        assert all("could not be graded" in text and reason in text for _, text, _ in row["comments"]), (
            student
        )


def test_check_refuses_a_deeply_nested_file_in_one_line(tmp_path):
    path = tmp_path / "deep.ipynb"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    checked = python("-m", "grader", "check", str(path), timeout=60)
    assert checked.returncode == 2 and checked.stdout == ""
    assert checked.stderr.startswith("check: ") and "invalid JSON" in checked.stderr
    assert checked.stderr.count("\n") == 1


def test_check_of_another_assignments_notebook_says_so(demo_run):
    directory, _ = demo_run
    notebook = directory / "submitted" / "ada" / "02_parameters" / "02_parameters.ipynb"
    checked = python(
        "-m",
        "grader",
        "check",
        str(notebook),
        "--assignment",
        "01_shapes",
        "--course",
        str(directory),
        env={"LAYERS_GRADER_SECRET": ""},
        timeout=120,
    )
    assert checked.returncode == 1
    assert "none of the answer cells of assignment 01_shapes" in checked.stderr
    assert "public self-check inputs" in checked.stdout
