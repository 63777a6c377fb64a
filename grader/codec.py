"""Values as data: how arguments and answers cross the boundary to student code.

`encode` runs wherever the value lives (in student processes it is untrusted) and turns a
value into a JSON tree plus a list of NumPy arrays. `decode` runs in the trusted grader and
accepts only that shape of data: arrays are read with ``allow_pickle=False``, sizes and depth
are bounded, and anything else becomes a clear `Unsupported` record. Checks only ever see the
decoded values: Python scalars, str, list, tuple, dict, None, plain float/int/bool ndarrays,
`TensorData`, `LinearData`, `Unsupported` and (as arguments) `CallableSpec`.
"""

from __future__ import annotations

import io
import json
import math
import struct
import sys
from dataclasses import dataclass, field

import numpy as np

MAX_DEPTH = 24
MAX_NODES = 20_000
MAX_STRING = 200_000
MAX_ARRAY_BYTES = 256 * 2**20
MAX_HEADER_BYTES = 8 * 2**20  # the JSON description of a value, checked before it is parsed
MAX_HEADER_TOKENS = 8 * MAX_NODES  # brackets, braces and commas: a bound on its JSON nodes
ARRAY_KINDS = "biuf"
TOO_LARGE = {"$unsupported": "a structure nested too deeply or too large"}
INT_TOO_LARGE = "an integer too large to grade"


def _too_many_bytes(what: str, nbytes: int) -> dict:
    return {"$unsupported": f"{what} of {nbytes} bytes, more than the {MAX_ARRAY_BYTES}-byte limit"}


class DecodeError(ValueError):
    """The data does not have the shape that `encode` produces."""


@dataclass(frozen=True)
class Unsupported:
    """A value of a type that cannot be graded, e.g. a generator or a custom object."""

    type_name: str

    def describe(self) -> str:
        name = self.type_name
        return name if name.startswith(("a ", "an ")) else f"an object of type {name}"


@dataclass(frozen=True)
class TensorData:
    """A torch tensor, as data: its values, dtype name and whether it requires grad."""

    array: np.ndarray
    dtype: str
    requires_grad: bool = False


@dataclass(frozen=True)
class LinearData:
    """A torch.nn.Linear, as data."""

    in_features: int
    out_features: int
    weight: TensorData
    bias: TensorData | None
    type_name: str = "torch.nn.Linear"


@dataclass(frozen=True)
class CallableSpec:
    """A callable argument described as data; student processes rebuild it with `grader.fakes`."""

    kind: str
    params: dict = field(default_factory=dict)


def _type_name(value) -> str:
    cls = type(value)
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', '?')}"[:120]


class _Encoder:
    def __init__(self):
        self.arrays: list[np.ndarray] = []
        self.nodes = 0

    def array(self, array: np.ndarray) -> int:
        self.arrays.append(array)
        return len(self.arrays) - 1

    def __call__(self, value, depth: int = 0):
        self.nodes += 1
        if depth > MAX_DEPTH or self.nodes > MAX_NODES:
            return TOO_LARGE
        kind = type(value)
        if value is None or kind is bool or kind is str:
            return value if kind is not str else value[:MAX_STRING]
        if kind is int:
            return value if abs(value) < 2**63 else {"$unsupported": INT_TOO_LARGE}
        if kind is float:
            return {"$float": repr(value)} if not math.isfinite(value) else value
        if kind in _NUMPY_SCALARS:
            return self(value.item(), depth)
        if kind in (list, tuple, dict) and self.nodes + len(value) * (1 + (kind is dict)) > MAX_NODES:
            return TOO_LARGE  # one record for the whole container, without visiting a million items
        if kind in (list, tuple):
            items = [self(item, depth + 1) for item in value]
            return items if kind is list else {"$tuple": items}
        if kind is dict:
            return {"$dict": [[self(k, depth + 1), self(v, depth + 1)] for k, v in value.items()]}
        if kind is np.ndarray:
            if value.dtype.kind not in ARRAY_KINDS:
                return {"$unsupported": f"a NumPy array of dtype {value.dtype}"}
            if value.nbytes > MAX_ARRAY_BYTES:  # before copying: a broadcast view can claim terabytes
                return _too_many_bytes("a NumPy array", value.nbytes)
            contiguous = (
                value if value.flags.c_contiguous else np.ascontiguousarray(value)
            )  # keeps 0-d arrays 0-d
            return {"$ndarray": self.array(contiguous)}
        if kind is CallableSpec:
            return {"$callable": value.kind, "params": self(value.params, depth + 1)}
        torch_value = _encode_torch(self, value, depth)
        if torch_value is not None:
            return torch_value
        return {"$unsupported": _type_name(value)}


_NUMPY_SCALARS = {
    np.float64,
    np.float32,
    np.float16,
    np.int64,
    np.int32,
    np.int16,
    np.int8,
    np.uint64,
    np.uint32,
    np.uint16,
    np.uint8,
    np.bool_,
}


def _encode_torch(encoder: _Encoder, value, depth: int):
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    kind = type(value)
    if kind in (torch.Tensor, torch.nn.Parameter):
        dtype = str(value.dtype).removeprefix("torch.")
        if value.is_complex() or value.is_quantized:
            return {"$unsupported": f"a tensor of dtype {dtype}"}
        try:
            nbytes = value.numel() * value.element_size()
            if nbytes > MAX_ARRAY_BYTES:
                return _too_many_bytes("a tensor", nbytes)
            data = value.detach().cpu()
            if data.dtype in (torch.bfloat16, torch.float16):
                data = data.float()
            array = data.numpy().copy()
        except (RuntimeError, TypeError, ValueError, NotImplementedError):  # sparse, meta, nested tensors
            return {
                "$unsupported": f"a {value.layout} tensor on device {value.device} "
                "that cannot be read as an array"
            }
        return {"$tensor": encoder.array(array), "dtype": dtype, "requires_grad": bool(value.requires_grad)}
    if kind is torch.nn.Linear:
        bias = value.bias
        return {
            "$linear": {
                "in_features": encoder(value.in_features, depth + 1),
                "out_features": encoder(value.out_features, depth + 1),
                "weight": encoder(value.weight, depth + 1),
                "bias": None if bias is None else encoder(bias, depth + 1),
            }
        }
    return None


def encode(value) -> tuple[object, list[np.ndarray]]:
    """Turn a value into (JSON tree, arrays). Never raises for ordinary values."""
    encoder = _Encoder()
    tree = encoder(value)
    return tree, encoder.arrays


class _Decoder:
    def __init__(self, arrays: list[np.ndarray]):
        self.arrays = arrays
        self.nodes = 0

    def array(self, index) -> np.ndarray:
        if type(index) is not int or not 0 <= index < len(self.arrays):
            raise DecodeError(f"array reference {index!r} out of range")
        return self.arrays[index]

    def __call__(self, node, depth: int = 0):
        self.nodes += 1
        if depth > MAX_DEPTH + 2 or self.nodes > MAX_NODES * 3:
            raise DecodeError("data nested too deeply or too large")
        kind = type(node)
        if kind is int and abs(node) >= 2**63:
            return Unsupported(INT_TOO_LARGE)
        if node is None or kind in (bool, int, float, str):
            return node
        if kind is list:
            return [self(item, depth + 1) for item in node]
        if kind is not dict or len(node) not in (1, 2, 3):
            raise DecodeError(f"unexpected node of type {kind.__name__}")
        if "$float" in node:
            text = node["$float"]
            if text not in ("nan", "inf", "-inf"):
                raise DecodeError(f"bad float {text!r}")
            return float(text)
        if "$tuple" in node:
            return tuple(self(item, depth + 1) for item in _list(node["$tuple"]))
        if "$dict" in node:
            result = {}
            for pair in _list(node["$dict"]):
                if type(pair) is not list or len(pair) != 2:
                    raise DecodeError("bad dict entry")
                key = self(pair[0], depth + 1)
                if type(key) not in (str, int, bool, float, tuple, Unsupported) and key is not None:
                    raise DecodeError("unhashable dict key")
                try:
                    hash(key)
                except TypeError:
                    raise DecodeError("unhashable dict key") from None
                result[key] = self(pair[1], depth + 1)
            return result
        if "$ndarray" in node:
            return self.array(node["$ndarray"])
        if "$tensor" in node:
            dtype, grad = node.get("dtype"), node.get("requires_grad", False)
            if type(dtype) is not str or type(grad) is not bool:
                raise DecodeError("bad tensor record")
            return TensorData(self.array(node["$tensor"]), dtype[:40], grad)
        if "$linear" in node:
            return _linear(self, node["$linear"], depth)
        if "$callable" in node:
            if type(node["$callable"]) is not str:
                raise DecodeError("bad callable record")
            params = self(node.get("params", {"$dict": []}), depth + 1)
            return CallableSpec(node["$callable"], params if type(params) is dict else {})
        if "$unsupported" in node and type(node["$unsupported"]) is str:
            return Unsupported(node["$unsupported"][:200])
        raise DecodeError(f"unknown record with keys {sorted(node)[:3]}")


def _list(node) -> list:
    if type(node) is not list:
        raise DecodeError("expected a list")
    return node


def _linear(decoder: _Decoder, record, depth: int) -> LinearData | Unsupported:
    if type(record) is not dict or set(record) != {"in_features", "out_features", "weight", "bias"}:
        raise DecodeError("bad nn.Linear record")
    fields = {name: decoder(record[name], depth + 1) for name in record}
    weight, bias = fields["weight"], fields["bias"]
    if (
        type(fields["in_features"]) is not int
        or type(fields["out_features"]) is not int
        or type(weight) is not TensorData
        or not (bias is None or type(bias) is TensorData)
    ):
        return Unsupported("torch.nn.Linear with unreadable fields")
    return LinearData(fields["in_features"], fields["out_features"], weight, bias)


def decode(tree, arrays: list[np.ndarray]):
    """Rebuild a value from `encode`'s output; raises DecodeError for anything else."""
    return _Decoder(arrays)(tree)


def dumps(value) -> bytes:
    """Serialise a value to bytes: a length-prefixed JSON header, then one .npy block per array."""
    tree, arrays = encode(value)
    header = json.dumps({"tree": tree, "arrays": len(arrays)}).encode()
    if len(header) > MAX_HEADER_BYTES or _tokens(header) > MAX_HEADER_TOKENS:
        arrays = []
        header = json.dumps({"tree": TOO_LARGE, "arrays": 0}).encode()
    chunks = [struct.pack("<Q", len(header)), header]
    for array in arrays:
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, array, allow_pickle=False)
        data = buffer.getvalue()
        chunks += [struct.pack("<Q", len(data)), data]
    return b"".join(chunks)


def _tokens(text: bytes) -> int:
    return text.count(b"[") + text.count(b"{") + text.count(b",")


def loads(data: bytes, max_bytes: int = MAX_ARRAY_BYTES, writable: bool = False):
    """Parse bytes from `dumps`: no pickle, bounded sizes; arrays are read-only unless `writable`."""
    if len(data) > max_bytes:
        raise DecodeError(f"answer of {len(data)} bytes exceeds the {max_bytes}-byte limit")
    view = memoryview(data)
    offset = 0

    def take() -> memoryview:
        nonlocal offset
        if offset + 8 > len(view):
            raise DecodeError("truncated data")
        (size,) = struct.unpack_from("<Q", view, offset)
        offset += 8
        if offset + size > len(view):
            raise DecodeError("truncated data")
        chunk = view[offset : offset + size]
        offset += size
        return chunk

    chunk = take()
    if len(chunk) > MAX_HEADER_BYTES:
        raise DecodeError(f"a header of {len(chunk)} bytes exceeds the {MAX_HEADER_BYTES}-byte limit")
    text = bytes(chunk)
    if _tokens(text) > MAX_HEADER_TOKENS:
        raise DecodeError(f"a header with more than {MAX_HEADER_TOKENS} brackets, braces and commas")
    try:
        header = json.loads(text)
    except (ValueError, RecursionError) as error:  # JSONDecodeError, UnicodeDecodeError, over-long integers
        raise DecodeError(f"unreadable header: {type(error).__name__}: {str(error)[:200]}") from None
    if type(header) is not dict or type(header.get("arrays")) is not int or header["arrays"] < 0:
        raise DecodeError("bad header")
    arrays = []
    for _ in range(header["arrays"]):
        array = _read_npy(take())
        array.setflags(write=writable)
        arrays.append(array)
    if offset != len(view):
        raise DecodeError("trailing bytes after the data")
    return decode(header.get("tree"), arrays)


def _read_npy(chunk: memoryview) -> np.ndarray:
    """One .npy block, after checking that its header's dtype and size agree with its data."""
    stream = io.BytesIO(chunk)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise ValueError(f"unsupported .npy version {version}")
        if dtype.kind not in ARRAY_KINDS or dtype.hasobject or dtype.fields is not None:
            raise DecodeError(f"array of an unsupported dtype {dtype}")
        if math.prod(shape) * dtype.itemsize != len(chunk) - stream.tell():
            raise DecodeError("array data does not match the size its header declares")
        stream.seek(0)
        array = np.lib.format.read_array(stream, allow_pickle=False)
    except DecodeError:
        raise
    except (ValueError, TypeError, SyntaxError, OSError, EOFError, RecursionError) as error:
        raise DecodeError(f"unreadable array: {str(error)[:200]}") from None
    if type(array) is not np.ndarray or array.dtype.kind not in ARRAY_KINDS:
        raise DecodeError("array of an unsupported dtype")
    return array


def roundtrip(value):
    """Encode and decode in one process, so local grading sees exactly what remote grading sees."""
    return loads(dumps(value))
