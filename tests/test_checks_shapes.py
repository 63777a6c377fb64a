"""The assignment-01 checks: full marks for the reference, zero with a code for each wrong model."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from grader.checks.shapes import _forward_cases, _layer_shape_codes
from grader.reference import shapes as ref
from grader.result import Status
from grader.student import LocalFunction, local_value

from conftest import assert_zero

A = "01_shapes"
FUNCTION_PARTS = [
    "layer_shapes",
    "linear_forward",
    "relu",
    "to_torch_linear",
    "find_mismatch",
    "collapse_affine",
]


@pytest.mark.parametrize(
    "part, value",
    [
        ("z2_by_hand", 1.5),
        ("z2_by_hand", np.float64(1.5)),
        ("z2_by_hand", np.array([1.5])),
        ("x2_for_zero_output", 4),
        ("x2_for_zero_output", 4.0 + 1e-12),
    ],
)
def test_value_parts_accept_the_right_number(grade, part, value):
    result = grade(A, part, local_value(value))
    assert result.status == Status.PASSED and result.score == result.max_score


def test_checks_randomise_per_student(ctx_for):
    first = _forward_cases(ctx_for(A, "linear_forward", 1).rng)
    again = _forward_cases(ctx_for(A, "linear_forward", 1).rng)
    other = _forward_cases(ctx_for(A, "linear_forward", 2).rng)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(first, again))
    assert not all(a[1].shape == b[1].shape and np.array_equal(a[1], b[1]) for a, b in zip(first, other))


# ------------------------------------------------------------------------------- wrong models


def shapes_rows_are_inputs(d_in, d_out, batch=None):
    shapes = ref.layer_shapes(d_in, d_out, batch)
    return {**shapes, "W": (d_in, d_out)}


def shapes_bias_per_input(d_in, d_out, batch=None):
    return {**ref.layer_shapes(d_in, d_out, batch), "b": (d_in,)}


def shapes_batch_in_weights(d_in, d_out, batch=None):
    shapes = ref.layer_shapes(d_in, d_out, batch)
    if batch is not None:
        shapes["W"] = (batch, d_out, d_in)
    return shapes


def shapes_one_neuron(d_in, d_out, batch=None):
    return {
        "x": (d_in,) if batch is None else (batch, d_in),
        "W": (d_in,),
        "b": (),
        "z": () if batch is None else (batch,),
    }


def forward_rows_are_inputs(X, W, b):
    return X @ W + b


def forward_without_bias(X, W, b):
    return X @ W.T


def forward_with_relu(X, W, b):
    return np.maximum(X @ W.T + b, 0)


def forward_mutating(X, W, b):
    Z = X @ W.T + b
    b += 1.0
    return Z


def forward_returns_input(X, W, b):
    return X


def forward_float32(X, W, b):
    return (X.astype(np.float32) @ W.T.astype(np.float32) + b.astype(np.float32)).astype(np.float64)


def forward_one_neuron(X, W, b):
    return (X @ W.T + b).sum(axis=-1)


def torch_transposed(W, b):
    layer = torch.nn.Linear(W.shape[0], W.shape[1])
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(W.T))
        layer.bias.zero_()
    return layer


def torch_without_bias(W, b):
    layer = torch.nn.Linear(W.shape[1], W.shape[0], bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(W))
    return layer


def torch_bias_not_copied(W, b):
    layer = torch.nn.Linear(W.shape[1], W.shape[0])
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(W))
    return layer


def torch_returns_weight(W, b):
    return ref.to_torch_linear(W, b).weight


def mismatch_first_axis(input_shape, in_features):
    return None if input_shape[0] == in_features else (0, input_shape[0], in_features)


def mismatch_negative_axis(input_shape, in_features):
    found = ref.find_mismatch(input_shape, in_features)
    return None if found is None else (-1,) + found[1:]


def mismatch_swapped(input_shape, in_features):
    found = ref.find_mismatch(input_shape, in_features)
    return None if found is None else (found[0], found[2], found[1])


def mismatch_bool(input_shape, in_features):
    return input_shape[-1] != in_features


def collapse_without_first_bias(W1, b1, W2, b2):
    return W2 @ W1, b2


def collapse_without_second_bias(W1, b1, W2, b2):
    return W2 @ W1, W2 @ b1


def collapse_with_relu(W1, b1, W2, b2):
    return W2 @ np.maximum(W1, 0), W2 @ np.maximum(b1, 0) + b2


def collapse_refuses(W1, b1, W2, b2):
    return None


def collapse_keeps_both(W1, b1, W2, b2):
    return W1, b1, W2, b2


def collapse_transposed(W1, b1, W2, b2):
    return (W2 @ W1).T, W2 @ b1 + b2


WRONG_FUNCTIONS = [
    ("layer_shapes", shapes_rows_are_inputs, ("weight-rows-are-inputs",), ""),
    ("layer_shapes", shapes_bias_per_input, ("bias-per-input",), ""),
    ("layer_shapes", shapes_batch_in_weights, ("batch-changes-weights",), "same for every observation"),
    ("layer_shapes", shapes_one_neuron, ("layer-is-one-neuron",), ""),
    ("linear_forward", forward_rows_are_inputs, ("weight-rows-are-inputs",), "X @ W.T + b"),
    ("linear_forward", forward_without_bias, ("missing-bias",), ""),
    ("linear_forward", forward_with_relu, (), "affine"),
    ("linear_forward", forward_mutating, (), "modified its input b"),
    ("linear_forward", forward_returns_input, (), "returned its input X"),
    ("linear_forward", forward_float32, (), "float32"),
    ("linear_forward", forward_one_neuron, ("layer-is-one-neuron",), ""),
    ("relu", np.abs, (), "change sign"),
    ("relu", lambda Z: np.maximum(Z, 0, out=Z), (), "in place"),
    ("relu", lambda Z: Z, (), "returned its input"),
    ("relu", lambda Z: Z > 0, (), "boolean"),
    ("to_torch_linear", torch_transposed, ("weight-rows-are-inputs",), ""),
    ("to_torch_linear", torch_without_bias, ("missing-bias",), ""),
    ("to_torch_linear", torch_bias_not_copied, (), "copy b"),
    ("to_torch_linear", torch_returns_weight, (), "not its weight"),
    ("find_mismatch", mismatch_first_axis, (), "last axis"),
    ("find_mismatch", mismatch_negative_axis, (), "non-negative index"),
    ("find_mismatch", mismatch_swapped, (), "order"),
    ("find_mismatch", mismatch_bool, (), "return None"),
    ("collapse_affine", collapse_without_first_bias, ("missing-bias",), "W2 @ b1 + b2"),
    ("collapse_affine", collapse_without_second_bias, ("missing-bias",), ""),
    ("collapse_affine", collapse_with_relu, ("stacked-affine-is-nonlinear",), ""),
    ("collapse_affine", collapse_refuses, (), "expected a tuple (W, b), but got None"),
    ("collapse_affine", collapse_keeps_both, ("stacked-affine-is-nonlinear",), ""),
    ("collapse_affine", collapse_transposed, ("weight-rows-are-inputs",), ""),
]


@pytest.mark.parametrize(
    "part, function, codes, text",
    WRONG_FUNCTIONS,
    ids=[f"{p}-{getattr(f, '__name__', 'fn')}-{i}" for i, (p, f, _, _) in enumerate(WRONG_FUNCTIONS)],
)
@pytest.mark.parametrize("seed", [0, 5])
def test_wrong_models_score_zero_with_their_code(grade, part, function, codes, text, seed):
    assert_zero(grade(A, part, LocalFunction(function, part), seed), *codes, text=text)


@pytest.mark.parametrize(
    "part, value, codes",
    [
        ("z2_by_hand", 2.5, ("missing-bias",)),
        ("z2_by_hand", -0.75, ("weight-rows-are-inputs",)),
        ("z2_by_hand", 0.25, ("weight-rows-are-inputs", "missing-bias")),
        ("z2_by_hand", -1.5, ()),
        ("z2_by_hand", [2.0, 1.5, -1.5], ()),
        ("z2_by_hand", 1.5 + 1e-6, ()),
        ("z2_by_hand", True, ()),
        ("x2_for_zero_output", 3, ("missing-bias",)),
        ("x2_for_zero_output", -4, ()),
        ("x2_for_zero_output", 0, ()),
        ("x2_for_zero_output", 4.0001, ()),
        ("x2_for_zero_output", float("nan"), ()),
        ("x2_for_zero_output", "4", ()),
    ],
)
def test_wrong_values_score_zero(grade, part, value, codes):
    assert_zero(grade(A, part, local_value(value)), *codes)


def test_returning_none_is_not_taken_for_a_belief_about_stacked_layers(grade):
    assert grade(A, "collapse_affine", LocalFunction(collapse_refuses)).misconceptions == ()


def test_a_batch_size_equal_to_a_layer_size_is_not_blamed_on_the_batch():
    transposed = {"x": (1, 73), "W": (73, 1), "b": (1,), "z": (1, 1)}
    assert _layer_shape_codes(transposed, 73, 1, 1) == ["weight-rows-are-inputs"]
    assert "batch-changes-weights" in _layer_shape_codes({**transposed, "W": (5, 1, 73)}, 73, 1, 5)


def test_the_whole_vector_as_a_tensor_is_recognised(grade):
    result = grade(A, "z2_by_hand", local_value(torch.tensor([2.0, 1.5, -1.5], dtype=torch.float64)))
    assert_zero(result, text="not the whole vector")


def test_relu_applied_inside_linear_forward_is_called_out(grade):
    result = grade(A, "linear_forward", LocalFunction(forward_with_relu))
    assert "activation is a separate step" in result.feedback


# ---------------------------------------------------------------------------- hostile answers


@pytest.mark.parametrize("part", ["z2_by_hand", "x2_for_zero_output"])
def test_hostile_values_score_zero(grade, part, hostile_value):
    label, make = hostile_value
    assert_zero(grade(A, part, local_value(make())))


def nan_version(function):
    def answer(*args):
        value = np.array(function(*args), dtype=float)
        value.flat[0] = np.nan
        return value

    return answer


@pytest.mark.parametrize("part", ["linear_forward", "relu"])
def test_nan_outputs_score_zero(grade, part):
    assert_zero(grade(A, part, LocalFunction(nan_version(getattr(ref, part)))), text="NaN")


def test_nan_inside_collapsed_layer_scores_zero(grade):
    def answer(W1, b1, W2, b2):
        W, b = ref.collapse_affine(W1, b1, W2, b2)
        return W, b * np.nan

    assert_zero(grade(A, "collapse_affine", LocalFunction(answer)), text="NaN")


def test_nan_weights_in_torch_layer_score_zero(grade):
    def answer(W, b):
        layer = ref.to_torch_linear(W, b)
        with torch.no_grad():
            layer.weight[0, 0] = float("nan")
        return layer

    assert_zero(grade(A, "to_torch_linear", LocalFunction(answer)), text="NaN")


@pytest.mark.parametrize("part", FUNCTION_PARTS)
def test_system_exit_is_contained(grade, part):
    assert_zero(grade(A, part, LocalFunction(lambda *args: sys.exit(3), part)), text="SystemExit")


def test_lying_layer_like_object_is_not_a_linear(grade):
    class FakeLinear:
        in_features, out_features = 3, 3
        weight = torch.zeros(3, 3)
        bias = None

    assert_zero(grade(A, "to_torch_linear", LocalFunction(lambda W, b: FakeLinear())), text="torch.nn.Linear")


def test_subclassed_linear_is_not_accepted(grade):
    class MyLinear(torch.nn.Linear):
        pass

    def answer(W, b):
        layer = MyLinear(W.shape[1], W.shape[0])
        with torch.no_grad():
            layer.weight.copy_(torch.tensor(W))
            layer.bias.copy_(torch.tensor(b))
        return layer

    assert_zero(grade(A, "to_torch_linear", LocalFunction(answer)))


def test_layer_shapes_with_non_int_entries_scores_zero(grade):
    def answer(d_in, d_out, batch=None):
        shapes = ref.layer_shapes(d_in, d_out, batch)
        return {**shapes, "W": (float(d_out), float(d_in))}

    assert_zero(grade(A, "layer_shapes", LocalFunction(answer)), text="tuple of integers")


def test_layer_shapes_missing_key_is_named(grade):
    def answer(d_in, d_out, batch=None):
        shapes = ref.layer_shapes(d_in, d_out, batch)
        del shapes["z"]
        return shapes

    assert_zero(grade(A, "layer_shapes", LocalFunction(answer)), text="'z'")


def test_linear_forward_feedback_gives_shapes_not_the_whole_answer(grade):
    def off_by_one(X, W, b):
        Z = X @ W.T + b
        Z[..., -1] += 1.0
        return Z

    result = grade(A, "linear_forward", LocalFunction(off_by_one))
    assert_zero(result, text="first difference")
    assert "shape" in result.feedback


def test_torch_sizes_are_refused_with_a_way_out(grade):
    def answer(d_in, d_out, batch=None):
        return {key: torch.Size(shape) for key, shape in ref.layer_shapes(d_in, d_out, batch).items()}

    assert_zero(
        grade(A, "layer_shapes", LocalFunction(answer)), text="torch.Size. Convert it with tuple(...)"
    )
