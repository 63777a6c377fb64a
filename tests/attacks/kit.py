"""A self-contained test course ("97_sandbox"): course.yml, a source notebook, its checks, and a
builder for submitted notebooks. Used by tests/test_sandbox.py and tests/test_attacks.py."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from grader.checks.base import CHECKS, WrongAnswer, check
from grader.checks.values import as_array, as_int, as_text, close
from grader.course import load_course

ASSIGNMENT = "97_sandbox"
SOLUTION_MARKER = "SOLUTION-MARKER-5517"
TEST_CELL_MARKER = "TEST-CELL-RAN-8812"
ILLUSTRATION_MARKER = "ILLUSTRATION-RAN-3391"

COURSE_YML = f"""
course_id: sandbox-test
title: Sandbox test course
secret_env: SANDBOX_TEST_SECRET
limits:
  part_timeout_s: 3
  notebook_timeout_s: 60
  memory_mb: 1024
  output_kb: 16
  workers: 2
assignments:
  - id: {ASSIGNMENT}
    title: Sandbox
    notebook: {ASSIGNMENT}.ipynb
    parts:
      - {{id: double, kind: function, points: 2}}
      - {{id: magic, kind: value, points: 1}}
      - {{id: explain, kind: manual, points: 1}}
      - {{id: square, kind: function, points: 1}}
      - {{id: formula, kind: symbolic, points: 1}}
"""

HONEST = {
    "answer_double": "def double(x):\n    return SCALE * x\n",
    "answer_magic": "magic = 42\n",
    "explain": "Because the slope of ReLU is zero for negative inputs.",
    "answer_square": "def square(x):\n    return x ** 2\n",
    "answer_formula": 'formula = "W.T"\n',
}
FULL_MARKS = {"double": 2.0, "magic": 1.0, "explain": 0.0, "square": 1.0, "formula": 1.0}


def _nbgrader(grade_id, *, solution=False, grade=False, locked=False, points=None):
    meta = {"grade_id": grade_id, "solution": solution, "grade": grade, "locked": locked, "schema_version": 3}
    if points is not None:
        meta["points"] = points
    return meta


def code(source, nbgrader=None, tags=()):
    metadata = {}
    if nbgrader:
        metadata["nbgrader"] = nbgrader
    if tags:
        metadata["tags"] = list(tags)
    return {
        "cell_type": "code",
        "execution_count": None,
        "metadata": metadata,
        "outputs": [],
        "source": source,
    }


def markdown(source, nbgrader=None, tags=()):
    cell = code(source, nbgrader, tags)
    for key in ("execution_count", "outputs"):
        cell.pop(key)
    cell["cell_type"] = "markdown"
    return cell


def answer(grade_id, source):
    return code(source, _nbgrader(grade_id, solution=True))


def test_cell(part, points):
    return code(
        f"assert {part} is not None\nprint({TEST_CELL_MARKER!r})\n"
        "### BEGIN HIDDEN TESTS\nimport os\nos._exit(9)\n### END HIDDEN TESTS\n",
        _nbgrader(part, grade=True, locked=True, points=points),
    )


def source_cells():
    return [
        markdown("# Sandbox test assignment"),
        code("import numpy as np\nSCALE = 2.0\n", _nbgrader("setup", locked=True)),
        answer(
            "answer_double",
            f"def double(x):\n    ### BEGIN SOLUTION\n    # {SOLUTION_MARKER}\n"
            "    return SCALE * x\n    ### END SOLUTION\n",
        ),
        test_cell("double", 2),
        code(f"print({ILLUSTRATION_MARKER!r})\nSCALE = 1000.0\n", tags=["illustration"]),
        answer("answer_magic", "### BEGIN SOLUTION\nmagic = 42\n### END SOLUTION\n"),
        test_cell("magic", 1),
        markdown("Why?\n"),
        markdown(
            "### BEGIN SOLUTION\nA model answer.\n### END SOLUTION\n",
            _nbgrader("explain", solution=True, grade=True, points=1),
        ),
        markdown(
            "- 1 point: slope zero", _nbgrader("explain_mark_scheme", locked=True), tags=["mark-scheme"]
        ),
        answer(
            "answer_square",
            "def square(x):\n    ### BEGIN SOLUTION\n    return x ** 2\n    ### END SOLUTION\n",
        ),
        test_cell("square", 1),
        answer("answer_formula", '### BEGIN SOLUTION\nformula = "W.T"\n### END SOLUTION\n'),
        test_cell("formula", 1),
    ]


def notebook_json(cells) -> str:
    return json.dumps(
        {
            "cells": cells,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4,
            "nbformat_minor": 5,
        },
        indent=1,
    )


def make_course(root: Path):
    """Write the test course under `root`; returns the loaded Course."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "course.yml").write_text(COURSE_YML)
    source = root / "source" / ASSIGNMENT
    source.mkdir(parents=True, exist_ok=True)
    (source / f"{ASSIGNMENT}.ipynb").write_text(notebook_json(source_cells()))
    return load_course(root / "course.yml")


def submission_cells(overrides: dict | None = None, drop=(), extra=()):
    """The released notebook filled in honestly, with some answers replaced, dropped or added."""
    answers = {**HONEST, **(overrides or {})}
    cells = []
    for cell in source_cells():
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in drop:
            continue
        if grade_id in answers and cell["metadata"]["nbgrader"].get("solution"):
            cell = dict(cell, source=answers[grade_id])
        cells.append(cell)
    return cells + list(extra)


def write_submission(path: Path, overrides: dict | None = None, drop=(), extra=(), cells=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(notebook_json(cells if cells is not None else submission_cells(overrides, drop, extra)))
    return path


def scores(result) -> dict[str, float]:
    return {part.id: part.score for part in result.parts}


def part(result, part_id):
    return next(p for p in result.parts if p.id == part_id)


# ----------------------------------------------------------------------------- checks


def _random_input(ctx):
    rows, cols = (int(v) for v in ctx.rng.choice([1, 7, 73], size=2))
    return ctx.rng.normal(size=(rows, cols))


def _elementwise(answer, ctx, name, expected_of):
    for _ in range(3):
        x = _random_input(ctx)
        got = as_array(answer(x), f"{name}(x)", shape=x.shape)
        if answer.last_mutated:
            raise WrongAnswer(f"{name} changed its input array")
        if not close(got, expected_of(x)):
            raise WrongAnswer(f"{name}(x) returned wrong values for x of shape {x.shape}")
    return ctx.passed()


if f"{ASSIGNMENT}.double" not in CHECKS:

    @check(ASSIGNMENT, "double")
    def check_double(answer, ctx):
        return _elementwise(answer, ctx, "double", lambda x: 2.0 * x)

    @check(ASSIGNMENT, "square")
    def check_square(answer, ctx):
        return _elementwise(answer, ctx, "square", np.square)

    @check(ASSIGNMENT, "magic")
    def check_magic(answer, ctx):
        if as_int(answer, "magic") != 42:
            raise WrongAnswer("magic should be the answer to everything")
        return ctx.passed()

    @check(ASSIGNMENT, "formula")
    def check_formula(answer, ctx):
        if as_text(answer, "formula").replace(" ", "") != "W.T":
            raise WrongAnswer("formula should be the transpose of W")
        return ctx.passed()


# ----------------------------------------------------------------------------- processes


def _proc_entries():
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def processes_with(marker: str) -> list[int]:
    """Live processes whose command line holds `marker` (zombies have none)."""
    found = []
    for pid in _proc_entries():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.append(pid)
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    """Every live (not zombie) process below `pid`, found through /proc's parent links."""
    children: dict[int, list[int]] = {}
    for child in _proc_entries():
        try:
            with open(f"/proc/{child}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] not in "ZX":
            children.setdefault(int(fields[1]), []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return sorted(found)


def alive(pids) -> list[int]:
    """Those of `pids` still running (not zombies)."""
    running = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] not in "ZX":
                    running.append(pid)
        except OSError:
            continue
    return running


def wait_for_none(pids, timeout: float = 20.0) -> list[int]:
    """Wait until none of `pids` runs (processes of a killed tree take a moment to exit)."""
    end = time.monotonic() + timeout
    while alive(pids) and time.monotonic() < end:
        time.sleep(0.05)
    return alive(pids)
