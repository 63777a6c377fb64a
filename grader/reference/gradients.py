"""Reference solutions for assignment 03: the backward pass of a dense layer and gradient checking.

The layer computes Z = X @ W.T + b with X of shape (B, d_in), W of shape (d_out, d_in)
(PyTorch's (out, in) orientation) and b of shape (d_out,). G = dL/dZ has Z's shape (B, d_out).
"""

from __future__ import annotations

import numpy as np

from grader.reference.validation import float_array, positive_number


def linear_backward(G: np.ndarray, X: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of a loss L through Z = X @ W.T + b, given G = dL/dZ.

    Inputs:
    - G: upstream gradient dL/dZ, shape (B, d_out).
    - X: layer input, shape (B, d_in).
    - W: weights, shape (d_out, d_in).

    Returns a tuple (dX, dW, db):
    - dX: dL/dX = G @ W, shape (B, d_in).
    - dW: dL/dW = G.T @ X, shape (d_out, d_in), the shape of W.
    - db: dL/db = G summed over the batch, shape (d_out,), the shape of b.
    The inputs are not modified. Raises ValueError naming the argument when an input is not a
    finite 2-D array or the shapes do not fit together.
    """
    G, X, W = (float_array(array, name, ndims=(2,)) for array, name in ((G, "G"), (X, "X"), (W, "W")))
    if X.shape[1] != W.shape[1] or G.shape != (X.shape[0], W.shape[0]):
        raise ValueError(
            f"G has shape {G.shape}, X {X.shape} and W {W.shape}: expected G (B, d_out), X (B, d_in) "
            "and W (d_out, d_in) with the same B, d_in and d_out"
        )
    return G @ W, G.T @ X, G.sum(axis=0)


def numerical_gradient(f, x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Estimate the gradient of a scalar function by central differences.

    Inputs:
    - f: a function taking an array of x's shape and returning a float.
    - x: the point, an array of any shape (D1, ..., Dk); it is left unchanged.
    - h: the step added to and subtracted from one entry at a time, a positive number.

    Returns an array of x's shape (float64) whose entry i is (f(x + h e_i) - f(x - h e_i)) / (2h).
    The error is O(h^2) from truncation plus O(eps * |f| / h) from rounding.
    """
    if not callable(f):
        raise ValueError(f"f must be a function of x, got {type(f).__name__}")
    point = float_array(x, "x").copy()
    h = positive_number(h, "h")
    gradient = np.zeros_like(point)
    for index in np.ndindex(point.shape):
        original = point[index]
        point[index] = original + h
        f_plus = float(f(point))
        point[index] = original - h
        f_minus = float(f(point))
        point[index] = original
        gradient[index] = (f_plus - f_minus) / (2 * h)
    return gradient


def rel_error(a: np.ndarray, b: np.ndarray) -> float:
    """The largest elementwise relative difference between two arrays of the same shape.

    rel_error(a, b) = max over entries i of |a_i - b_i| / max(|a_i| + |b_i|, tiny),
    with tiny = the smallest positive normal float64 (about 2.2e-308).

    Inputs:
    - a, b: arrays (or numbers) of the same shape S.

    Returns a float in [0, 1]: symmetric in a and b, 0 when they are equal (also where both
    are 0, and for empty arrays), 1 where one entry is 0 and the other is not or where the
    signs are opposite. Raises ValueError when the shapes differ or an entry is not a finite number.
    """
    a, b = float_array(a, "a"), float_array(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"rel_error needs arrays of the same shape, got {a.shape} and {b.shape}")
    if a.size == 0:
        return 0.0
    scale = np.maximum(np.abs(a) + np.abs(b), np.finfo(np.float64).tiny)
    return float(np.max(np.abs(a - b) / scale))
