"""Checks for assignment 03: linear_backward, numerical_gradient and rel_error.

Inputs are random per student (ctx.rng) with awkward, mostly non-square sizes, so that a
transposed gradient shows in its shape; one square case (the chapter's running example)
lets a transposed or swapped product show in its values instead. Everything is compared
in float64 with the reference in `grader.reference.gradients`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from grader import fakes
from grader.checks.base import WrongAnswer, check
from grader.checks.common import CallWording, call_student
from grader.checks.formulas import KnownAnswer, SymbolicPart, symbolic_part
from grader.checks.values import as_array, as_float, close, describe
from grader.codec import CallableSpec
from grader.reference import gradients as reference

RTOL, ATOL = 1e-6, 1e-8
# The chapter's running example: a 3 -> 3 layer and its two-observation batch.
SEED_X = np.array([[2.0, 4.0, 1.0], [1.0, 0.0, 2.0]])
SEED_W = np.array([[0.5, -1.0, 2.0], [-0.25, 0.5, 1.0], [1.0, 0.25, -0.5]])
# Central differences with h from 1e-7 to 1e-3 stay within about 1e-6 of the true gradient
# here; a one-sided difference with h = 1e-5 is off by h/2 * f'' >= 2e-5 on the quadratics.
NUMERICAL_ATOL = 5e-6


GRADIENT_CALLS = CallWording(
    raised="Called with {arrays}, `{function}` raised an error: {reason}",
    mutated=(
        "`{function}` changed its input {inputs} in place. Compute new arrays and leave the inputs as "
        "they were: the caller still needs them."
    ),
    returned_input=None,
)


def largest_difference(got: np.ndarray, expected: np.ndarray) -> str:
    """'at index (i, j) you return a where b was expected' for the largest difference."""
    index = np.unravel_index(np.argmax(np.abs(got - expected)), got.shape)
    return (
        f"at index {tuple(int(i) for i in index)} you return {got[index]:.10g} where "
        f"{expected[index]:.10g} was expected"
    )


def _close(got: np.ndarray, expected: np.ndarray) -> bool:
    return close(got, expected, RTOL, ATOL)


# linear_backward


def _layer_cases(rng: np.random.Generator) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(G, X, W) triples: the square running example first, then awkward non-square sizes."""
    sizes = [(1, 7, 73)]
    while len(sizes) < 3:
        B, d_in, d_out = (int(n) for n in rng.choice([2, 3, 5, 6, 7, 9, 11, 13], size=3, replace=False))
        sizes.append((B, d_in, d_out))
    cases = [(rng.standard_normal((2, 3)), SEED_X, SEED_W)]
    for B, d_in, d_out in sizes:
        cases.append(
            (
                rng.standard_normal((B, d_out)),
                rng.standard_normal((B, d_in)),
                rng.standard_normal((d_out, d_in)),
            )
        )
    return cases


def _judge_gradient(
    got: np.ndarray, expected: np.ndarray, name: str, transposed: str, exact: str, wrong_shape: str, models
) -> None:
    """Raise WrongAnswer unless the gradient `name` equals `expected` (shape (S) of its variable).

    `transposed` is the feedback for the transposed shape (followed by `exact` when the values are
    exactly the transpose; code grad-transposed) and `wrong_shape` for any other shape. `models` are
    wrong models (value, feedback, *codes) tried on a right-shaped answer; a None value does not apply.
    """
    if got.shape == expected.T.shape and got.shape != expected.shape:
        raise WrongAnswer(transposed + (exact if _close(got, expected.T) else ""), "grad-transposed")
    if got.shape != expected.shape:
        raise WrongAnswer(wrong_shape)
    if _close(got, expected):
        return
    for value, feedback, *codes in models:
        if value is not None and _close(got, value):
            raise WrongAnswer(feedback, *codes)
    raise WrongAnswer(
        f"{name} has the right shape {expected.shape} but wrong values: {largest_difference(got, expected)}."
    )


def _judge_dX(got: np.ndarray, expected: np.ndarray, G, X, W) -> None:
    square = W.shape[0] == W.shape[1]
    _judge_gradient(
        got,
        expected,
        "dX",
        transposed=f"dX has shape {got.shape}, the transpose of X's shape {X.shape}: a gradient has the "
        "shape of what it differentiates.",
        exact=" It is exactly the transpose of dX.",
        wrong_shape=f"dX has shape {got.shape}; it must have X's shape {X.shape} (B, d_in).",
        models=[
            (
                G @ W.T if square else None,
                "dX multiplies G by W.T. In Z = X @ W.T the weights enter transposed, so on the way back "
                "G (B, d_out) meets W in its stored (d_out, d_in) orientation. (With a non-square W your "
                "version would not even have the right shape.)",
                "grad-wrong-operand",
            )
        ],
    )


def _judge_dW(got: np.ndarray, expected: np.ndarray, G, X, W) -> None:
    square, batch = W.shape[0] == W.shape[1], G.shape[0]
    _judge_gradient(
        got,
        expected,
        "dW",
        transposed=f"dW has shape {got.shape}, but W has shape {W.shape} (d_out, d_in) and its gradient "
        "must match it.",
        exact=" It is exactly X.T @ G, the transpose of dW.",
        wrong_shape=f"dW has shape {got.shape}; it must have W's shape {W.shape} (d_out, d_in).",
        models=[
            (
                expected.T if square else None,
                "dW is the transpose of the gradient (X.T @ G instead of a (d_out, d_in) product). "
                "With a square W the shapes hide it; with a non-square W they would not match.",
                "grad-transposed",
            ),
            (
                expected / batch if batch > 1 else None,
                "dW is divided by the batch size. The gradients of the rows add up; any averaging "
                "belongs to the loss and is already inside G.",
            ),
        ],
    )


def _judge_db(got: np.ndarray, expected: np.ndarray, G) -> bool:
    """Raise WrongAnswer for a wrong db; return False when only its shape is (1, d_out), else True."""
    B, d_out = G.shape
    if B > 1 and got.shape == G.shape and _close(got, G):
        raise WrongAnswer(
            f"db returns G itself, shape {G.shape}: one row per observation. The same b is added "
            f"to every row of Z, so every row's gradient flows into it and db adds G up over the "
            f"batch, giving b's shape ({d_out},).",
            "bias-grad-not-summed",
        )
    if B > 1 and _close(got, G.mean(axis=0)):
        raise WrongAnswer(
            "db averages G over the batch. The bias is added to every row, so the rows' gradients "
            "add up: sum instead of taking the mean. (If the loss is a mean, its 1/B is already "
            "inside G.)",
            "bias-grad-not-summed",
        )
    if got.shape == (B,) and B != d_out and _close(got, G.sum(axis=1)):
        raise WrongAnswer(
            f"db sums G over the output axis, giving shape ({B},). Sum over the batch axis (axis 0) "
            f"to get one entry per output unit, shape ({d_out},)."
        )
    if got.shape == (1, d_out) and _close(got.reshape(-1), expected):
        return False
    if got.shape != expected.shape:
        raise WrongAnswer(f"db has shape {got.shape}; it must have b's shape ({d_out},).")
    if not _close(got, expected):
        raise WrongAnswer(f"db has the right shape but wrong values: {largest_difference(got, expected)}.")
    return True


@check("03_gradients", "linear_backward")
def check_linear_backward(answer, ctx):
    """linear_backward(G, X, W) -> (dX, dW, db) on random awkward shapes."""
    db_flat = True
    for G, X, W in _layer_cases(ctx.rng):
        value = call_student(answer, (G, X, W), ("G", "X", "W"), GRADIENT_CALLS)
        if type(value) not in (tuple, list) or len(value) != 3:
            raise WrongAnswer(
                f"linear_backward should return a tuple (dX, dW, db), but returned {describe(value)}."
            )
        dX, dW, db = (as_array(item, name) for item, name in zip(value, ("dX", "dW", "db")))
        expected_dX, expected_dW, expected_db = reference.linear_backward(G, X, W)
        _judge_dX(dX, expected_dX, G, X, W)
        _judge_dW(dW, expected_dW, G, X, W)
        db_flat = _judge_db(db, expected_db, G) and db_flat
    if not db_flat:
        return ctx.partial(
            0.5,
            "dX and dW are right, and db has the right values, but its shape is (1, d_out). "
            "b has shape (d_out,), and its gradient should too (sum without keepdims).",
        )
    return ctx.passed(
        "Correct on every shape tried, including B = 1 and a 7 -> 73 layer: dX has X's shape, "
        "dW has W's shape and db has b's shape."
    )


# numerical_gradient


def _quadratic(rng, shape) -> CallableSpec:
    n = int(np.prod(shape))
    A = rng.standard_normal((n, n))
    A[np.diag_indices(n)] = rng.choice([-1.0, 1.0], size=n) * rng.uniform(4.0, 8.0, size=n)
    return CallableSpec("quadratic_loss", {"A": A, "c": rng.standard_normal(n), "shape": tuple(shape)})


def _sine(rng, shape) -> CallableSpec:
    return CallableSpec(
        "sine_loss", {"w": rng.choice([-1.0, 1.0], size=shape) * rng.uniform(4.0, 8.0, size=shape)}
    )


def _derivatives(spec: CallableSpec, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The second and third derivatives d2f/dx_i^2, d3f/dx_i^3 of the loss `spec`, each of x's shape."""
    if spec.kind == "quadratic_loss":
        return np.diag(spec.params["A"]).reshape(x.shape), np.zeros(x.shape)
    w = spec.params["w"]
    return -w * np.sin(x), -w * np.cos(x)


def _common_factor(error: np.ndarray, pattern: np.ndarray) -> float | None:
    """k when error ~= k * pattern on at least 3 entries where the pattern is clearly nonzero."""
    usable = np.abs(pattern) > 0.5
    if usable.sum() < 3:
        return None
    factors = error[usable] / pattern[usable]
    factor = float(np.median(factors))
    if abs(factor) > 1e-12 and np.all(np.abs(factors - factor) <= 0.1 * abs(factor)):
        return factor
    return None


def _diagnose_difference(error: np.ndarray, spec: CallableSpec, x: np.ndarray) -> str:
    """Name a one-sided difference (error ~ h/2 * f2) or a too large central step (error ~ h^2/6 * f3)."""
    second, third = _derivatives(spec, x)
    half_step = _common_factor(error, second)
    if half_step is not None:
        side = "forward" if half_step > 0 else "backward"
        return (
            f"Your estimate is off by about h/2 * f'' with h = {2 * abs(half_step):.1e}: the error of a "
            f"one-sided ({side}) difference. Use the central difference (f(x + h) - f(x - h)) / (2h), whose "
            "error shrinks like h^2 instead of h."
        )
    step_squared_over_6 = _common_factor(error, third)
    if step_squared_over_6 is not None and step_squared_over_6 > 0:
        return (
            f"Your estimate is off by about h^2/6 * f''' with h = {np.sqrt(6 * step_squared_over_6):.1e}: "
            "a central difference with too large a step. Use h around 1e-5."
        )
    return ""


RETURNS_NEW_GRADIENT = dataclasses.replace(
    GRADIENT_CALLS,
    returned_input="numerical_gradient returned x itself; it should return a new array holding the "
    "estimated gradient.",
)


@check("03_gradients", "numerical_gradient")
def check_numerical_gradient(answer, ctx):
    """numerical_gradient(f, x) against the analytic gradient of smooth test losses."""
    rng = ctx.rng
    cases = [(_quadratic, (7,)), (_quadratic, (3, 4)), (_sine, (2, 5)), (_sine, (1,))]
    for make, shape in cases:
        spec = make(rng, shape)
        x = rng.uniform(-2.0, 2.0, size=shape)
        loss = fakes.materialise(spec)
        expected = loss.gradient(x)
        value = call_student(answer, (spec, x), ("f", "x"), RETURNS_NEW_GRADIENT)
        got = as_array(value, "the returned gradient")
        if got.shape != x.shape:
            same = " (the same numbers in a different layout: keep x's shape)" if got.size == x.size else ""
            raise WrongAnswer(
                f"For x of shape {x.shape} numerical_gradient returned shape {got.shape}; the "
                f"gradient has one entry per entry of x, so the same shape{same}."
            )
        error = got - expected
        if np.max(np.abs(error)) <= NUMERICAL_ATOL:
            continue
        diagnosis = _diagnose_difference(error, spec, x)
        if diagnosis:
            raise WrongAnswer(f"{diagnosis} Largest error here: {np.max(np.abs(error)):.2e}.")
        raise WrongAnswer(
            f"For x of shape {x.shape} the estimate differs from the true gradient by up to "
            f"{np.max(np.abs(error)):.2e}: {largest_difference(got, expected)}. A central difference "
            "with h around 1e-5 is accurate to about 1e-8 here."
        )
    return ctx.passed(
        "Correct: central differences match the analytic gradients, in x's shape, and x is left unchanged."
    )


# rel_error


def _rel_error_cases(rng) -> list[tuple[np.ndarray, np.ndarray, str]]:
    a = rng.standard_normal((4, 5))
    large = rng.uniform(1e5, 1e6, size=(7,)) * rng.choice([-1.0, 1.0], size=7)
    tiny = rng.uniform(1e-4, 1e-3, size=(3, 73))
    return [
        (a, a * (1 + 1e-3 * rng.standard_normal(a.shape)), "two random (4, 5) arrays"),
        (large, large + rng.uniform(0.5, 2.0, size=7), "large entries (about 1e5 to 1e6) off by about 1"),
        (tiny, tiny * (1 + 0.05 * rng.standard_normal(tiny.shape)), "small entries (about 1e-4) off by 5%"),
        (np.array([0.0, 2.0, -1.0]), np.array([0.0, 2.5, -1.0]), "arrays sharing a zero entry"),
        (np.array([1.5]), np.array([-1.5]), "one entry with opposite signs"),
        (np.zeros((2, 3)), np.zeros((2, 3)), "two all-zero arrays"),
        (a, a.copy(), "two equal arrays"),
    ]


def _rel_error_misuse(got: float, a: np.ndarray, b: np.ndarray) -> str:
    """A sentence naming a recognised wrong definition of rel_error, or ''."""
    difference = np.abs(a - b)
    scale = np.maximum(np.abs(a) + np.abs(b), np.finfo(np.float64).tiny)
    candidates = {
        "This is the absolute error max |a - b|; divide each difference by |a| + |b| so the result does not "
        "depend on the size of the numbers.": difference.max(),
        "This averages the relative differences; rel_error takes the largest one (max), so one bad entry "
        "shows.": (difference / scale).mean(),
        "This divides the largest difference by the largest scale; divide entry by entry first, then take "
        "the max.": difference.max() / scale.max(),
    }
    for message, value in candidates.items():
        if np.isclose(got, value, rtol=1e-7, atol=1e-15):
            return message
    return ""


@check("03_gradients", "rel_error")
def check_rel_error(answer, ctx):
    """rel_error(a, b) = max |a - b| / max(|a| + |b|, tiny), elementwise, on random and edge-case pairs."""
    for a, b, what in _rel_error_cases(ctx.rng):
        expected = reference.rel_error(a, b)
        values = []
        for first, second in ((a, b), (b, a)):
            value = call_student(answer, (first, second), ("a", "b"), GRADIENT_CALLS)
            try:
                values.append(as_float(value, "rel_error's result"))
            except WrongAnswer as wrong:
                if type(value) is not float:
                    hint = " Return one number: the largest of the elementwise relative differences."
                elif np.any((a == 0) & (b == 0)):
                    hint = (
                        " Where both entries are 0 the relative difference must be 0: keep the denominator "
                        "away from 0 with max(|a| + |b|, tiny)."
                    )
                else:
                    hint = ""
                raise WrongAnswer(f"For {what}: {wrong.feedback}{hint}") from None
        got, swapped = values
        if not np.isclose(got, swapped, rtol=1e-9, atol=1e-15):
            raise WrongAnswer(
                f"For {what}, rel_error(a, b) = {got:.6g} but rel_error(b, a) = {swapped:.6g}. The "
                "definition is symmetric: divide by |a| + |b|, not by one of them."
            )
        if not np.isclose(got, expected, rtol=1e-7, atol=1e-15):
            misuse = _rel_error_misuse(got, a, b)
            raise WrongAnswer(
                f"For {what}, rel_error returned {got:.6g}; expected {expected:.6g}. "
                f"{misuse or 'Use max over entries of |a - b| / max(|a| + |b|, tiny).'}"
            )
    return ctx.passed("Correct: symmetric, scale-free, 0 for equal (and all-zero) arrays.")


# --- symbolic parts (grader.checks.formulas grades them) ----------------------------------------

_LAYER_MATRICES = {
    "X": ("B", "d_in", "the input batch"),
    "W": ("d_out", "d_in", "the weights"),
    "G": ("B", "d_out", "dL/dZ, the gradient arriving at the output Z = X W^T + b"),
    "ones": ("B", "1", "a column of ones"),
}
_LAYER_SIZES = {"B": "batch size", "d_in": "input features", "d_out": "output units"}

_NOT_SUMMED = (
    "Your dL/db keeps one row per observation. The same bias b is added to every row of Z, "
    "so each row's gradient contributes to it: dL/db adds G up over the batch and has one entry "
    "per output unit. A column of ones (B x 1) does that sum as a matrix product."
)
_MEAN = (
    "Your dL/db averages G over the batch (it divides by B). The bias is added to every row, so the "
    "rows' gradients add up: drop the 1/B. (If the loss itself is a mean, that 1/B is already inside G.)"
)


def _layer_gradient_part(
    of: str, answers: tuple[str, ...], hint: str, on_correct: str, known: tuple[KnownAnswer, ...] = ()
) -> SymbolicPart:
    """The symbolic part asking for dL/d`of` of the dense layer Z = X W^T + b, as a matrix expression."""
    return SymbolicPart(
        variable=f"dL_d{of}",
        question=f"dL/d{of} for Z = X W^T + b, as a matrix expression",
        symbols=_LAYER_SIZES,
        matrices=_LAYER_MATRICES,
        answers=answers,
        known=known,
        hint=hint,
        on_correct=on_correct,
    )


symbolic_part(
    "03_gradients.grad_W_expr",
    _layer_gradient_part(
        "W",
        answers=("G.T*X",),
        hint=(
            "W multiplies X in the forward pass, so dL/dW is built from G and X; it must have W's shape, "
            "d_out x d_in."
        ),
        on_correct="Correct: dL/dW = G^T X has shape d_out x d_in, the shape of W.",
    ),
)


symbolic_part(
    "03_gradients.grad_X_expr",
    _layer_gradient_part(
        "X",
        answers=("G*W",),
        hint=(
            "X is multiplied by W^T in the forward pass, so dL/dX is built from G and W; it must have "
            "X's shape, B x d_in."
        ),
        on_correct="Correct: dL/dX = G W has shape B x d_in, the shape of X.",
    ),
)


symbolic_part(
    "03_gradients.grad_b_expr",
    _layer_gradient_part(
        "b",
        answers=("G.T*ones", "ones.T*G"),
        known=(
            KnownAnswer(("G", "G.T"), _NOT_SUMMED, ("bias-grad-not-summed",)),
            KnownAnswer(("G.T*ones/B", "ones.T*G/B"), _MEAN, ("bias-grad-not-summed",)),
        ),
        hint="b is added to every row of Z, so dL/db is built from G alone, with one entry per output unit.",
        on_correct="Correct: the bias gradient adds G up over the batch, one entry per output unit.",
    ),
)
