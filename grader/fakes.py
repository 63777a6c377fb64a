"""Callable arguments rebuilt from data, so they can be passed into an isolated process.

Checks pass `CallableSpec`s (e.g. the loss function for `numerical_gradient`, or a fake clock
for `time_op`); `materialise` turns them back into callables next to the student's code.
Each kind is a small class whose behaviour is fully determined by its parameters, so the
trusted grader can compute the same expected answer without calling student code.
"""

from __future__ import annotations

import numpy as np

from grader.codec import CallableSpec

BUILDERS = {}


def builder(kind: str):
    def register(cls):
        BUILDERS[kind] = cls
        return cls

    return register


def materialise(value, context: dict | None = None):
    """Replace every CallableSpec inside `value` (a list of arguments) by its callable.

    Specs in one call share `context`, so e.g. a fake device's fn, timer and sync agree.
    """
    context = {} if context is None else context
    if type(value) is CallableSpec:
        if value.kind not in BUILDERS:
            raise ValueError(f"unknown callable kind {value.kind!r}")
        return BUILDERS[value.kind](context, **value.params)
    if type(value) is list:
        return [materialise(item, context) for item in value]
    if type(value) is tuple:
        return tuple(materialise(item, context) for item in value)
    return value


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
