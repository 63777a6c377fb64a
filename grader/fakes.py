"""Callable arguments rebuilt from data, so they can be passed into an isolated process.

Checks pass `CallableSpec`s (e.g. the loss function for `numerical_gradient`, or a fake clock
for `time_op`). The real callables live only in the trusted grader (`realise`): each kind is a
small class whose behaviour is fully determined by its parameters, so the grader can compute
the expected answer without calling student code. A student process gets `Callback`s instead,
which carry nothing but a number and ask the grader to run the real callable, so no attribute,
`__self__` or closure of what student code holds reveals durations, gradients or parameters.
"""

from __future__ import annotations

import itertools

import numpy as np

from grader import codec
from grader.codec import CallableSpec

BUILDERS = {}
MAX_CALLBACK_TEXT = 300


def builder(kind: str):
    def register(cls):
        BUILDERS[kind] = cls
        return cls

    return register


def build(spec: CallableSpec, context: dict):
    if spec.kind not in BUILDERS:
        raise ValueError(f"unknown callable kind {spec.kind!r}")
    return BUILDERS[spec.kind](context, **spec.params)


def materialise(value, make=None):
    """Replace every CallableSpec inside `value` (a list of arguments) by a callable.

    `make(spec, index)` gives the callable for the index-th spec (in order); by default the real
    one, with specs of one call sharing a context (so e.g. a fake device's fn, timer and sync agree).
    """
    if make is None:
        context = {}

        def make(spec, index):
            return build(spec, context)

    counter = itertools.count()

    def walk(item):
        if type(item) is CallableSpec:
            return make(item, next(counter))
        if type(item) is list:
            return [walk(part) for part in item]
        if type(item) is tuple:
            return tuple(walk(part) for part in item)
        return item

    return walk(value)


def realise(value) -> list:
    """The real callables for the specs inside `value`, in the order `materialise` numbers them."""
    found, context = [], {}
    materialise(value, lambda spec, index: found.append(build(spec, context)))
    return found


def without_parameters(value):
    """`value` with each CallableSpec reduced to its kind: what may be sent to student code."""
    return materialise(value, lambda spec, index: CallableSpec(spec.kind))


class CallbackError(RuntimeError):
    """The grader could not run a callable for student code (bad arguments, for instance)."""


class Callback:
    """What student code holds in place of a callable argument: the grader runs the real one.

    `channel.callback(index, args)` sends the arguments to the grader and returns its answer.
    """

    __slots__ = ("_channel", "_index", "__name__")

    def __init__(self, channel, index: int, kind: str):
        self._channel, self._index, self.__name__ = channel, index, kind

    def __call__(self, *args):
        return self._channel.callback(self._index, list(args))

    def __repr__(self) -> str:
        return f"<{self.__name__}>"


def answer_callback(callables: list, request) -> bytes:
    """Run the callable a student process asked for (`request`: bytes from codec.dumps of
    {"index": i, "args": [...]}) and encode its result, or the reason it could not run."""
    try:
        data = codec.loads(request)
        index, args = data["index"], data["args"]
        if type(index) is not int or not 0 <= index < len(callables) or type(args) is not list:
            raise CallbackError("no such callable")
        value = callables[index](*args)
    except Exception as error:  # any failure is the student's call's: it raises there
        return codec.dumps({"error": f"{type(error).__name__}: {error}"[:MAX_CALLBACK_TEXT]})
    return codec.dumps({"value": value})


@builder("quadratic_loss")
class QuadraticLoss:
    """f(x) = 0.5 * sum(x * (A @ x)) + sum(c * x) over x flattened: gradient 0.5*(A + A.T) x + c."""

    def __init__(self, context, A, c, shape):
        self.A, self.c, self.shape = np.asarray(A, float), np.asarray(c, float), tuple(shape)

    def __call__(self, x):
        flat = np.asarray(x, dtype=float).reshape(-1)
        return float(0.5 * flat @ self.A @ flat + self.c @ flat)

    def gradient(self, x):
        flat = np.asarray(x, dtype=float).reshape(-1)
        return (0.5 * (self.A + self.A.T) @ flat + self.c).reshape(self.shape)


@builder("sine_loss")
class SineLoss:
    """f(x) = sum(w * sin(x)): a smooth, non-polynomial loss with gradient w * cos(x)."""

    def __init__(self, context, w):
        self.w = np.asarray(w, float)

    def __call__(self, x):
        return float(np.sum(self.w * np.sin(np.asarray(x, dtype=float))))

    def gradient(self, x):
        return self.w * np.cos(np.asarray(x, dtype=float))


class FakeDevice:
    """A simulated accelerator for timing exercises: calls queue work, `sync` waits for it.

    `durations[i]` is how long call i takes. With `asynchronous`, a call returns at once and
    the time only passes when `sync()` is called (like CUDA kernels); otherwise the call
    itself advances the clock.
    """

    def __init__(self, durations, asynchronous=False, launch_overhead=1e-6):
        self.durations = [float(d) for d in durations]
        self.asynchronous = bool(asynchronous)
        self.launch_overhead = float(launch_overhead)
        self.now = 0.0
        self.pending = 0.0
        self.calls = 0
        self.clock_reads = []

    def run(self):
        duration = self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1
        self.now += self.launch_overhead
        if self.asynchronous:
            self.pending += duration
        else:
            self.now += duration

    def sync(self):
        self.now += self.pending
        self.pending = 0.0

    def read_clock(self):
        self.clock_reads.append(self.now)
        return self.now


def _device(context: dict, device_id: str, durations, asynchronous=False, launch_overhead=1e-6):
    if device_id not in context:
        context[device_id] = FakeDevice(durations, asynchronous, launch_overhead)
    return context[device_id]


@builder("fake_device_fn")
def fake_device_fn(context, **device):
    return _device(context, **device).run


@builder("fake_device_sync")
def fake_device_sync(context, **device):
    return _device(context, **device).sync


@builder("fake_device_timer")
def fake_device_timer(context, **device):
    return _device(context, **device).read_clock
