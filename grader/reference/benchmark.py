"""Reference solutions for assignment 05: FLOPs, bytes, timing and the roofline of a dense layer.

The layer's matrix product Z = X @ W.T with X of shape (B, d_in) and W of shape (d_out, d_in)
does B * d_out dot products of length d_in: one multiply and one add per term, so
2 * B * d_in * d_out floating-point operations. The bias adds only B * d_out more and is
ignored here, as in most FLOP counts of matrix multiplications.
"""

from __future__ import annotations

import time

import numpy as np

from grader.reference.validation import positive_int, positive_number, whole_number

BOUNDS = ("memory", "compute")


def matmul_flops(batch: int, d_in: int, d_out: int) -> int:
    """Floating-point operations of the product X @ W.T of a dense layer.

    Inputs:
    - batch: number of rows B of X, shape (B, d_in).
    - d_in: number of input features.
    - d_out: number of output units; W has shape (d_out, d_in).

    Returns:
    - 2 * B * d_in * d_out, an int: each of the B * d_out outputs needs d_in multiplies and
      d_in additions (counting a multiply-add as two operations). The bias is not counted.
    """
    return 2 * positive_int(batch, "batch") * positive_int(d_in, "d_in") * positive_int(d_out, "d_out")


def matmul_bytes(batch: int, d_in: int, d_out: int, bytes_per_element: int) -> int:
    """Bytes moved by X @ W.T if each operand is read once and the output written once.

    Inputs:
    - batch, d_in, d_out: positive ints; X has shape (B, d_in), W (d_out, d_in), Z (B, d_out).
    - bytes_per_element: bytes per number, e.g. 2 (float16/bfloat16), 4 (float32), 8 (float64).

    Returns:
    - (B * d_in + d_out * d_in + B * d_out) * bytes_per_element, an int: reading X, reading W
      and writing Z. This is the least traffic possible; real kernels may move more. The bias
      (d_out numbers) is ignored.
    """
    batch, d_in, d_out = (
        positive_int(batch, "batch"),
        positive_int(d_in, "d_in"),
        positive_int(d_out, "d_out"),
    )
    return (batch * d_in + d_out * d_in + batch * d_out) * positive_int(
        bytes_per_element, "bytes_per_element"
    )


def arithmetic_intensity(batch: int, d_in: int, d_out: int, bytes_per_element: int) -> float:
    """FLOPs per byte moved by X @ W.T: matmul_flops / matmul_bytes.

    Inputs:
    - batch, d_in, d_out, bytes_per_element: as in matmul_bytes.

    Returns:
    - the intensity in FLOP/byte, a float. Small batches give low intensity (the weights are
      read for little work); for a square layer of width d and large B it approaches d / bytes.
    """
    return matmul_flops(batch, d_in, d_out) / matmul_bytes(batch, d_in, d_out, bytes_per_element)


def time_op(
    fn, warmup: int = 3, repeat: int = 10, timer=time.perf_counter, sync=None, number: int = 1
) -> float:
    """The median wall-clock time of one call of `fn`, excluding warm-up calls.

    The first calls of an operation often pay one-off costs (memory allocation, kernel selection,
    compilation, caches), so they are run but not timed. On an asynchronous device (a GPU) a call
    returns before the work is done, so `sync` waits for the device before each clock read.
    An operation much shorter than a launch and a synchronisation is timed `number` times
    between two clock reads, and the window divided by `number`. The median ignores the
    occasional slow run that an interruption causes; the mean does not.

    Inputs:
    - fn: a callable with no arguments, the operation to time.
    - warmup: number of untimed calls first, an int >= 0.
    - repeat: number of timed windows, a positive int.
    - timer: a callable returning the current time in seconds.
    - sync: None (a synchronous device such as the CPU), or a callable that blocks until all
      queued work is done, e.g. torch.cuda.synchronize.
    - number: calls of fn per timed window, a positive int.

    Returns:
    - the median over the `repeat` windows of (end - start) / number, in seconds, a float.
      Each window is: sync (if given), start = timer(), fn() `number` times, sync (if given),
      end = timer().
    """
    if not callable(fn) or not callable(timer) or not (sync is None or callable(sync)):
        raise ValueError("fn and timer must be callables, and sync None or a callable")
    warmup = whole_number(warmup, "warmup", minimum=0)
    repeat = positive_int(repeat, "repeat")
    number = positive_int(number, "number")
    for _ in range(warmup):
        fn()
    durations = []
    for _ in range(repeat):
        if sync is not None:
            sync()
        start = timer()
        for _ in range(number):
            fn()
        if sync is not None:
            sync()
        durations.append((timer() - start) / number)
    return float(np.median(durations))


def achieved_flops(batch: int, d_in: int, d_out: int, seconds: float) -> float:
    """The FLOP rate a measured dense-layer product reached.

    Inputs:
    - batch, d_in, d_out: positive ints, as in matmul_flops.
    - seconds: measured time of one product, a finite positive number.

    Returns:
    - matmul_flops(batch, d_in, d_out) / seconds, in FLOP/s (not TFLOP/s), a float.
    """
    return matmul_flops(batch, d_in, d_out) / positive_number(seconds, "seconds")


def roofline_bound(intensity: float, peak_flops: float, bandwidth: float) -> str:
    """Whether an operation is memory-bound or compute-bound on a device, by the roofline model.

    The device can do at most min(peak_flops, intensity * bandwidth) FLOP/s. The two limits
    cross at the ridge point peak_flops / bandwidth (FLOP/byte).

    Inputs:
    - intensity: the operation's arithmetic intensity in FLOP/byte, a positive number.
    - peak_flops: the device's peak FLOP/s, a positive number.
    - bandwidth: the device's memory bandwidth in bytes/s, a positive number.

    Returns:
    - "memory" when intensity < peak_flops / bandwidth (the memory traffic limits the rate),
      otherwise "compute". Exactly at the ridge point both limits are equal and the answer is
      "compute" by convention.
    """
    intensity = positive_number(intensity, "intensity")
    ridge = positive_number(peak_flops, "peak_flops") / positive_number(bandwidth, "bandwidth")
    return "memory" if intensity < ridge else "compute"
