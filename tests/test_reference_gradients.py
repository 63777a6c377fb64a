"""The assignment-03 reference against torch autograd (float64) and the chapter's statements."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.reference.gradients import linear_backward, numerical_gradient, rel_error

SIZES = st.sampled_from([1, 2, 3, 7, 73])
SHAPES = st.sampled_from([(1,), (7,), (2, 3), (1, 7), (3, 1, 2), (73,)])


def autograd_linear(G, X, W, b):
    """dL/dX, dL/dW, dL/db from torch for L = sum(G * (X @ W.T + b))."""
    X_t, W_t, b_t = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (X, W, b))
    Z = X_t @ W_t.T + b_t
    (Z * torch.tensor(G, dtype=torch.float64)).sum().backward()
    return X_t.grad.numpy(), W_t.grad.numpy(), b_t.grad.numpy()


@settings(max_examples=30, deadline=None)
@given(B=SIZES, d_in=SIZES, d_out=SIZES, seed=st.integers(0, 2**32 - 1))
def test_linear_backward_matches_autograd(B, d_in, d_out, seed):
    rng = np.random.default_rng(seed)
    G, X, W, b = (rng.standard_normal(s) for s in ((B, d_out), (B, d_in), (d_out, d_in), (d_out,)))
    dX, dW, db = linear_backward(G, X, W)
    tX, tW, tb = autograd_linear(G, X, W, b)
    assert dX.shape == X.shape == (B, d_in)
    assert dW.shape == W.shape == (d_out, d_in)
    assert db.shape == b.shape == (d_out,)
    np.testing.assert_allclose(dX, tX, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dW, tW, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(db, tb, rtol=1e-12, atol=1e-12)


def test_linear_backward_leaves_inputs_unchanged():
    rng = np.random.default_rng(3)
    G, X, W = rng.standard_normal((7, 73)), rng.standard_normal((7, 3)), rng.standard_normal((73, 3))
    copies = [a.copy() for a in (G, X, W)]
    linear_backward(G, X, W)
    for array, copy in zip((G, X, W), copies):
        np.testing.assert_array_equal(array, copy)


def test_chapter_network_gradients_and_shapes():
    """The chapter's 3 -> 3 -> 1 network on its two-row batch: dL/dW = G^T X has W's shape."""
    torch.manual_seed(0)
    network = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1)).double()
    with torch.no_grad():
        network[0].weight.copy_(torch.tensor([[0.5, -1.0, 2.0], [-0.25, 0.5, 1.0], [1.0, 0.25, -0.5]]))
        network[0].bias.copy_(torch.tensor([3.0, -1.0, -4.0]))
    x_batch = torch.tensor([[2.0, 4.0, 1.0], [1.0, 0.0, 2.0]], dtype=torch.float64)
    hidden_pre = network[0](x_batch)
    hidden = torch.relu(hidden_pre)
    scores = network[2](hidden)
    loss = (scores**2).mean()
    loss.backward()

    W1, W2 = (network[i].weight.detach().numpy() for i in (0, 2))
    G2 = (2 * scores / scores.numel()).detach().numpy()
    dH, dW2, db2 = linear_backward(G2, hidden.detach().numpy(), W2)
    G1 = dH * (hidden_pre.detach().numpy() > 0)
    _, dW1, db1 = linear_backward(G1, x_batch.numpy(), W1)

    expected_shapes = {"0.weight": (3, 3), "0.bias": (3,), "2.weight": (1, 3), "2.bias": (1,)}
    mine = {"0.weight": dW1, "0.bias": db1, "2.weight": dW2, "2.bias": db2}
    for name, parameter in network.named_parameters():
        assert tuple(parameter.grad.shape) == tuple(parameter.shape) == expected_shapes[name]
        assert mine[name].shape == expected_shapes[name]
        np.testing.assert_allclose(mine[name], parameter.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_weight_gradient_has_shape_d_out_by_d_in():
    """G^T X is (d_out x B)(B x d_in) = d_out x d_in, whatever the batch size."""
    for B in (1, 7, 73):
        G, X, W = np.ones((B, 5)), np.ones((B, 3)), np.ones((5, 3))
        assert linear_backward(G, X, W)[1].shape == (5, 3)


@pytest.mark.parametrize(
    "G, X, W, message",
    [
        (np.ones((2, 5)), np.ones((2, 3)), np.ones((5, 4)), r"W \(5, 4\)"),
        (np.ones((3, 5)), np.ones((2, 3)), np.ones((5, 3)), r"G has shape \(3, 5\)"),
        (np.ones((2, 4)), np.ones((2, 3)), np.ones((5, 3)), "same B, d_in and d_out"),
        (np.ones(5), np.ones((1, 3)), np.ones((5, 3)), "G must be 2-D"),
        (np.ones((1, 5)), np.full((1, 3), np.nan), np.ones((5, 3)), "X contains NaN"),
    ],
)
def test_linear_backward_names_inputs_that_do_not_fit(G, X, W, message):
    with pytest.raises(ValueError, match=message):
        linear_backward(G, X, W)


def smooth_loss_pair(rng, shape):
    """A numpy loss and the same loss in torch: sum(w * sin(x)) + 0.5 * sum(x * (A @ x))."""
    n = int(np.prod(shape))
    w, A = rng.standard_normal(shape), rng.standard_normal((n, n))

    def numpy_loss(x):
        flat = x.reshape(-1)
        return float(np.sum(w * np.sin(x)) + 0.5 * flat @ A @ flat)

    def torch_gradient(x):
        x_t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        flat = x_t.reshape(-1)
        value = (torch.tensor(w) * torch.sin(x_t)).sum() + 0.5 * flat @ torch.tensor(A) @ flat
        value.backward()
        return x_t.grad.numpy()

    return numpy_loss, torch_gradient


@settings(max_examples=25, deadline=None)
@given(shape=SHAPES, seed=st.integers(0, 2**32 - 1))
def test_numerical_gradient_matches_autograd(shape, seed):
    rng = np.random.default_rng(seed)
    loss, torch_gradient = smooth_loss_pair(rng, shape)
    x = rng.uniform(-2, 2, size=shape)
    before = x.copy()
    estimate = numerical_gradient(loss, x)
    np.testing.assert_array_equal(x, before)
    assert estimate.shape == x.shape and estimate.dtype == np.float64
    np.testing.assert_allclose(estimate, torch_gradient(x), rtol=1e-6, atol=1e-6)


def test_numerical_gradient_is_second_order_accurate():
    x = np.array([0.3, -1.1, 2.0])
    errors = [
        np.max(np.abs(numerical_gradient(lambda v: float(np.sum(np.sin(v))), x, h) - np.cos(x)))
        for h in (1e-2, 1e-3)
    ]
    assert 50 < errors[0] / errors[1] < 200


def test_numerical_gradient_accepts_integer_points_and_does_not_keep_a_view():
    x = np.array([[1, 2], [3, 4]])
    seen = []
    estimate = numerical_gradient(lambda v: (seen.append(v), float(np.sum(v**2)))[1], x)
    np.testing.assert_allclose(estimate, 2 * x, atol=1e-6)
    assert x.dtype.kind == "i" and np.array_equal(x, [[1, 2], [3, 4]])
    assert all(v is not x for v in seen)


@settings(max_examples=40, deadline=None)
@given(shape=SHAPES, seed=st.integers(0, 2**32 - 1))
def test_rel_error_is_symmetric_bounded_and_zero_on_equal(shape, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal(shape), rng.standard_normal(shape)
    assert rel_error(a, b) == rel_error(b, a)
    assert 0.0 <= rel_error(a, b) <= 1.0
    assert rel_error(a, a) == 0.0
    expected = max(abs(p - q) / (abs(p) + abs(q)) for p, q in zip(a.ravel(), b.ravel()))
    assert rel_error(a, b) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (np.zeros((2, 3)), np.zeros((2, 3)), 0.0),
        (np.zeros(0), np.zeros(0), 0.0),
        ([0.0, 2.0, -1.0], [0.0, 2.5, -1.0], 0.5 / 4.5),
        ([1.5], [-1.5], 1.0),
        ([0.0], [1e-300], 1.0),
        (3.0, 3.0, 0.0),
        ([1e6, 2.0], [1e6 + 1, 2.0], 1 / (2e6 + 1)),
    ],
)
def test_rel_error_on_edge_cases(a, b, expected):
    assert rel_error(a, b) == pytest.approx(expected, rel=1e-12, abs=0)
    assert rel_error(b, a) == rel_error(a, b)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: numerical_gradient(None, np.ones(2)), "f must be a function"),
        (lambda: numerical_gradient(np.sum, {"x": 1}), "x must be an array"),
        (lambda: numerical_gradient(np.sum, np.ones(2), 0), "h must be a finite positive number"),
        (lambda: numerical_gradient(np.sum, np.ones(2), None), "h must be a positive number"),
        (lambda: rel_error(np.array([np.nan]), np.ones(1)), "a contains NaN"),
        (lambda: rel_error(np.ones(1), object()), "b must be an array of real numbers"),
    ],
)
def test_bad_gradient_inputs_get_a_value_error_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_rel_error_rejects_different_shapes():
    with pytest.raises(ValueError, match=r"\(3,\).*\(2,\)"):
        rel_error(np.zeros(3), np.zeros(2))
