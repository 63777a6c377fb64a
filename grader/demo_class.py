"""The demo's class: who submitted what, as answer-cell sources applied to the released notebooks.

Every demo student starts from either the model solutions or the released stubs and changes a
few answer cells: one student per typical mistake (each should be named by its misconception
code) and one per cheating attempt (each should score nothing for the attacked parts while the
rest of the notebook is graded normally). `write_submissions` lays them out the way nbgrader
collects them: submitted/<student>/<assignment>/<notebook>.ipynb.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from grader.notebook import (
    answer_cell_id,
    cell_text,
    grade_id_of,
    is_mark_scheme,
    load_notebook,
    stub_source,
    without_solution_markers,
)


@dataclass(frozen=True)
class DemoStudent:
    id: str
    does: str  # one line for the instructor
    base: str  # "solutions" or "stubs"
    answers: dict[str, str] = field(default_factory=dict)  # "assignment.part" -> answer cell source
    assignments: tuple[str, ...] = ()  # submitted assignments; () = every assignment
    expect: tuple[str, ...] = ()  # misconception codes the grader should name
    attacked: tuple[str, ...] = ()  # "assignment.part" (or "assignment.*") that must score 0
    kind: str = "mistake"  # "reference" | "mistake" | "cheat"

    def submits(self, assignment_id: str) -> bool:
        return not self.assignments or assignment_id in self.assignments


# --- typical mistakes ---------------------------------------------------------------------------

TRANSPOSED_WEIGHTS = '''\
def linear_forward(X, W, b):
    """Z = X W + b, treating W as (d_in, d_out)."""
    import numpy as np
    return np.asarray(X, dtype=float) @ np.asarray(W, dtype=float) + np.asarray(b, dtype=float)
'''

MISSING_BIAS = '''\
def linear_forward(X, W, b):
    """Z = X @ W.T, forgetting b."""
    import numpy as np
    return np.asarray(X, dtype=float) @ np.asarray(W, dtype=float).T
'''

BIAS_PER_INPUT = '''\
def layer_parameters(d_in, d_out, bias=True):
    """Weights plus one bias per input."""
    return d_in * d_out + (d_in if bias else 0)
'''

BIAS_PER_SHARD = '''\
def row_parallel_forward(X, shards, b):
    """Each rank adds the bias to its own partial product."""
    import numpy as np
    X, b = np.asarray(X, dtype=float), np.asarray(b, dtype=float)
    total, start = 0.0, 0
    for W_i in shards:
        W_i = np.asarray(W_i, dtype=float)
        stop = start + W_i.shape[1]
        total = total + X[:, start:stop] @ W_i.T + b
        start = stop
    return total
'''

GRADIENT_NOT_SUMMED = '''\
def linear_backward(G, X, W):
    """Returns db = G, one row per observation."""
    import numpy as np
    G, X, W = (np.asarray(a, dtype=float) for a in (G, X, W))
    return G @ W, G.T @ X, G.copy()
'''

TIMING_WITH_WARMUP = '''\
def time_op(fn, warmup=3, repeat=10, timer=None, sync=None):
    """Times every call, warm-up included."""
    import statistics
    import time
    timer = timer or time.perf_counter
    durations = []
    for _ in range(warmup + repeat):
        if sync is not None:
            sync()
        start = timer()
        fn()
        if sync is not None:
            sync()
        durations.append(timer() - start)
    return float(statistics.median(durations))
'''

FLOPS_WITHOUT_2 = '''\
def matmul_flops(batch, d_in, d_out):
    """One operation per multiply-add."""
    return batch * d_in * d_out
'''

# --- cheating attempts --------------------------------------------------------------------------

PATCH_ALLCLOSE = '''\
import numpy as np
np.allclose = lambda *args, **kwargs: True
np.testing.assert_allclose = lambda *args, **kwargs: None
np.array_equal = lambda *args, **kwargs: True

def linear_forward(X, W, b):
    return np.zeros((len(X), len(b)))
'''

_FIND = '''\
import glob, os

def _find(relative):
    here = os.path.abspath(os.getcwd())
    candidates = [os.path.join(here, *[".."] * up, relative) for up in range(8)]
    for root in ("/tmp", "/work", os.path.expanduser("~")):
        candidates += glob.glob(os.path.join(root, "*", relative))
        candidates += glob.glob(os.path.join(root, "*", "*", relative))
    return [os.path.abspath(c) for c in candidates if os.path.exists(c)]
'''

STEAL_SOLUTIONS = (
    _FIND
    + '''
import json
for _path in _find("source/01_shapes/01_shapes.ipynb"):
    try:
        _cells = json.load(open(_path))["cells"]
    except Exception:
        continue
    for _cell in _cells:
        if _cell["cell_type"] == "code":
            try:
                exec("".join(_cell["source"]), globals())
            except Exception:
                pass
'''
)

TAMPER_GRADEBOOK = (
    _FIND
    + '''
import sqlite3
for _db in _find("gradebook.db"):
    try:
        with sqlite3.connect(_db, timeout=1) as _connection:
            _connection.execute("UPDATE grade SET manual_score = 100, needs_manual_grade = 0")
            _connection.execute("DELETE FROM comment")
    except Exception:
        pass
    try:
        with open(_db, "r+b") as _handle:
            _handle.write(b"rewritten by a student")
    except Exception:
        pass

def linear_forward(X, W, b):
    raise NotImplementedError("Task 1.4")
'''
)

EXIT_EARLY = '''\
import os

def relu(Z):
    os._exit(0)
'''

INFINITE_LOOP = '''\
def relu(Z):
    while True:
        pass
'''

# Bounded on purpose: even without a process limit this cannot take a machine down.
FORK_BOMB = '''\
import os, time

def relu(Z):
    for _ in range(256):
        if os.fork() == 0:
            time.sleep(20)
            os._exit(0)
    return Z
'''

OUTPUT_FLOOD = '''\
import sys
_line = "all work and no play " * 4000 + "\\n"
for _ in range(13_000):
    sys.stdout.write(_line)

def relu(Z):
    import numpy as np
    return np.maximum(np.asarray(Z, dtype=float), 0.0)
'''

CLASS: tuple[DemoStudent, ...] = (
    DemoStudent("ada", "the model solutions, every assignment", "solutions", kind="reference"),
    DemoStudent(
        "sam",
        "submitted the released stubs unchanged",
        "stubs",
        kind="reference",
        expect=("not-implemented",),
    ),
    DemoStudent(
        "tia",
        "linear_forward with W the wrong way round: X @ W + b",
        "solutions",
        {"01_shapes.linear_forward": TRANSPOSED_WEIGHTS},
        ("01_shapes",),
        ("weight-rows-are-inputs",),
    ),
    DemoStudent(
        "max",
        "linear_forward without the bias",
        "solutions",
        {"01_shapes.linear_forward": MISSING_BIAS},
        ("01_shapes",),
        ("missing-bias",),
    ),
    DemoStudent(
        "bea",
        "one bias per input in the parameter count",
        "solutions",
        {
            "02_parameters.layer_parameters": BIAS_PER_INPUT,
            "02_parameters.params_formula": 'params_formula = "d_in*(d_out + 1)"',
        },
        ("02_parameters",),
        ("bias-per-input",),
    ),
    DemoStudent(
        "wes",
        "width doubling doubles the parameters",
        "solutions",
        {"02_parameters.doubling_ratio": 'doubling_ratio = "2"'},
        ("02_parameters",),
        ("width-doubling-doubles-params",),
    ),
    DemoStudent(
        "gus",
        "bias gradient not summed over the batch",
        "solutions",
        {"03_gradients.linear_backward": GRADIENT_NOT_SUMMED, "03_gradients.grad_b_expr": 'dL_db = "G"'},
        ("03_gradients",),
        ("bias-grad-not-summed",),
    ),
    DemoStudent(
        "rio",
        "adds the bias on every shard of a row-parallel layer",
        "solutions",
        {"04_tensor_parallel.row_parallel_forward": BIAS_PER_SHARD},
        ("04_tensor_parallel",),
        ("bias-added-per-shard",),
    ),
    DemoStudent(
        "kit",
        "times the warm-up calls too",
        "solutions",
        {"05_matmul_benchmark.time_op": TIMING_WITH_WARMUP},
        ("05_matmul_benchmark",),
        ("timing-includes-warmup",),
    ),
    DemoStudent(
        "flo",
        "counts a multiply-add as one FLOP",
        "solutions",
        {
            "05_matmul_benchmark.matmul_flops": FLOPS_WITHOUT_2,
            "05_matmul_benchmark.flops_formula": 'flops_formula = "B*d_in*d_out"',
        },
        ("05_matmul_benchmark",),
        ("flops-missing-factor-2",),
    ),
    DemoStudent(
        "x-allclose",
        "replaces np.allclose by `lambda *a, **k: True` and returns zeros",
        "stubs",
        {"01_shapes.linear_forward": PATCH_ALLCLOSE},
        ("01_shapes",),
        attacked=("01_shapes.linear_forward",),
        kind="cheat",
    ),
    DemoStudent(
        "x-steal",
        "reads the instructor's source notebook and execs it",
        "stubs",
        {"01_shapes.x2_for_zero_output": STEAL_SOLUTIONS},
        ("01_shapes",),
        attacked=("01_shapes.*",),
        kind="cheat",
    ),
    DemoStudent(
        "x-gradebook",
        "rewrites gradebook.db while being graded",
        "stubs",
        {"01_shapes.linear_forward": TAMPER_GRADEBOOK},
        ("01_shapes",),
        attacked=("01_shapes.linear_forward",),
        kind="cheat",
    ),
    DemoStudent(
        "x-exit",
        "calls os._exit(0) inside relu",
        "solutions",
        {"01_shapes.relu": EXIT_EARLY},
        ("01_shapes",),
        attacked=("01_shapes.relu",),
        kind="cheat",
    ),
    DemoStudent(
        "x-loop",
        "relu is an infinite loop",
        "solutions",
        {"01_shapes.relu": INFINITE_LOOP},
        ("01_shapes",),
        attacked=("01_shapes.relu",),
        kind="cheat",
    ),
    DemoStudent(
        "x-fork",
        "relu forks 256 processes",
        "solutions",
        {"01_shapes.relu": FORK_BOMB},
        ("01_shapes",),
        attacked=("01_shapes.relu",),
        kind="cheat",
    ),
    DemoStudent(
        "x-flood",
        "prints a gigabyte of output",
        "solutions",
        {"01_shapes.relu": OUTPUT_FLOOD},
        ("01_shapes",),
        kind="cheat",
    ),
)


# --- building the notebooks ---------------------------------------------------------------------


def _answer_ids(assignment) -> dict[str, str]:
    """grade_id of each part's answer cell -> part id."""
    return {answer_cell_id(part): part.id for part in assignment.parts}


def model_answers(course_dir: Path, assignment) -> dict[str, str]:
    """part id -> the model answer from source/, without the solution markers."""
    path = course_dir / "source" / assignment.id / assignment.notebook
    data = load_notebook(path, "the source notebook", from_student=False)
    ids = _answer_ids(assignment)
    answers = {}
    for cell in data["cells"]:
        grade_id = grade_id_of(cell)
        if grade_id in ids:
            answers[ids[grade_id]] = without_solution_markers(cell_text(cell)).strip("\n") + "\n"
    return answers


def released_notebook(course_dir: Path, assignment) -> dict:
    """The student version: assignments/<id>/<notebook>, else source/ with its solutions cleared."""
    released = course_dir / "assignments" / assignment.id / assignment.notebook
    if released.is_file():
        return load_notebook(released, "the released notebook", from_student=False)
    source = course_dir / "source" / assignment.id / assignment.notebook
    data = load_notebook(source, "the source notebook", from_student=False)
    cells = [
        dict(cell, source=stub_source(cell_text(cell), cell["cell_type"]))
        for cell in data["cells"]
        if not is_mark_scheme(cell)
    ]
    return dict(data, cells=cells)


def notebook_for(course_dir: Path, assignment, student: DemoStudent) -> dict:
    """The notebook `student` hands in for `assignment`."""
    data = released_notebook(course_dir, assignment)
    answers = model_answers(course_dir, assignment) if student.base == "solutions" else {}
    for key, source in student.answers.items():
        assignment_id, _, part_id = key.partition(".")
        if assignment_id == assignment.id:
            answers[part_id] = source
    ids = _answer_ids(assignment)
    for cell in data["cells"]:
        grade_id = grade_id_of(cell)
        if grade_id in ids and ids[grade_id] in answers:
            cell["source"] = answers[ids[grade_id]]
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return data


def write_submissions(
    course,
    course_dir: Path,
    students=CLASS,
    assignment_ids=None,
    timestamp: str = "2026-11-30 09:00:00.000000 UTC",
) -> list[tuple[str, str]]:
    """Write the students' notebooks under submitted/; returns the (student, assignment) pairs.

    assignment_ids: only these assignments (default: all of course.yml).
    """
    written = []
    for student in students:
        for assignment in course.assignments:
            if not student.submits(assignment.id) or (
                assignment_ids is not None and assignment.id not in assignment_ids
            ):
                continue
            folder = course_dir / "submitted" / student.id / assignment.id
            folder.mkdir(parents=True, exist_ok=True)
            notebook = notebook_for(course_dir, assignment, student)
            (folder / assignment.notebook).write_text(json.dumps(notebook, indent=1) + "\n", encoding="utf-8")
            (folder / "timestamp.txt").write_text(timestamp + "\n", encoding="utf-8")
            written.append((student.id, assignment.id))
    return written
