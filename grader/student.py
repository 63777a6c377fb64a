"""How checks reach student code: a callable that returns decoded data or raises StudentError.

`LocalFunction` wraps a function in this process (tests, the vanilla-nbgrader hidden tests);
the sandbox provides a remote one with the same behaviour. Either way a check sees only values
produced by `grader.codec`, never the student's own objects.
"""

from __future__ import annotations

import traceback

import numpy as np

from grader import codec, fakes


class StudentError(Exception):
    """The student's code could not produce an answer; `reason` is written for the student."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class StudentRaised(StudentError):
    def __init__(self, type_name: str, message: str, where: str = ""):
        self.type_name, self.message, self.where = type_name, message, where
        text = f"{type_name}: {message}" if message else type_name
        super().__init__(f"your code raised {text}" + (f"\n{where}" if where else ""))

    @property
    def not_implemented(self) -> bool:
        return self.type_name == "NotImplementedError"


class StudentTimeout(StudentError):
    pass


class StudentCrashed(StudentError):
    pass


class NotDefined(StudentError):
    pass


def short_traceback(error: BaseException, limit: int = 3) -> str:
    """The last frames of a student's traceback, without grader frames."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if "grader" not in frame.filename.replace("\\", "/").split("/")[:-1]
    ]
    return "".join(traceback.format_list(frames[-limit:]))[:2000]


def _safe_text(error: BaseException, limit: int = 2000) -> str:
    """str(error), or a placeholder when the student's exception cannot even describe itself."""
    try:
        text = str(error)
        return text[:limit] if type(text) is str else "<unprintable message>"
    except Exception:
        return "<unprintable message>"


def call_and_encode(function, wire_args: bytes, make=None) -> bytes:
    """Run `function` on decoded arguments and return the encoded reply (used on both sides);
    `make(spec, index)` supplies the callable arguments (see grader.fakes.materialise)."""
    args = fakes.materialise(codec.loads(wire_args, writable=True), make)
    before = [np.array(arg, copy=True) if type(arg) is np.ndarray else None for arg in args]
    try:
        value = function(*args)
    except BaseException as error:  # the student's exception, including SystemExit
        if isinstance(error, KeyboardInterrupt):
            raise
        return codec.dumps(
            {
                "error": {
                    "type": str(type(error).__name__)[:80],
                    "message": _safe_text(error),
                    "where": short_traceback(error),
                }
            }
        )
    mutated = [
        i
        for i, (arg, copy) in enumerate(zip(args, before))
        if copy is not None and not (arg.shape == copy.shape and np.array_equal(arg, copy, equal_nan=True))
    ]
    returned_input = [i for i, arg in enumerate(args) if value is arg and type(arg) is np.ndarray]
    return codec.dumps({"value": value, "mutated": mutated, "returned_input": returned_input})


def decode_reply(reply: bytes):
    """Parse a reply from `call_and_encode`: returns (value, mutated, returned_input) or raises."""
    try:
        data = codec.loads(reply)
    except codec.DecodeError as error:
        raise StudentCrashed(f"the answer could not be read: {error}") from None
    if type(data) is not dict:
        raise StudentCrashed("the answer could not be read")
    if "error" in data:
        error = data["error"]
        if type(error) is not dict:
            raise StudentCrashed("the answer could not be read")
        raise StudentRaised(
            str(error.get("type", "Exception")), str(error.get("message", "")), str(error.get("where", ""))
        )
    return data.get("value"), _indices(data, "mutated"), _indices(data, "returned_input")


def _indices(reply: dict, key: str) -> tuple[int, ...]:
    indices = reply.get(key, [])
    if type(indices) not in (list, tuple):
        raise StudentCrashed(f"the answer could not be read: {key} is not a list")
    return tuple(i for i in indices if type(i) is int)


class StudentFunction:
    """Base for the callables handed to checks. Subclasses implement `_call(wire_args) -> reply`."""

    def __init__(self, name: str):
        self.name = name
        self.last_mutated: tuple[int, ...] = ()
        self.last_returned_input: tuple[int, ...] = ()
        self.last_callables: list = []
        self.calls = 0

    def _call(self, wire_args: bytes) -> bytes:
        raise NotImplementedError

    def __call__(self, *args):
        self.calls += 1
        self.last_callables = fakes.realise(args)  # what the call's callable arguments really are
        wire_args = codec.dumps(fakes.without_parameters(list(args)))
        value, self.last_mutated, self.last_returned_input = decode_reply(self._call(wire_args))
        return value


class LocalFunction(StudentFunction):
    """A student function in this process, still seen only through encoded data."""

    def __init__(self, function, name: str | None = None):
        super().__init__(name or getattr(function, "__name__", "function"))
        if not callable(function):
            raise NotDefined(
                f"`{self.name}` is {codec.Unsupported(type(function).__qualname__).describe()}, "
                "not a function"
            )
        self.function = function

    def _call(self, wire_args: bytes) -> bytes:
        return call_and_encode(self.function, wire_args, lambda spec, index: self.last_callables[index])


class MissingFunction(StudentFunction):
    """Stands in for a function the notebook never defined."""

    def __init__(self, name: str, reason: str = ""):
        super().__init__(name)
        self.reason = reason or f"the notebook does not define `{name}`"

    def _call(self, wire_args: bytes) -> bytes:
        raise NotDefined(self.reason)


def local_value(value):
    """A student's variable as a check sees it: the encoded-then-decoded data.

    Raises StudentCrashed, as reading it from a student process would, when it is too large to read.
    """
    try:
        return codec.roundtrip(value)
    except codec.DecodeError as error:
        raise StudentCrashed(f"the answer could not be read: {error}") from None
