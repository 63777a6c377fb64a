"""`python -m grader demo` runs end to end and names every typical mistake (see test_autograde's fixture)."""

from __future__ import annotations

import test_autograde

from grader import cli
from grader.demo_class import CLASS

demo_run, pytestmark = test_autograde.demo_run, test_autograde.pytestmark  # the shared session fixture


def test_demo_runs_end_to_end(demo_run):
    directory, done = demo_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Gradebook check: ok" in done.stdout
    assert (directory / "gradebook.db").is_file()
    assert "Warning" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]


def test_demo_table_shows_each_students_misconceptions_and_verdict(demo_run):
    _, done = demo_run
    lines = done.stdout.splitlines()
    table = lines[next(i for i, line in enumerate(lines) if line.startswith("student")) :]
    submitted = {path.parent.parent.name for path in (demo_run[0] / "submitted").glob("*/*/*.ipynb")}
    for student in CLASS:
        if student.id not in submitted:
            continue
        row = next(line for line in table if line.startswith(student.id + " "))
        for code in student.expect:
            assert code in row, (student.id, code)
        assert " ok " in row and "!!" not in row, row
    assert "What the students are told" in done.stdout
    assert "The bias b must be added to every output." in done.stdout


def test_demo_refuses_a_folder_that_is_not_empty(tmp_path, capsys):
    (tmp_path / "keep.txt").write_text("x")
    assert cli.main(["demo", "--dir", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
