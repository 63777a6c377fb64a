"""Input validators shared by the reference solutions: each returns a clean value or raises ValueError.

The messages name the offending argument, so that a reference called with bad data (by a test,
a notebook or a check) says what was wrong and where instead of failing deep inside NumPy.
"""

from __future__ import annotations

import math
import operator

import numpy as np


def whole_number(value, name: str, minimum: int = 1) -> int:
    """`value` as an int >= `minimum`; ValueError naming `name` otherwise (bools are refused).

    Accepts Python and NumPy integers (anything with __index__), never floats or bools.
    """
    kinds = {0: "non-negative int", 1: "positive integer"}
    kind = kinds.get(minimum, f"integer >= {minimum}")
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a {kind}, got the bool {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be a {kind}, got {type(value).__name__} {value!r}") from None
    if number < minimum:
        raise ValueError(f"{name} must be a {kind}, got {number}")
    return number


def positive_int(value, name: str) -> int:
    """`value` as a positive int; ValueError naming `name` otherwise (bools are refused)."""
    return whole_number(value, name, minimum=1)


def positive_number(value, name: str) -> float:
    """`value` as a finite positive float; ValueError naming `name` otherwise (bools are refused)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a positive number, got {type(value).__name__} {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return float(value)


def float_array(value, name: str, ndims: tuple[int, ...] | None = None) -> np.ndarray:
    """`value` as a finite float64 array with one of the allowed numbers of dimensions (any if None).

    Inputs:
    - value: an array or nested sequence of real numbers, of any shape S.
    - name: the argument's name, for the error message.
    - ndims: the allowed values of len(S), e.g. (1, 2); None allows any.

    Returns a float64 ndarray of shape S (a copy only where a conversion was needed).
    """
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array of real numbers: {error}") from None
    if ndims is not None and array.ndim not in ndims:
        allowed = " or ".join(f"{n}-D" for n in ndims)
        raise ValueError(f"{name} must be {allowed}, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} contains NaN or infinity")
    return array
