"""The reference for assignment 01 reproduces the course's numbers and agrees with PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.reference.shapes import (
    collapse_affine,
    find_mismatch,
    layer_shapes,
    linear_forward,
    relu,
    to_torch_linear,
)

RUNNING_X = np.array([2.0, 4.0, 1.0])
RUNNING_W = np.array([[0.5, -1.0, 2.0], [-0.25, 0.5, 1.0], [1.0, 0.25, -0.5]])
RUNNING_B = np.array([3.0, -1.0, -4.0])

sizes = st.sampled_from([1, 2, 3, 7, 13, 73])


def test_running_example_pre_activation_and_relu():
    z = linear_forward(RUNNING_X, RUNNING_W, RUNNING_B)
    np.testing.assert_allclose(z, [2.0, 1.5, -1.5], rtol=0, atol=1e-12)
    np.testing.assert_allclose(relu(z), [2.0, 1.5, 0.0], rtol=0, atol=0)
    assert z[1] == 1.5  # exercise 4: the second pre-activation by hand


def test_running_example_batch_rows_match_single_inputs():
    X = np.array([[2.0, 4.0, 1.0], [1.0, 0.0, 2.0]])
    Z = linear_forward(X, RUNNING_W, RUNNING_B)
    assert Z.shape == (2, 3)
    np.testing.assert_allclose(Z[0], [2.0, 1.5, -1.5], atol=1e-12)
    np.testing.assert_allclose(Z[1], [7.5, 0.75, -4.0], atol=1e-12)


def test_two_layer_score_is_0_4():
    hidden = relu(linear_forward(RUNNING_X, RUNNING_W, RUNNING_B))
    score = linear_forward(hidden, np.array([[0.6, -0.4, 1.2]]), np.array([-0.2]))
    assert score.shape == (1,)
    assert score[0] == pytest.approx(0.4, abs=1e-12)


def test_robot_arm_layer_of_seed_001():
    W = np.array([[-2.0, 1.5, 0.8], [2.0, -1.0, 0.0], [0.0, 2.0, -1.5], [-1.0, -1.0, 1.0]])
    b = np.array([0.5, 0.2, -0.4, 0.3])
    sums = linear_forward(np.array([0.42, 0.55, 0.30]), W, b)
    np.testing.assert_allclose(sums, [0.725, 0.490, 0.250, -0.370], atol=1e-12)
    np.testing.assert_allclose(relu(sums), [0.725, 0.490, 0.250, 0.0], atol=1e-12)


def test_worked_example_of_seed_003():
    X = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]])
    W = np.array([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]])
    b = np.array([0.05, -0.1])
    Z = linear_forward(X, W, b)
    assert Z[0, 0] == pytest.approx(-0.15, abs=1e-12)
    np.testing.assert_allclose(relu(Z), [[0.0, 0.9], [0.15, 0.05]], atol=1e-12)


def test_seed_004_layer_and_the_x2_that_zeroes_y1():
    W = np.array([[2.0, -1.0, 0.5], [0.0, 1.0, 1.0]])
    b = np.array([1.0, -2.0])
    np.testing.assert_allclose(linear_forward(np.array([1.0, 3.0, 2.0]), W, b), [1.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(
        linear_forward(np.array([[1.0, 3.0, 2.0], [0.0, 0.0, 0.0]]), W, b),
        [[1.0, 3.0], [1.0, -2.0]],
        atol=1e-12,
    )
    y1 = lambda x2: linear_forward(np.array([1.0, x2, 2.0]), W, b)[0]  # noqa: E731  (affine in x2)
    slope = y1(1.0) - y1(0.0)
    x2_zero = -y1(0.0) / slope
    assert x2_zero == 4.0
    assert y1(x2_zero) == 0.0


def test_layer_shapes_for_exercises_1_and_2():
    assert layer_shapes(4, 6) == {"x": (4,), "W": (6, 4), "b": (6,), "z": (6,)}
    assert layer_shapes(4, 6, 32) == {"x": (32, 4), "W": (6, 4), "b": (6,), "z": (32, 6)}
    assert layer_shapes(np.int64(7), 73, batch=1) == {"x": (1, 7), "W": (73, 7), "b": (73,), "z": (1, 73)}


@pytest.mark.parametrize(
    "args, name",
    [
        ((0, 3), "d_in"),
        ((3, -1), "d_out"),
        ((3, 2, 0), "batch"),
        ((2.5, 3), "d_in"),
        ((True, 3), "d_in"),
        ((3, 3, "8"), "batch"),
    ],
)
def test_layer_shapes_rejects_bad_sizes_by_name(args, name):
    with pytest.raises(ValueError, match=name):
        layer_shapes(*args)


@settings(max_examples=30, deadline=None)
@given(batch=sizes, d_in=sizes, d_out=sizes, seed=st.integers(0, 2**32 - 1))
def test_linear_forward_and_to_torch_linear_agree_with_torch_in_float64(batch, d_in, d_out, seed):
    rng = np.random.default_rng(seed)
    X, W, b = rng.normal(size=(batch, d_in)), rng.normal(size=(d_out, d_in)), rng.normal(size=d_out)
    copies = [X.copy(), W.copy(), b.copy()]
    expected = torch.nn.functional.linear(
        torch.from_numpy(X), torch.from_numpy(W), torch.from_numpy(b)
    ).numpy()
    Z = linear_forward(X, W, b)
    assert Z.shape == layer_shapes(d_in, d_out, batch)["z"]
    np.testing.assert_allclose(Z, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(linear_forward(X[0], W, b), expected[0], rtol=1e-12, atol=1e-12)
    for original, copy in zip((X, W, b), copies):
        np.testing.assert_array_equal(original, copy)

    layer = to_torch_linear(W, b, dtype=torch.float64)
    assert (layer.in_features, layer.out_features) == (d_in, d_out)
    assert tuple(layer.weight.shape) == (d_out, d_in)
    with torch.no_grad():
        np.testing.assert_allclose(layer(torch.from_numpy(X)).numpy(), Z, rtol=1e-12, atol=1e-12)


def test_to_torch_linear_defaults_to_float32_copies():
    layer = to_torch_linear(RUNNING_W, RUNNING_B)
    assert isinstance(layer, torch.nn.Linear)
    assert layer.weight.dtype == torch.float32
    assert tuple(layer.weight.shape) == (3, 3) and tuple(layer.bias.shape) == (3,)
    np.testing.assert_array_equal(layer.weight.detach().numpy(), RUNNING_W.astype(np.float32))
    with torch.no_grad():
        out = torch.relu(layer(torch.tensor(RUNNING_X, dtype=torch.float32))).numpy()
    np.testing.assert_allclose(out, [2.0, 1.5, 0.0], atol=1e-6)
    W = RUNNING_W.copy()
    copied = to_torch_linear(W, RUNNING_B, dtype=torch.float64)
    W[0, 0] = 99.0
    assert copied.weight[0, 0].item() == 0.5  # a copy, not a view of W
    assert to_torch_linear(RUNNING_W[:2], None).bias is None


def test_relu_returns_a_new_array_and_keeps_the_shape():
    Z = np.array([[-1.0, 0.0, 2.5], [3.0, -0.5, -7.0]])
    H = relu(Z)
    np.testing.assert_array_equal(H, [[0.0, 0.0, 2.5], [3.0, 0.0, 0.0]])
    assert H is not Z and Z[0, 0] == -1.0
    assert relu(np.array(-2.0)).shape == ()


def test_linear_forward_names_the_mismatched_argument():
    with pytest.raises(ValueError, match=r"X has shape \(2, 4\).*W has shape \(3, 3\)"):
        linear_forward(np.ones((2, 4)), RUNNING_W, RUNNING_B)
    with pytest.raises(ValueError, match=r"b has shape \(2,\)"):
        linear_forward(RUNNING_X, RUNNING_W, np.ones(2))
    with pytest.raises(ValueError, match="W must be 2-D"):
        linear_forward(RUNNING_X, RUNNING_B, RUNNING_B)
    with pytest.raises(ValueError, match="NaN"):
        linear_forward(np.array([np.nan, 1.0, 2.0]), RUNNING_W, RUNNING_B)


@settings(max_examples=30, deadline=None)
@given(d_in=sizes, hidden=sizes, d_out=sizes, seed=st.integers(0, 2**32 - 1))
def test_collapse_affine_reproduces_the_two_layer_composition(d_in, hidden, d_out, seed):
    rng = np.random.default_rng(seed)
    W1, b1 = rng.normal(size=(hidden, d_in)), rng.normal(size=hidden)
    W2, b2 = rng.normal(size=(d_out, hidden)), rng.normal(size=d_out)
    W, b = collapse_affine(W1, b1, W2, b2)
    assert W.shape == (d_out, d_in) and b.shape == (d_out,)
    X = rng.normal(size=(5, d_in))
    two_layers = linear_forward(linear_forward(X, W1, b1), W2, b2)
    np.testing.assert_allclose(linear_forward(X, W, b), two_layers, rtol=1e-10, atol=1e-10)


def test_collapse_affine_rejects_layers_that_do_not_chain():
    with pytest.raises(ValueError, match="W2"):
        collapse_affine(np.ones((4, 3)), np.ones(4), np.ones((2, 5)), np.ones(2))


@pytest.mark.parametrize(
    "shape, in_features, expected",
    [
        ((32, 10), 12, (1, 10, 12)),
        ((32, 12), 12, None),
        ((10,), 12, (0, 10, 12)),
        ((12,), 12, None),
        ((8, 7, 73), 73, None),
        ((8, 7, 73), 7, (2, 73, 7)),
        ((12, 10), 12, (1, 10, 12)),
        ([0, 5], 5, None),
    ],
)
def test_find_mismatch(shape, in_features, expected):
    assert find_mismatch(shape, in_features) == expected


@pytest.mark.parametrize(
    "shape, in_features, name",
    [
        ((), 3, "at least one axis"),
        ((3, -1), 3, r"input_shape\[1\]"),
        ("32", 3, "input_shape"),
        ((3, 2.0), 3, r"input_shape\[1\]"),
        ((3, 4), 0, "in_features"),
    ],
)
def test_find_mismatch_rejects_bad_input(shape, in_features, name):
    with pytest.raises(ValueError, match=name):
        find_mismatch(shape, in_features)
