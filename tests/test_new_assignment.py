"""Adding an assignment takes a course.yml entry, a source notebook, a reference module and a checks
module, found by convention: a toy sixth assignment in a copy of the course is built and graded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SECRET = "toy-course-secret"
pytestmark = pytest.mark.slow

REFERENCE = '''"""Reference of the toy assignment."""


def double(x: float) -> float:
    """2 * x, as a float."""
    return 2.0 * float(x)
'''
CHECKS = '''"""Checks of the toy assignment."""

from grader.checks.base import WrongAnswer, check
from grader.checks.common import call_student, same
from grader.reference import toy as ref


@check("06_toy", "double")
def check_double(answer, ctx):
    x = float(ctx.rng.integers(1, 100))
    got = call_student(answer, (x,), ("x",))
    if not same(got, ref.double(x)):
        raise WrongAnswer(f"double({x:g}) should be {ref.double(x):g}, not {got!r}.")
    return ctx.passed()
'''
ENTRY = """
  - id: 06_toy
    title: "A toy assignment"
    notebook: 06_toy.ipynb
    parts:
      - {id: double, kind: function, points: 2}
"""
ANSWERS = {
    "good": "def double(x):\n    return 2 * x\n",
    "bad": "def double(x):\n    return x + 2\n",
}


def cell(index: int, cell_type: str, source: str, **nbgrader) -> dict:
    data = {"cell_type": cell_type, "id": f"toy-{index}", "metadata": {}, "source": source}
    if nbgrader:
        data["metadata"]["nbgrader"] = {"schema_version": 3, **nbgrader}
    if cell_type == "code":
        data.update(outputs=[], execution_count=None)
    return data


def source_notebook() -> dict:
    tests = (
        "### BEGIN HIDDEN TESTS\nfrom grader.inline import assert_part\n"
        'assert_part("06_toy.double", double)\n### END HIDDEN TESTS\n'
        "assert double(3) == 6"
    )
    answer = "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"
    return {
        "cells": [
            cell(0, "markdown", "# A toy assignment\n\n<!-- BEGIN PARTS TABLE -->\n<!-- END PARTS TABLE -->"),
            cell(1, "code", answer, grade_id="answer_double", solution=True, grade=False, locked=False),
            cell(2, "code", tests, grade_id="double", solution=False, grade=True, locked=True, points=2),
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def python(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(course), LAYERS_GRADER_SECRET=SECRET)
    return subprocess.run(
        [sys.executable, "-m", "grader", *args],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def toy_course(tmp_path_factory) -> Path:
    """A copy of the repository's course and grader with a sixth assignment added by convention."""
    course = tmp_path_factory.mktemp("toy") / "course"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("grader", "layerlab", "source"):
        shutil.copytree(REPO / name, course / name, ignore=ignore)
    for name in ("course.yml", "nbgrader_config.py"):
        shutil.copy(REPO / name, course / name)
    (course / "grader" / "reference" / "toy.py").write_text(REFERENCE)
    (course / "grader" / "checks" / "toy.py").write_text(CHECKS)
    with open(course / "course.yml", "a") as handle:
        handle.write(ENTRY)
    notebook = course / "source" / "06_toy" / "06_toy.ipynb"
    notebook.parent.mkdir(parents=True)
    notebook.write_text(json.dumps(source_notebook(), indent=1))
    return course


def test_a_sixth_assignment_builds_and_grades_end_to_end(toy_course):
    built = python(toy_course, "build", "06_toy", "--root", str(toy_course))
    assert built.returncode == 0, built.stdout + built.stderr
    released = json.loads((toy_course / "assignments" / "06_toy" / "06_toy.ipynb").read_text())
    stub = next(
        c for c in released["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer_double"
    )
    assert "return 2 * x" not in "".join(stub["source"])
    for student, answer in [*ANSWERS.items(), ("stub", None)]:
        notebook = json.loads(json.dumps(released))
        for each in notebook["cells"]:
            if answer is not None and each["metadata"].get("nbgrader", {}).get("grade_id") == "answer_double":
                each["source"] = answer
        folder = toy_course / "submitted" / student / "06_toy"
        folder.mkdir(parents=True)
        (folder / "06_toy.ipynb").write_text(json.dumps(notebook))
    graded = python(toy_course, "autograde", "--course", str(toy_course))
    assert graded.returncode == 0, graded.stdout + graded.stderr
    results = {
        student: json.loads((toy_course / "autograded" / student / "06_toy" / "results.json").read_text())
        for student in ("good", "bad", "stub")
    }
    assert [results[s]["score"] for s in ("good", "bad", "stub")] == [2, 0, 0]
    assert "should be" in results["bad"]["parts"][0]["feedback"]
    assert results["stub"]["parts"][0]["misconceptions"] == ["not-implemented"]
    assert "2/2" in graded.stdout and "3 graded" in graded.stdout
