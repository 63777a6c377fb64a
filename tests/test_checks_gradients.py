"""The assignment-03 function checks: full marks for the reference, named mistakes, hostile code."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grader import fakes
from grader.checks import run_check
from grader.checks.gradients import NUMERICAL_ATOL, _quadratic
from grader.course import load_course
from grader.grading import grade_part
from grader.reference import gradients as ref
from grader.result import Status
from grader.student import LocalFunction

from conftest import LyingNumber, assert_zero, make_ctx

COURSE = load_course()
ASSIGNMENT = COURSE.assignment("03_gradients")
PARTS = ["linear_backward", "numerical_gradient", "rel_error"]


def grade(part_id: str, function, seed: int = 0):
    """Grade a plain Python function as the student's answer to 03_gradients.`part_id`."""
    return run_check(
        make_ctx("03_gradients", part_id, seed), LocalFunction(function, ASSIGNMENT.part(part_id).name)
    )


def test_inputs_differ_between_students():
    seen = []

    def spy(G, X, W):
        seen.append(G.copy())
        return ref.linear_backward(G, X, W)

    grade("linear_backward", spy, seed=1)
    grade("linear_backward", spy, seed=2)
    assert len(seen) == 8 and not np.array_equal(seen[0], seen[4])


def test_linear_backward_tries_awkward_shapes():
    shapes = []

    def spy(G, X, W):
        shapes.append((X.shape[0], X.shape[1], W.shape[0]))
        return ref.linear_backward(G, X, W)

    for seed in range(5):
        grade("linear_backward", spy, seed)
    assert (1, 7, 73) in shapes and (2, 3, 3) in shapes
    assert any(B != d_in != d_out != B for B, d_in, d_out in shapes)


# linear_backward: the usual mistakes.


def dW_transposed(G, X, W):
    return G @ W, X.T @ G, G.sum(axis=0)


def dX_with_W_transposed(G, X, W):
    return G @ W.T, G.T @ X, G.sum(axis=0)


def dX_transposed(G, X, W):
    return W.T @ G.T, G.T @ X, G.sum(axis=0)


def db_not_summed(G, X, W):
    return G @ W, G.T @ X, G.copy()


def db_mean(G, X, W):
    return G @ W, G.T @ X, G.mean(axis=0)


def db_wrong_axis(G, X, W):
    return G @ W, G.T @ X, G.sum(axis=1)


def dW_mean(G, X, W):
    return G @ W, G.T @ X / G.shape[0], G.sum(axis=0)


def mutates_G(G, X, W):
    G *= 2
    return ref.linear_backward(G / 2, X, W)


def dX_transposed_only_when_square(G, X, W):
    dX, dW, db = ref.linear_backward(G, X, W)
    return (dX.T if W.shape[0] == W.shape[1] == 3 else dX), dW, db


@pytest.mark.parametrize(
    "function, codes, text",
    [
        (dW_transposed, ["grad-transposed"], "transpose"),
        (dX_with_W_transposed, ["grad-wrong-operand"], "W.T"),
        (dX_transposed, ["grad-transposed"], "transpose"),
        (db_not_summed, ["bias-grad-not-summed"], "G itself"),
        (db_mean, ["bias-grad-not-summed"], "averages"),
        (db_wrong_axis, [], "axis 0"),
        (dW_mean, [], "batch size"),
        (mutates_G, [], "changed its input G"),
    ],
)
def test_linear_backward_mistakes_are_named(function, codes, text):
    assert_zero(grade("linear_backward", function), *codes, text=text)


def test_transposed_dW_on_a_non_square_layer_is_named_by_shape():
    def transposed_unless_square(G, X, W):
        dX, dW, db = ref.linear_backward(G, X, W)
        return dX, (dW if W.shape[0] == W.shape[1] else dW.T), db

    result = grade("linear_backward", transposed_unless_square)
    assert_zero(result, "grad-transposed", text="shape")


def test_mean_and_unsummed_bias_get_different_feedback():
    assert grade("linear_backward", db_mean).feedback != grade("linear_backward", db_not_summed).feedback


def test_keepdims_bias_gets_partial_marks():
    def keepdims(G, X, W):
        dX, dW, _ = ref.linear_backward(G, X, W)
        return dX, dW, G.sum(axis=0, keepdims=True)

    result = grade("linear_backward", keepdims)
    assert result.status == Status.PARTIAL and result.score == pytest.approx(result.max_score / 2)


def test_shape_errors_in_student_code_name_the_input_shapes():
    def wrong_product(G, X, W):
        return G @ W.T, G.T @ X, G.sum(axis=0)

    for seed in range(3):
        result = grade("linear_backward", wrong_product, seed)
        assert_zero(result)
    assert "grad-wrong-operand" in grade("linear_backward", wrong_product).misconceptions


def test_torch_and_float32_results_are_accepted():
    def via_torch(G, X, W):
        return tuple(torch.from_numpy(a) for a in ref.linear_backward(G, X, W))

    def in_float32(G, X, W):
        return tuple(a.astype(np.float32) for a in ref.linear_backward(G, X, W))

    for function in (via_torch, in_float32):
        assert grade("linear_backward", function).status == Status.PASSED


def test_wrong_values_report_a_first_difference_only():
    def off_by_one(G, X, W):
        dX, dW, db = ref.linear_backward(G, X, W)
        dW = dW.copy()
        dW[0, 0] += 1
        return dX, dW, db

    result = grade("linear_backward", off_by_one)
    assert_zero(result, text="at index (0, 0)")


# numerical_gradient.


def forward_difference(f, x, h=1e-5):
    x = np.array(x, dtype=float)
    base, gradient = f(x), np.zeros_like(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + h
        gradient[index] = (f(x) - base) / h
        x[index] = old
    return gradient


def backward_difference(f, x, h=1e-4):
    x = np.array(x, dtype=float)
    base, gradient = f(x), np.zeros_like(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old - h
        gradient[index] = (base - f(x)) / h
        x[index] = old
    return gradient


def perturbs_x_in_place(f, x, h=1e-5):
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        old = x[index]
        x[index] = old + h
        plus = f(x)
        x[index] = old - h
        gradient[index] = (plus - f(x)) / (2 * h)
    return gradient


def flattened(f, x):
    return ref.numerical_gradient(f, x).reshape(-1)


def too_coarse(f, x):
    return ref.numerical_gradient(f, x, h=0.5)


@pytest.mark.parametrize(
    "function, text",
    [
        (forward_difference, "forward"),
        (backward_difference, "backward"),
        (perturbs_x_in_place, "changed its input x"),
        (flattened, "shape"),
        (too_coarse, "too large a step"),
    ],
)
def test_numerical_gradient_mistakes_are_explained(function, text):
    assert_zero(grade("numerical_gradient", function), text=text)


@pytest.mark.parametrize("h", [1e-7, 1e-6, 1e-4, 1e-3])
def test_reasonable_central_steps_pass(h):
    def central(f, x):
        return ref.numerical_gradient(f, x, h=h)

    assert grade("numerical_gradient", central).status == Status.PASSED


def test_forward_difference_error_is_far_outside_the_tolerance():
    rng = np.random.default_rng(0)
    for shape in ((7,), (3, 4)):
        spec = _quadratic(rng, shape)
        loss = fakes.materialise(spec)
        x = rng.uniform(-2, 2, size=shape)
        error = np.max(np.abs(forward_difference(loss, x) - loss.gradient(x)))
        assert error > 4 * NUMERICAL_ATOL


def test_numerical_gradient_returning_x_itself_is_caught():
    def returns_x(f, x):
        x[...] = ref.numerical_gradient(f, x)
        return x

    assert_zero(grade("numerical_gradient", returns_x))


def test_numerical_gradient_receives_callable_losses():
    kinds = []

    def spy(f, x):
        kinds.append(type(f).__name__)
        return ref.numerical_gradient(f, x)

    grade("numerical_gradient", spy)
    assert {"QuadraticLoss", "SineLoss"} <= set(kinds)


# rel_error.


def absolute_error(a, b):
    return float(np.max(np.abs(a - b)))


def mean_relative(a, b):
    return float(np.mean(np.abs(a - b) / np.maximum(np.abs(a) + np.abs(b), 1e-300)))


def one_sided(a, b):
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-300)))


def unguarded(a, b):
    with np.errstate(invalid="ignore"):
        return float(np.max(np.abs(a - b) / (np.abs(a) + np.abs(b))))


def global_ratio(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(a) + np.abs(b)), 1e-300))


def elementwise_array(a, b):
    return np.abs(a - b) / np.maximum(np.abs(a) + np.abs(b), 1e-300)


def mutating(a, b):
    a -= b
    return float(np.max(np.abs(a)))


@pytest.mark.parametrize(
    "function, text",
    [
        (absolute_error, "absolute error"),
        (mean_relative, "averages"),
        (one_sided, "symmetric"),
        (unguarded, "both entries are 0"),
        (global_ratio, "entry by entry"),
        (elementwise_array, "one number"),
        (mutating, "changed its input a"),
    ],
)
def test_rel_error_mistakes_are_explained(function, text):
    assert_zero(grade("rel_error", function), text=text)


def test_common_floor_variant_is_accepted():
    def floor_1e8(a, b):
        return float(np.max(np.abs(a - b) / np.maximum(1e-8, np.abs(a) + np.abs(b))))

    assert grade("rel_error", floor_1e8).status == Status.PASSED


# Hostile and unfinished answers.


def stub(*args):
    raise NotImplementedError("Task 3.4: compute dX, dW and db")


@pytest.mark.parametrize("part", PARTS)
def test_stub_is_reported_as_not_implemented(part):
    assert_zero(grade(part, stub), "not-implemented")
    result = grade_part(ASSIGNMENT, ASSIGNMENT.part(part), LocalFunction(stub), "student-0", "secret")
    assert_zero(result, "not-implemented")
    assert ASSIGNMENT.part(part).task in result.feedback


# Beyond conftest.HOSTILE_VALUES, which test_checks_common tries on every function part.
HOSTILE_RESULTS = {
    "nan": lambda: float("nan"),
    "inf array": lambda: np.full(3, np.inf),
    "tuple of None": lambda: (None, None, None),
    "tuple of lying": lambda: (LyingNumber(), LyingNumber(), LyingNumber()),
    "bool": lambda: True,
    "huge list": lambda: list(range(30_000)),
}


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("label", sorted(HOSTILE_RESULTS))
def test_hostile_results_score_zero(part, label):
    make = HOSTILE_RESULTS[label]
    assert_zero(grade(part, lambda *args: make()))


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("error", [ValueError("boom"), ZeroDivisionError(), SystemExit(3), RecursionError()])
def test_raising_code_scores_zero(part, error):
    def raises(*args):
        raise error

    assert_zero(grade(part, raises))


@pytest.mark.parametrize("part", PARTS)
def test_returning_an_input_is_not_accepted(part):
    assert_zero(grade(part, lambda *args: args[-1]))


def test_nan_on_arrays_without_shared_zeros_gets_no_hint_about_zeros():
    result = grade("rel_error", lambda a, b: float("nan"))
    assert_zero(result, text="nan; expected a finite number")
    assert "both entries are 0" not in result.feedback
