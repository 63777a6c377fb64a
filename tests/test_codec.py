"""grader.codec: values round-trip as data, and malformed bytes fail with DecodeError only."""

from __future__ import annotations

import io
import json
import math
import struct
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader import codec
from grader.codec import CallableSpec, DecodeError, LinearData, TensorData, Unsupported


def frame(header, *chunks: bytes) -> bytes:
    """Bytes in the wire layout of `codec.dumps`, built by hand."""
    head = header if isinstance(header, bytes) else json.dumps(header).encode()
    parts = [struct.pack("<Q", len(head)), head]
    for chunk in chunks:
        parts += [struct.pack("<Q", len(chunk)), chunk]
    return b"".join(parts)


def npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**62), 2**62)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=5) | st.integers(-9, 9), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=60, deadline=None)
@given(json_values)
def test_plain_values_round_trip(value):
    assert codec.roundtrip(value) == value


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int8, np.uint16, np.bool_])
@pytest.mark.parametrize("shape", [(), (0,), (1,), (7, 73), (2, 3, 1)])
def test_arrays_round_trip_read_only(dtype, shape):
    array = np.arange(math.prod(shape)).reshape(shape).astype(dtype)
    back = codec.roundtrip(array)
    assert type(back) is np.ndarray and back.dtype == array.dtype and back.shape == shape
    np.testing.assert_array_equal(back, array)
    assert not back.flags.writeable
    assert codec.loads(codec.dumps(array), writable=True).flags.writeable


def test_special_floats_numpy_scalars_and_non_contiguous_arrays():
    back = codec.roundtrip(
        [float("nan"), float("inf"), -math.inf, np.float32(0.5), np.int64(7), np.bool_(True)]
    )
    assert math.isnan(back[0]) and back[1:3] == [math.inf, -math.inf]
    assert back[3:] == [0.5, 7, True] and [type(v) for v in back[3:]] == [float, int, bool]
    strided = np.arange(20.0).reshape(4, 5)[::2, ::-1]
    np.testing.assert_array_equal(codec.roundtrip(strided), strided)
    np.testing.assert_array_equal(codec.roundtrip(np.asfortranarray(np.ones((2, 3)))), np.ones((2, 3)))


def test_tensors_and_linear_layers_become_data():
    tensor = codec.roundtrip(torch.tensor([[1.0, 2.0]], dtype=torch.float64, requires_grad=True))
    assert tensor == TensorData(tensor.array, "float64", True)
    np.testing.assert_array_equal(tensor.array, [[1.0, 2.0]])
    half = codec.roundtrip(torch.ones(3, dtype=torch.bfloat16))
    assert half.dtype == "bfloat16" and half.array.dtype == np.float32
    layer = torch.nn.Linear(7, 2)
    data = codec.roundtrip(layer)
    assert type(data) is LinearData and (data.in_features, data.out_features) == (7, 2)
    np.testing.assert_array_equal(data.weight.array, layer.weight.detach().numpy())
    assert data.weight.requires_grad and data.bias.array.shape == (2,)
    assert codec.roundtrip(torch.nn.Linear(3, 1, bias=False)).bias is None


def test_callable_specs_round_trip():
    spec = CallableSpec("quadratic_loss", {"A": np.eye(2), "c": [1.0, 2.0], "shape": (2,)})
    back = codec.roundtrip(spec)
    assert type(back) is CallableSpec and back.kind == "quadratic_loss"
    np.testing.assert_array_equal(back.params["A"], np.eye(2))
    assert back.params["shape"] == (2,)


class Lying:
    def __eq__(self, other):
        return True

    def __array__(self, dtype=None, copy=None):
        return np.zeros(2)


class SubArray(np.ndarray):
    pass


class SubInt(int):
    pass


def _matrix():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix([[1.0]])


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda: (i for i in range(3)), "generator"),
        (Lying, "Lying"),
        (lambda: np.ones(2).view(SubArray), "SubArray"),
        (_matrix, "matrix"),
        (lambda: SubInt(3), "SubInt"),
        (lambda: np.array([{"a": 1}], dtype=object), "dtype object"),
        (lambda: np.ones(2, dtype=complex), "complex"),
        (lambda: np.array(["x"]), "<U1"),
        (lambda: torch.ones(2, dtype=torch.complex64), "complex64"),
        (lambda: torch.zeros(2, 2).to_sparse(), "cannot be read"),
        (lambda: torch.empty(2, device="meta"), "meta"),
        (lambda: 2**80, "too large"),
        (lambda: np.broadcast_to(np.zeros(1), (10**6, 10**6)), "8000000000000 bytes, more than the"),
        (lambda: torch.zeros(1).expand(10**6, 10**6), "a tensor of 4000000000000 bytes"),
        (lambda: np.float128(1.0) if hasattr(np, "float128") else np.longdouble(1.0), "numpy"),
        (lambda: __import__("sympy").Symbol("x"), "sympy"),
    ],
)
def test_unsupported_values_are_named_not_trusted(make, text):
    back = codec.roundtrip(make())
    assert type(back) is Unsupported
    assert text in back.describe()


def test_nesting_and_size_bombs_are_cut_off():
    deep: list = []
    for _ in range(codec.MAX_DEPTH + 10):
        deep = [deep]
    back = codec.roundtrip(deep)
    node = back
    while type(node) is list and node:
        node = node[0]
    assert type(node) is Unsupported and "nested" in node.describe()
    largest = list(range(codec.MAX_NODES - 1))
    assert codec.roundtrip(largest) == largest
    for wide in (
        list(range(codec.MAX_NODES)),
        tuple(range(10**6)),
        dict.fromkeys(range(codec.MAX_NODES // 2)),
    ):
        back = codec.roundtrip(wide)
        assert type(back) is Unsupported and "too large" in back.describe()
    cyclic: list = []
    cyclic.append(cyclic)
    assert "nested" in str(codec.roundtrip(cyclic))


def test_unsupported_dict_keys_decode():
    back = codec.roundtrip({object(): 1})
    assert list(back.values()) == [1] and type(next(iter(back))) is Unsupported


GOOD = codec.dumps([np.arange(3.0), {"a": (1, 2)}])


@pytest.mark.parametrize("cut", [0, 4, 8, 20, len(GOOD) // 2, len(GOOD) - 1])
def test_truncated_bytes_fail_cleanly(cut):
    with pytest.raises(DecodeError):
        codec.loads(GOOD[:cut])


@pytest.mark.parametrize(
    "data",
    [
        b"",
        frame(b"not json"),
        frame(b"\xff\xfe"),
        frame([1, 2]),
        frame({"tree": 1}),
        frame({"tree": 1, "arrays": -1}),
        frame({"tree": 1, "arrays": "1"}),
        frame({"tree": 1, "arrays": 1}),
        frame({"tree": {"$ndarray": 1}, "arrays": 1}, npy(np.ones(2))),
        frame({"tree": {"$ndarray": True}, "arrays": 1}, npy(np.ones(2))),
        frame({"tree": {"$float": "1e5"}, "arrays": 0}),
        frame({"tree": {"$mystery": 1}, "arrays": 0}),
        frame({"tree": {"a": 1, "b": 2, "c": 3, "d": 4}, "arrays": 0}),
        frame({"tree": {"$dict": [[1]]}, "arrays": 0}),
        frame({"tree": {"$dict": [[[1], 2]]}, "arrays": 0}),
        frame({"tree": {"$dict": [[{"$tuple": [[1]]}, 2]]}, "arrays": 0}),
        frame({"tree": {"$tuple": 5}, "arrays": 0}),
        frame({"tree": {"$tensor": 0, "dtype": 3}, "arrays": 1}, npy(np.ones(2))),
        frame({"tree": {"$linear": {"in_features": 1}}, "arrays": 0}),
        frame({"tree": {"$callable": 3}, "arrays": 0}),
        frame({"tree": 1, "arrays": 1}, b"not an npy block"),
        frame({"tree": 1, "arrays": 1}, npy(np.ones(2))[:-3]),
        frame({"tree": 1, "arrays": 0}) + b"trailing",
        frame({"tree": 1, "arrays": 1}, npy(np.ones(2)) + b"\0"),
        frame(("[" * 100_000 + "]" * 100_000).encode()),
        frame(b'{"tree": ' + b"7" * 5000 + b', "arrays": 0}'),
    ],
)
def test_malformed_bytes_raise_decode_error(data):
    with pytest.raises(DecodeError):
        codec.loads(data)


def test_integers_beyond_64_bits_from_the_wire_are_unsupported():
    back = codec.loads(frame({"tree": [10**30, 1 - 2**63, 2**63 - 1], "arrays": 0}))
    assert type(back[0]) is Unsupported and "too large" in back[0].describe()
    assert back[1:] == [1 - 2**63, 2**63 - 1]


def test_pickle_bearing_npy_is_refused():
    pickled = npy(np.array([{"payload": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DecodeError, match="dtype"):
        codec.loads(frame({"tree": {"$ndarray": 0}, "arrays": 1}, pickled))


@pytest.mark.parametrize(
    "array", [np.ones(2, dtype=complex), np.zeros(2, dtype=[("a", "<f8")]), np.array(["s"])]
)
def test_unsupported_npy_dtypes_are_refused(array):
    with pytest.raises(DecodeError, match="dtype"):
        codec.loads(frame({"tree": {"$ndarray": 0}, "arrays": 1}, npy(array)))


def test_a_header_claiming_a_huge_shape_is_refused_without_allocating():
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "<f8", "fortran_order": False, "shape": (10**13,)})
    with pytest.raises(DecodeError, match="size"):
        codec.loads(frame({"tree": {"$ndarray": 0}, "arrays": 1}, buffer.getvalue() + b"\0" * 16))


def test_depth_bomb_in_a_well_formed_header_is_refused():
    tree: object = 1
    for _ in range(codec.MAX_DEPTH + 5):
        tree = [tree]
    with pytest.raises(DecodeError, match="nested"):
        codec.loads(frame({"tree": tree, "arrays": 0}))


def test_size_limit():
    data = codec.dumps(np.zeros(1000))
    with pytest.raises(DecodeError, match="limit"):
        codec.loads(data, max_bytes=len(data) - 1)
    assert codec.loads(data, max_bytes=len(data)).shape == (1000,)
