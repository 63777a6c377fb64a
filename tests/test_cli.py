"""The instructor commands' command line: exit codes and one-line messages for unusable input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader import cli
from grader.course import CourseError, load_course
from grader.demo import prepare
from grader.selfcheck import Unusable, detect_assignment
from test_gradebook import notebook_for, write_json

REPO = Path(__file__).resolve().parent.parent


def run_cli(capsys, *argv):
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "absent.ipynb", "file not found"),
        (lambda d: d, "is not a file"),
        (
            lambda d: (d / "notes.ipynb").write_text("these are my notes") and d / "notes.ipynb",
            "is not a notebook",
        ),
        (lambda d: (d / "list.ipynb").write_text("[1, 2]") and d / "list.ipynb", "no list of cells"),
        (lambda d: (d / "bin.ipynb").write_bytes(b"\xff\xfe\x00") and d / "bin.ipynb", "not UTF-8"),
        (
            lambda d: write_json(d / "mystery.ipynb", {"cells": [], "nbformat": 4}),
            "cannot tell which assignment",
        ),
    ],
)
def test_check_refuses_unusable_input_with_one_line(tmp_path, capsys, make, message):
    code, out, err = run_cli(capsys, "check", str(make(tmp_path)))
    assert code == 2 and out == ""
    assert message in err and err.startswith("check: ") and err.count("\n") == 1


def test_check_refuses_unknown_assignment(tmp_path, capsys):
    path = write_json(tmp_path / "01_shapes.ipynb", notebook_for(load_course().assignment("01_shapes")))
    code, _, err = run_cli(capsys, "check", str(path), "--assignment", "09_nope")
    assert code == 2 and "unknown assignment '09_nope'" in err and "01_shapes" in err


def test_assignment_is_detected_from_answer_cells_then_file_name(tmp_path):
    course = load_course()
    renamed = write_json(tmp_path / "my_homework.ipynb", notebook_for(course.assignment("03_gradients")))
    assert detect_assignment(course, renamed) == "03_gradients"
    plain = write_json(tmp_path / "04_tensor_parallel.ipynb", {"cells": [], "nbformat": 4})
    assert detect_assignment(course, plain) == "04_tensor_parallel"
    with pytest.raises(Unusable, match="pass --assignment"):
        detect_assignment(course, write_json(tmp_path / "x.ipynb", {"cells": [{"cell_type": "code"}]}))


def test_export_without_gradebook_and_autograde_without_submissions(tmp_path, capsys):
    (tmp_path / "course.yml").write_text((REPO / "course.yml").read_text())
    code, _, err = run_cli(capsys, "export", "--csv", str(tmp_path / "g.csv"), "--course", str(tmp_path))
    assert code == 2 and "no gradebook" in err
    code, _, err = run_cli(capsys, "autograde", "--course", str(tmp_path))
    assert code == 2 and "no submitted/ folder" in err
    code, _, err = run_cli(capsys, "autograde", "--course", str(tmp_path / "nowhere"))
    assert code == 2 and "has no course.yml" in err


HEAVY = ("torch", "nbgrader", "nbconvert", "sqlalchemy", "sympy", "numpy", "distributed")


def loaded_after(code: str) -> list[str]:
    """The heavy packages a fresh interpreter has loaded after running `code`."""
    script = f"import sys\n{code}\nprint([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.replace("'", '"'))


def test_help_imports_no_command():
    code = (
        "import contextlib, io, grader.cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    grader.cli.main(['--help'])\n"
        "assert not [m for m in sys.modules if m in ('grader.autograde', 'grader.build', 'grader.demo')]"
    )
    assert loaded_after(code) == []


@pytest.mark.parametrize("module", ["grader.autograde", "grader.export", "grader.selfcheck", "grader.demo"])
def test_commands_load_no_database_notebook_or_cluster_library_at_import(module):
    assert set(loaded_after(f"import {module}")) <= {"numpy"}  # numpy: the checks' arrays


def test_module_entry_point_exit_code(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "grader", "check", str(tmp_path / "gone.ipynb")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "file not found" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    "text, message",
    [
        ("course_id: [\n", "not valid YAML: line 2, column 1"),
        ("course_id: layers\n", "secret_env: missing required field"),
        ("- just\n- a list\n", "expected a mapping"),
    ],
)
@pytest.mark.parametrize("command", [["check", "nb.ipynb"], ["autograde"], ["export", "--csv", "-"]])
def test_malformed_course_yml_is_a_clear_error_for_every_command(tmp_path, capsys, command, text, message):
    (tmp_path / "course.yml").write_text(text)
    write_json(tmp_path / "nb.ipynb", {"cells": [], "nbformat": 4})
    argv = [arg.replace("nb.ipynb", str(tmp_path / "nb.ipynb")) for arg in command]
    code, out, err = run_cli(capsys, *argv, "--course", str(tmp_path))
    assert code == 2 and out == ""
    assert err.startswith(f"{command[0]}: course.yml") and message in err and err.count("\n") == 1, err


def test_demo_refuses_a_malformed_course_yml_before_copying(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "course.yml").write_text("course_id: layers\nlimits: 3\n")
    with pytest.raises(CourseError, match="course.yml"):
        prepare(tmp_path / "demo", tmp_path / "repo")
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize("command", ["autograde", "demo", "serve"])
@pytest.mark.parametrize(
    "value, message",
    [
        ("0", "must be at least 1, got 0"),
        ("-3", "must be at least 1, got -3"),
        ("x", "expected a whole number"),
    ],
)
def test_every_grading_command_refuses_a_bad_worker_count_in_one_line(capsys, command, value, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--workers", value])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"argument --workers: {message}" in err
    assert "Traceback" not in err
