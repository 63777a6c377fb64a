"""What the notebooks show students: no graded formula in a release, and public tests that are honest.

- Every release (assignments/) is scanned for every symbolic part's accepted answers, in any
  equivalent written form (LaTeX, code or prose, parsed and compared with sympy): none may appear.
- `WRONG_ANSWERS` lists, per part, the wrong answers students typically write (most come from the
  misconception table). Each must fail that part's public test *and* score below full marks with
  the grader, so that a public test never waves through what grading rejects.
- `ALTERNATIVES` are right answers written another way: they pass both.

The public tests run here in-process, in the namespace the source notebook's setup and solution
cells build (figures are skipped).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from answer_scan import leaks
from grader.checks.formulas import SYMBOLIC_PARTS
from grader.course import load_course
from grader.grading import grade_part
from grader.student import LocalFunction, local_value

ROOT = Path(__file__).resolve().parents[1]
COURSE = load_course(ROOT / "course.yml")
HIDDEN_END = "### END HIDDEN TESTS"

WRONG_ANSWERS: dict[str, list[str]] = {
    "01_shapes.layer_shapes": [
        "def layer_shapes(d_in, d_out, batch=None):\n    lead = () if batch is None else (batch,)\n"
        "    return {'x': lead + (d_in,), 'W': (d_in, d_out), 'b': (d_out,), 'z': lead + (d_out,)}",
        "def layer_shapes(d_in, d_out, batch=None):\n    lead = () if batch is None else (batch,)\n"
        "    return {'x': lead + (d_in,), 'W': (d_out, d_in), 'b': (d_in,), 'z': lead + (d_out,)}",
        "def layer_shapes(d_in, d_out, batch=None):\n    lead = () if batch is None else (batch,)\n"
        "    return {'x': lead + (d_in,), 'W': lead + (d_out, d_in), 'b': (d_out,), 'z': lead + (d_out,)}",
    ],
    "01_shapes.z2_by_hand": [f"z2_by_hand = {value}" for value in (2.5, -0.75, 0.25, 3.5, 2.0, -1.5)],
    "01_shapes.linear_forward": [
        "def linear_forward(X, W, b):\n    return np.asarray(X) @ np.asarray(W) + b",
        "def linear_forward(X, W, b):\n    return np.asarray(X) @ np.asarray(W).T",
        "def linear_forward(X, W, b):\n    return np.asarray(X) @ np.asarray(W).T + np.asarray(b).sum()",
    ],
    "01_shapes.relu": [
        "def relu(Z):\n    Z[Z < 0] = 0\n    return Z",
        "def relu(Z):\n    return np.abs(Z)",
        "def relu(Z):\n    return np.maximum(Z, 0.0) + (Z == 0) * 1.0",
    ],
    "01_shapes.to_torch_linear": [
        "def to_torch_linear(W, b):\n"
        "    return nn.Linear(np.shape(W)[1], np.shape(W)[0], dtype=torch.float64)",
        "def to_torch_linear(W, b):\n"
        "    layer = nn.Linear(np.shape(W)[1], np.shape(W)[0], dtype=torch.float64)\n"
        "    with torch.no_grad():\n        layer.weight.copy_(torch.tensor(W))\n        layer.bias.zero_()\n"
        "    return layer",
    ],
    "01_shapes.find_mismatch": [
        "def find_mismatch(input_shape, in_features):\n"
        "    return None if input_shape[-1] == in_features else (0, input_shape[0], in_features)",
        "def find_mismatch(input_shape, in_features):\n"
        "    return None if input_shape[-1] == in_features else (1, in_features, input_shape[-1])",
    ],
    "01_shapes.collapse_affine": [
        "def collapse_affine(W1, b1, W2, b2):\n    return W2 @ W1, b2",
        "def collapse_affine(W1, b1, W2, b2):\n    return W2 @ W1, b1.sum() + b2",
        "def collapse_affine(W1, b1, W2, b2):\n    return W2 @ W1, W2 @ np.maximum(b1, 0) + b2 + 1",
    ],
    "01_shapes.x2_for_zero_output": [f"x2_zero = {value}" for value in (-4.0, 0.0, 2.0, 3.0)],
    "02_parameters.layer_parameters": [
        "def layer_parameters(d_in, d_out, bias=True):\n    return d_in * d_out",
        "def layer_parameters(d_in, d_out, bias=True):\n    return d_in * d_out + (d_in if bias else 0)",
        "def layer_parameters(d_in, d_out, bias=True):\n    return d_out * (d_in + 1)",
    ],
    "02_parameters.params_formula": [
        f"params_formula = {text!r}" for text in ("d_in*d_out", "d_in*(d_out + 1)", "(d_in + 1)*(d_out + 1)")
    ],
    "02_parameters.count_parameters": [
        "def count_parameters(widths, bias=True):\n    return [a * b for a, b in zip(widths, widths[1:])]",
        "def count_parameters(widths, bias=True):\n"
        "    return [a * b + a for a, b in zip(widths, widths[1:])]",
        "def count_parameters(widths, bias=True):\n"
        "    return [sum(a * b + b for a, b in zip(widths, widths[1:]))]",
    ],
    "02_parameters.output_activations": [
        "def output_activations(batch, d_out):\n    return d_out",
        "def output_activations(batch, d_out):\n    return batch + d_out",
    ],
    "02_parameters.depends_on_batch": [
        f"depends_on_batch = {text!r}" for text in ("parameters", "both", "neither")
    ],
    "02_parameters.doubling_ratio": [
        f"doubling_ratio = {text!r}" for text in ("4", "2", "(d + 1)/(2*(2*d + 1))", "(2*d)**2/d**2")
    ],
    "02_parameters.training_memory_bytes": [
        "def training_memory_bytes(n_params, bytes_per_value=4, optimizer='adam'):\n"
        "    return n_params * bytes_per_value",
        "def training_memory_bytes(n_params, bytes_per_value=4, optimizer='adam'):\n"
        "    return n_params * bytes_per_value * (1 + {'sgd': 0, 'momentum': 1, 'adam': 2}[optimizer])",
        "def training_memory_bytes(n_params, bytes_per_value=4, optimizer='adam'):\n"
        "    return n_params * (2 + {'sgd': 0, 'momentum': 1, 'adam': 2}[optimizer])",
    ],
    "03_gradients.grad_W_expr": [f"dL_dW = {text!r}" for text in ("X.T*G", "G*W", "W", "X.T*G.T")],
    "03_gradients.grad_X_expr": [f"dL_dX = {text!r}" for text in ("G*W.T", "W.T*G.T", "X", "G.T*X")],
    "03_gradients.grad_b_expr": [f"dL_db = {text!r}" for text in ("G", "G.T", "G.T*ones/B", "W.T*ones")],
    "03_gradients.linear_backward": [
        "def linear_backward(G, X, W):\n    return G @ W, G.T @ X, G.mean(axis=0)",
        "def linear_backward(G, X, W):\n    return G @ W, G.T @ X, G",
        "def linear_backward(G, X, W):\n    return G @ W, X.T @ G, G.sum(axis=0)",
        "def linear_backward(G, X, W):\n    return G @ W / len(G), G.T @ X, G.sum(axis=0)",
    ],
    "03_gradients.numerical_gradient": [
        "def numerical_gradient(f, x, h=1e-5):\n"
        "    x = np.asarray(x, dtype=float)\n    g = np.zeros_like(x)\n"
        "    for i in np.ndindex(x.shape):\n        x[i] += h\n        up = f(x)\n        x[i] -= h\n"
        "        g[i] = (up - f(x)) / h\n    return g",
        "def numerical_gradient(f, x, h=1e-5):\n    x = np.array(x, dtype=float)\n    g = np.zeros_like(x)\n"
        "    for i in np.ndindex(x.shape):\n        x[i] += h\n        up = f(x)\n        x[i] -= 2 * h\n"
        "        g[i] = (up - f(x)) / (2 * h)\n    return g",
    ],
    "03_gradients.rel_error": [
        "def rel_error(a, b):\n    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))))",
        "def rel_error(a, b):\n    a, b = np.asarray(a, float), np.asarray(b, float)\n"
        "    return float(np.max(np.abs(a - b) / np.maximum(np.abs(a), 1e-300)))",
    ],
    "04_tensor_parallel.split_output_rows": [
        "def split_output_rows(W, b, n):\n"
        "    return [(W_i, b) for W_i in np.array_split(np.asarray(W), n, axis=0)]",
        "def split_output_rows(W, b, n):\n"
        "    return list(zip(np.array_split(np.asarray(W), n, axis=1), np.array_split(b, n)))",
        "def split_output_rows(W, b, n):\n    if n < 1:\n        raise ValueError('n')\n"
        "    return list(zip(np.array_split(np.asarray(W), n), np.array_split(np.asarray(b), n)))",
    ],
    "04_tensor_parallel.split_input_columns": [
        "def split_input_columns(W, n):\n    return np.array_split(np.asarray(W), n, axis=0)",
        "def split_input_columns(W, n):\n    W = np.asarray(W)\n    size = -(-W.shape[1] // n)\n"
        "    return [W[:, i * size:(i + 1) * size] for i in range(n)]",
    ],
    "04_tensor_parallel.column_parallel_forward": [
        "def column_parallel_forward(X, shards):\n    return sum(X @ W_i.T + b_i for W_i, b_i in shards[:1])",
        "def column_parallel_forward(X, shards):\n"
        "    return np.concatenate([X @ W_i.T for W_i, b_i in shards], axis=1)",
    ],
    "04_tensor_parallel.row_parallel_forward": [
        "def row_parallel_forward(X, shards, b):\n"
        "    edges = np.cumsum([0] + [W_i.shape[1] for W_i in shards])\n"
        "    return sum(X[:, s:e] @ W_i.T + b for W_i, s, e in zip(shards, edges, edges[1:]))",
        "def row_parallel_forward(X, shards, b):\n"
        "    edges = np.cumsum([0] + [W_i.shape[1] for W_i in shards])\n"
        "    return sum(X[:, s:e] @ W_i.T for W_i, s, e in zip(shards, edges, edges[1:])) / len(shards) + b",
    ],
    "04_tensor_parallel.communication_elements": [
        "def communication_elements(collective, batch, d_out, world_size):\n"
        "    if collective not in ('all_gather', 'all_reduce'):\n        raise ValueError(collective)\n"
        f"    return {formula}"
        for formula in (
            "float((world_size - 1) / world_size * batch * d_out)",
            "float(batch * d_out)",
            "0.0",
            "float(2 * (world_size - 1) * batch * d_out)",
        )
    ],
    "04_tensor_parallel.all_reduce_volume": [
        f"all_reduce_volume = {text!r}"
        for text in ("p*B", "(p - 1)/p*B*d_out", "2*(p - 1)*B*d_out", "B*d_out", "2*B*d_out/p")
    ],
    "05_matmul_benchmark.matmul_flops": [
        "def matmul_flops(batch, d_in, d_out):\n    _check_sizes(batch=batch, d_in=d_in, d_out=d_out)\n"
        f"    return {formula}"
        for formula in (
            "batch * d_in * d_out",
            "2 * d_in * d_out",
            "2 * batch * d_in * d_out + batch * d_out",
        )
    ],
    "05_matmul_benchmark.flops_formula": [
        f"flops_formula = {text!r}" for text in ("B*d_in*d_out", "2*d_in*d_out", "2*B*d_in*d_out + B*d_out")
    ],
    "05_matmul_benchmark.matmul_bytes": [
        f"def matmul_bytes(batch, d_in, d_out, bytes_per_element):\n    return {formula}"
        for formula in (
            "(batch * d_in + d_out * d_in + batch * d_out)",
            "d_out * d_in * bytes_per_element",
            "(batch * d_in + d_out * d_in) * bytes_per_element",
        )
    ],
    "05_matmul_benchmark.arithmetic_intensity": [
        "def arithmetic_intensity(batch, d_in, d_out, bytes_per_element):\n"
        "    return matmul_bytes(batch, d_in, d_out, bytes_per_element) / matmul_flops(batch, d_in, d_out)",
        "def arithmetic_intensity(batch, d_in, d_out, bytes_per_element):\n"
        "    return matmul_flops(batch, d_in, d_out) / (d_out * d_in * bytes_per_element)",
    ],
    "05_matmul_benchmark.time_op": [
        "def time_op(fn, warmup=3, repeat=10, timer=time.perf_counter, sync=None):\n"
        "    durations = []\n    for _ in range(warmup + repeat):\n        start = timer()\n        fn()\n"
        "        durations.append(timer() - start)\n    return float(np.median(durations))",
        "def time_op(fn, warmup=3, repeat=10, timer=time.perf_counter, sync=None):\n"
        "    for _ in range(warmup):\n        fn()\n    durations = []\n    for _ in range(repeat):\n"
        "        start = timer()\n        fn()\n        durations.append(timer() - start)\n"
        "    return float(np.median(durations))",
        "def time_op(fn, warmup=3, repeat=10, timer=time.perf_counter, sync=None):\n"
        "    for _ in range(warmup):\n        fn()\n    durations = []\n    for _ in range(repeat):\n"
        "        sync and sync()\n        start = timer()\n        fn()\n        sync and sync()\n"
        "        durations.append(timer() - start)\n    return float(np.mean(durations))",
        "def time_op(fn, warmup=3, repeat=10, timer=time.perf_counter, sync=None, number=1):\n"
        "    for _ in range(warmup):\n        fn()\n    durations = []\n    for _ in range(repeat):\n"
        "        sync and sync()\n        start = timer()\n"
        "        for _ in range(number):\n            fn()\n"
        "        sync and sync()\n        durations.append(timer() - start)\n"
        "    return float(np.median(durations))",
    ],
    "05_matmul_benchmark.achieved_flops": [
        "def achieved_flops(batch, d_in, d_out, seconds):\n    return batch * d_in * d_out / seconds",
        "def achieved_flops(batch, d_in, d_out, seconds):\n    return 2 * batch * d_in * d_out * seconds",
    ],
    "05_matmul_benchmark.roofline_bound": [
        "def roofline_bound(intensity, peak_flops, bandwidth):\n"
        "    return 'compute' if intensity < peak_flops / bandwidth else 'memory'",
        "def roofline_bound(intensity, peak_flops, bandwidth):\n"
        "    return 'memory' if intensity < bandwidth / peak_flops else 'compute'",
    ],
}

# Right answers written differently from the model answer: both the public test and the grader accept them.
ALTERNATIVES: dict[str, list[str]] = {
    "01_shapes.z2_by_hand": ["z2_by_hand = 1.5000000000001"],
    "02_parameters.params_formula": ["params_formula = 'd_in*d_out + d_out'"],
    "02_parameters.depends_on_batch": ["depends_on_batch = ' Activations'"],
    "02_parameters.doubling_ratio": ["doubling_ratio = '(4*d**2 + 2*d)/(d**2 + d)'"],
    "03_gradients.grad_W_expr": ["dL_dW = 'G.T @ X'", "dL_dW = '(X.T*G).T'"],
    "03_gradients.grad_X_expr": ["dL_dX = 'G@W'"],
    "03_gradients.grad_b_expr": ["dL_db = 'ones.T*G'", "dL_db = '(ones.T*G).T'"],
    "04_tensor_parallel.all_reduce_volume": ["all_reduce_volume = '2*B*d_out - 2*B*d_out/p'"],
    "05_matmul_benchmark.flops_formula": [
        "flops_formula = 'B*d_out*(2*d_in - 1)'",
        "flops_formula = 'd_in*B*2*d_out'",
    ],
}


def _cell_source(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _grade_id(cell) -> str:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")


@pytest.fixture(scope="module")
def notebooks():
    """Per assignment: (namespace after setup and solution cells, {part id: public test source})."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    built = {}

    def load(assignment_id: str):
        if assignment_id in built:
            return built[assignment_id]
        assignment = COURSE.assignment(assignment_id)
        path = ROOT / "source" / assignment.id / assignment.notebook
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        namespace: dict = {"__name__": f"notebook_{assignment.id}"}
        tests = {}
        for cell in cells:
            meta = cell.get("metadata", {})
            if cell["cell_type"] != "code" or "illustration" in meta.get("tags", []):
                continue
            source = _cell_source(cell)
            if meta.get("nbgrader", {}).get("grade"):
                tests[_grade_id(cell)] = source.split(HIDDEN_END)[-1]
                continue
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<{assignment.id}:{cell.get('id')}>", "exec"), namespace)
        built[assignment_id] = (assignment, namespace, tests)
        return built[assignment_id]

    return load


def _run(notebooks, key: str, code: str):
    """(public test error or None, grader result) for answer `code` of part `key`."""
    assignment_id, part_id = key.split(".")
    assignment, base, tests = notebooks(assignment_id)
    part = assignment.part(part_id)
    namespace = dict(base)
    exec(compile(code, f"<answer {key}>", "exec"), namespace)
    error = None
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(tests[part_id], f"<public test {key}>", "exec"), namespace)
    except Exception as raised:  # any failure of the public test counts, as it does in the notebook
        error = raised
    value = namespace[part.name]
    answer = LocalFunction(value, part.name) if part.kind == "function" else local_value(value)
    return error, grade_part(assignment, part, answer, "student-7", "test-secret")


def test_every_graded_automatic_part_has_typical_wrong_answers():
    automatic = {
        f"{a.id}.{p.id}"
        for a in COURSE.assignments
        for p in a.parts
        if p.kind != "manual" and p.id != "misconception_quiz"
    }
    assert automatic <= set(WRONG_ANSWERS), sorted(automatic - set(WRONG_ANSWERS))


def _answers(table: dict[str, list[str]]):
    """pytest parameters (key, code) with ids "key-index" for every answer in `table`."""
    return [
        pytest.param(key, code, id=f"{key}-{index}")
        for key, codes in table.items()
        for index, code in enumerate(codes)
    ]


@pytest.mark.slow
@pytest.mark.parametrize("key,code", _answers(WRONG_ANSWERS))
def test_typical_wrong_answer_fails_its_public_test_and_grading(notebooks, key, code):
    error, result = _run(notebooks, key, code)
    assert error is not None, f"{key}: the public test passed this wrong answer:\n{code}"
    assert str(error).strip(), f"{key}: the public test failed without saying why"
    assert result.score < result.max_score, f"{key}: the grader gave full marks to a wrong answer:\n{code}"


@pytest.mark.slow
@pytest.mark.parametrize("key,code", _answers(ALTERNATIVES))
def test_right_answer_written_differently_passes_both(notebooks, key, code):
    error, result = _run(notebooks, key, code)
    assert error is None, f"{key}: the public test rejected a right answer ({error}):\n{code}"
    assert result.score == result.max_score, f"{key}: the grader rejected a right answer: {result.feedback}"


def test_the_scan_finds_formulas_in_latex_code_and_prose():
    """The scanner itself: each way a formula gets written is found, and a different formula is not."""
    written = {
        "03_gradients.grad_W_expr": r"so $\frac{\partial L}{\partial W} = G^\top X$, of shape",
        "03_gradients.grad_X_expr": r"and $\partial L / \partial X = G W$.",
        "03_gradients.grad_b_expr": 'dL_db = "G.T*ones"',
        "02_parameters.params_formula": r"has $d_{\mathrm{out}}\, d_{\mathrm{in}}"
        r" + d_{\mathrm{out}}$ parameters",
        "02_parameters.doubling_ratio": "the ratio is (4d² + 2d)/(d² + d), close to 4",
        "04_tensor_parallel.all_reduce_volume": r"each rank sends $$2\,\frac{p-1}{p}\,B\,d_{out}$$ elements",
        "05_matmul_benchmark.flops_formula": "Returns an int: 2 * B * d_in * d_out (a multiply",
    }
    for key, text in written.items():
        assert leaks(text, key), f"{key} not found in {text!r}"
    assert not leaks(r"the transposed $X^\top G$ has the wrong shape", "03_gradients.grad_W_expr")
    assert not leaks(r"costs about $B\, d_{in} d_{out}$ multiply-adds", "05_matmul_benchmark.flops_formula")


@pytest.mark.parametrize("assignment", COURSE.assignments, ids=[a.id for a in COURSE.assignments])
def test_released_notebook_states_no_graded_formula(assignment):
    """No symbolic answer of any assignment appears anywhere in this release (text, code, docstrings)."""
    path = ROOT / "assignments" / assignment.id / assignment.notebook
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = [
        f"cell {cell.get('id')}: {key} written as {leaked}"
        for cell in cells
        for key in SYMBOLIC_PARTS
        for leaked in leaks(_cell_source(cell), key)
    ]
    assert not found, "\n".join(found)
