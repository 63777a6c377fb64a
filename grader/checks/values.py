"""Strict readers for decoded answers: each returns a clean value or raises WrongAnswer."""

from __future__ import annotations

import math

import numpy as np

from grader.checks.base import WrongAnswer
from grader.codec import LinearData, TensorData, Unsupported

MAX_ELEMENTS = 10_000_000


def describe(value) -> str:
    """A short phrase naming what a student returned."""
    if value is None:
        return "None"
    if type(value) is Unsupported:
        return value.describe()
    if type(value) is np.ndarray:
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if type(value) is TensorData:
        return f"a tensor of shape {tuple(value.array.shape)} and dtype {value.dtype}"
    if type(value) is LinearData:
        return f"nn.Linear({value.in_features}, {value.out_features})"
    if type(value) in (list, tuple, dict):
        return f"a {type(value).__name__} of length {len(value)}"
    if type(value) is str:
        return f"the string {value[:60]!r}" + ("..." if len(value) > 60 else "")
    return f"the {type(value).__name__} {str(value)[:60]}"


def _numbers(value, what: str):
    """Nested lists/tuples of real numbers -> float ndarray, checking every element's type."""
    if type(value) in (int, float):
        return np.array(float(value))
    if type(value) in (list, tuple):
        items = [_numbers(item, what) for item in value]
        if len({item.shape for item in items}) > 1:
            raise WrongAnswer(f"{what} is a ragged nested list, not a rectangular array.")
        return np.array(items, dtype=float) if items else np.zeros((0,))
    raise WrongAnswer(f"{what} should contain only numbers, but contains {describe(value)}.")


def as_array(value, what: str, shape: tuple | None = None, allow_tensor: bool = True) -> np.ndarray:
    """A finite float64 array from an ndarray, tensor or nested list of numbers."""
    if type(value) is TensorData and allow_tensor:
        array = value.array
    elif type(value) is np.ndarray:
        array = value
    elif type(value) in (list, tuple):
        array = _numbers(value, what)
    else:
        raise WrongAnswer(f"{what} should be a NumPy array, but the function returned {describe(value)}.")
    if array.dtype.kind == "b":
        raise WrongAnswer(f"{what} is a boolean array; expected numbers.")
    if array.size > MAX_ELEMENTS:
        raise WrongAnswer(f"{what} has {array.size} elements, far more than expected.")
    array = array.astype(np.float64)
    if shape is not None and array.shape != tuple(shape):
        raise WrongAnswer(f"{what} has shape {array.shape}; expected {tuple(shape)}.")
    if not np.all(np.isfinite(array)):
        raise WrongAnswer(f"{what} contains NaN or infinity.")
    return array


def as_int(value, what: str) -> int:
    """An exact integer from int, an integral float below 2**63, or a 0-d integer array.

    2**63 is the codec's bound on ints.
    """
    if type(value) is np.ndarray and value.shape == () and value.dtype.kind in "iu":
        value = int(value)
    if type(value) is float and abs(value) < 2**63 and value == int(value):
        value = int(value)
    if type(value) is not int:
        raise WrongAnswer(f"{what} should be an integer, but is {describe(value)}.")
    return value


def as_float(value, what: str) -> float:
    """A finite float from int, float or a 0-d/size-1 numeric array or tensor."""
    if type(value) in (np.ndarray, TensorData):
        array = as_array(value, what)
        if array.size != 1:
            raise WrongAnswer(f"{what} should be one number, but is {describe(value)}.")
        return float(array.reshape(()))
    if type(value) not in (int, float):
        raise WrongAnswer(f"{what} should be a number, but is {describe(value)}.")
    if not math.isfinite(value):
        raise WrongAnswer(f"{what} is {value}; expected a finite number.")
    return float(value)


def as_shape(value, what: str) -> tuple[int, ...]:
    """A shape tuple: a tuple or list of non-negative integers."""
    if type(value) not in (tuple, list) or not all(type(item) is int and item >= 0 for item in value):
        hint = (
            " Convert it with tuple(...)."
            if type(value) is Unsupported and value.type_name == "torch.Size"
            else ""
        )
        raise WrongAnswer(
            f"{what} should be a tuple of integers like (6, 4), but is {describe(value)}.{hint}"
        )
    return tuple(value)


def as_text(value, what: str, max_length: int = 2000) -> str:
    if type(value) is not str:
        raise WrongAnswer(f"{what} should be a string, but is {describe(value)}.")
    if len(value) > max_length:
        raise WrongAnswer(f"{what} is {len(value)} characters long; keep it under {max_length}.")
    return value


def close(got: np.ndarray, expected: np.ndarray, rtol: float = 1e-7, atol: float = 1e-9) -> bool:
    """Same shape and all entries within tolerance (float64 defaults)."""
    return got.shape == expected.shape and bool(np.allclose(got, expected, rtol=rtol, atol=atol))
