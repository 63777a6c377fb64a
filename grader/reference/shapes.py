"""Reference solutions for assignment 01: the shapes and the forward pass of a dense layer.

Weights use PyTorch's orientation throughout: W has one row per output unit and one column per
input feature, shape (d_out, d_in), and a batch X of shape (B, d_in) maps to Z = X @ W.T + b.
All arithmetic is NumPy float64.
"""

from __future__ import annotations

import numpy as np

from grader.reference.validation import float_array, positive_int, whole_number


def layer_shapes(d_in: int, d_out: int, batch: int | None = None) -> dict[str, tuple[int, ...]]:
    """The shapes of a dense layer's input, weights, bias and pre-activation.

    Inputs:
    - d_in: number of input features, a positive int.
    - d_out: number of output units, a positive int.
    - batch: number of observations B, or None for a single observation.

    Returns a dict with keys "x", "W", "b", "z" mapping to shape tuples:
    - batch None: x (d_in,), W (d_out, d_in), b (d_out,), z (d_out,)
    - batch B:    x (B, d_in), W (d_out, d_in), b (d_out,), z (B, d_out)
    The batch size never changes W or b: every observation reuses the same parameters.
    """
    d_in = positive_int(d_in, "d_in")
    d_out = positive_int(d_out, "d_out")
    leading = () if batch is None else (positive_int(batch, "batch"),)
    return {"x": leading + (d_in,), "W": (d_out, d_in), "b": (d_out,), "z": leading + (d_out,)}


def linear_forward(X, W, b) -> np.ndarray:
    """The affine part of a dense layer, for one observation or a batch.

    Inputs:
    - X: inputs of shape (B, d_in), or one observation of shape (d_in,).
    - W: weights of shape (d_out, d_in); row j holds output unit j's weights.
    - b: biases of shape (d_out,), one per output unit, shared by every observation.

    Returns:
    - Z: a new float64 array of shape (B, d_out), or (d_out,) for a 1-D X; Z = X @ W.T + b.
      No activation is applied. The inputs are not modified.
    """
    X = float_array(X, "X", (1, 2))
    W = float_array(W, "W", (2,))
    b = float_array(b, "b", (1,))
    if b.shape[0] != W.shape[0]:
        raise ValueError(
            f"b has shape {b.shape} but W has shape {W.shape}: expected one bias per row of W, "
            f"shape ({W.shape[0]},)"
        )
    if X.shape[-1] != W.shape[1]:
        raise ValueError(
            f"X has shape {X.shape} but W has shape {W.shape}: the last axis of X must equal "
            f"W's number of columns (d_in = {W.shape[1]})"
        )
    return X @ W.T + b


def relu(Z) -> np.ndarray:
    """The rectified linear unit, element by element.

    Inputs:
    - Z: pre-activations, an array of any shape.

    Returns:
    - H: a new float64 array of Z's shape with H = max(Z, 0); Z is not modified.
    """
    Z = float_array(Z, "Z")
    return np.maximum(Z, 0.0)


def to_torch_linear(W, b, dtype=None):
    """A torch.nn.Linear holding copies of the given weights and biases.

    Inputs:
    - W: weights of shape (d_out, d_in), PyTorch's (out_features, in_features) orientation.
    - b: biases of shape (d_out,), or None for a layer without bias.
    - dtype: the torch dtype of the layer's parameters; torch.float32 when None.

    Returns:
    - layer: nn.Linear(d_in, d_out) with layer.weight of shape (d_out, d_in) equal to W and
      layer.bias of shape (d_out,) equal to b (up to the precision of `dtype`).
    """
    import torch  # 2 s measured: paid by this conversion, not by every importer

    W = float_array(W, "W", (2,))
    if b is not None:
        b = float_array(b, "b", (1,))
        if b.shape[0] != W.shape[0]:
            raise ValueError(
                f"b has shape {b.shape} but W has shape {W.shape}: expected shape ({W.shape[0]},)"
            )
    dtype = torch.float32 if dtype is None else dtype
    d_out, d_in = W.shape
    layer = torch.nn.Linear(d_in, d_out, bias=b is not None, dtype=dtype)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(W))
        if b is not None:
            layer.bias.copy_(torch.from_numpy(b))
    return layer


def collapse_affine(W1, b1, W2, b2) -> tuple[np.ndarray, np.ndarray]:
    """The single affine layer equal to two affine layers applied in turn, with nothing between.

    Inputs:
    - W1: first layer's weights, shape (d_hidden, d_in).
    - b1: first layer's biases, shape (d_hidden,).
    - W2: second layer's weights, shape (d_out, d_hidden).
    - b2: second layer's biases, shape (d_out,).

    Returns a tuple (W, b):
    - W: shape (d_out, d_in), W = W2 @ W1.
    - b: shape (d_out,), b = W2 @ b1 + b2.
    so that W @ x + b == W2 @ (W1 @ x + b1) + b2 for every x of shape (d_in,).
    """
    W1 = float_array(W1, "W1", (2,))
    b1 = float_array(b1, "b1", (1,))
    W2 = float_array(W2, "W2", (2,))
    b2 = float_array(b2, "b2", (1,))
    if b1.shape[0] != W1.shape[0]:
        raise ValueError(f"b1 has shape {b1.shape} but W1 has shape {W1.shape}: expected ({W1.shape[0]},)")
    if W2.shape[1] != W1.shape[0]:
        raise ValueError(
            f"W2 has shape {W2.shape} but W1 has shape {W1.shape}: W2 needs {W1.shape[0]} columns, "
            f"one per output of the first layer"
        )
    if b2.shape[0] != W2.shape[0]:
        raise ValueError(f"b2 has shape {b2.shape} but W2 has shape {W2.shape}: expected ({W2.shape[0]},)")
    return W2 @ W1, W2 @ b1 + b2


def find_mismatch(input_shape, in_features: int) -> tuple[int, int, int] | None:
    """Whether an input of shape `input_shape` fits a layer built with `in_features` inputs.

    A dense layer reads the last axis of its input as the features; every leading axis (batch,
    sequence positions, ...) is carried through unchanged.

    Inputs:
    - input_shape: the input tensor's shape, a non-empty tuple of non-negative ints, e.g. (32, 10).
    - in_features: the layer's in_features, a positive int.

    Returns:
    - None when input_shape[-1] == in_features; otherwise the tuple
      (axis, got, expected) = (len(input_shape) - 1, input_shape[-1], in_features),
      e.g. find_mismatch((32, 10), 12) == (1, 10, 12).
    """
    if isinstance(input_shape, (str, bytes)) or not hasattr(input_shape, "__len__"):
        raise ValueError(
            f"input_shape must be a tuple of ints, got {type(input_shape).__name__} {input_shape!r}"
        )
    if len(input_shape) == 0:
        raise ValueError("input_shape must have at least one axis (the features), got ()")
    dims = [whole_number(size, f"input_shape[{axis}]", minimum=0) for axis, size in enumerate(input_shape)]
    in_features = positive_int(in_features, "in_features")
    if dims[-1] == in_features:
        return None
    return (len(dims) - 1, dims[-1], in_features)
