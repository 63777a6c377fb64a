"""The benchmark reference: FLOP and byte formulas, time_op on simulated devices, the roofline."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from grader.fakes import FakeDevice
from grader.reference import benchmark as ref

SIZES = st.sampled_from([1, 2, 7, 64, 73, 512, 1024, 4096])


def counted_flops(batch: int, d_in: int, d_out: int) -> int:
    """FLOPs of X @ W.T counted one multiply and one add at a time."""
    X, W = np.ones((batch, d_in)), np.ones((d_out, d_in))
    operations = 0
    Z = np.zeros((batch, d_out))
    for i in range(batch):
        for j in range(d_out):
            for k in range(d_in):
                Z[i, j] += X[i, k] * W[j, k]
                operations += 2
    assert np.array_equal(Z, X @ W.T)
    return operations


@pytest.mark.parametrize("batch, d_in, d_out", [(1, 1, 1), (2, 3, 5), (7, 1, 3), (3, 7, 2)])
def test_matmul_flops_counts_each_multiply_and_add(batch, d_in, d_out):
    assert ref.matmul_flops(batch, d_in, d_out) == counted_flops(batch, d_in, d_out)


@settings(max_examples=50, deadline=None)
@given(SIZES, SIZES, SIZES, st.sampled_from([1, 2, 4, 8]))
def test_formulas_match_direct_computation(batch, d_in, d_out, size):
    flops, moved = ref.matmul_flops(batch, d_in, d_out), ref.matmul_bytes(batch, d_in, d_out, size)
    X, W, Z = (
        np.empty((batch, d_in), dtype=f"V{size}"),
        np.empty((d_out, d_in), dtype=f"V{size}"),
        np.empty((batch, d_out), dtype=f"V{size}"),
    )
    assert flops == 2 * batch * d_in * d_out and type(flops) is int
    assert moved == X.nbytes + W.nbytes + Z.nbytes and type(moved) is int
    assert ref.arithmetic_intensity(batch, d_in, d_out, size) == pytest.approx(flops / moved, rel=1e-15)
    assert ref.achieved_flops(batch, d_in, d_out, 0.25) == pytest.approx(4 * flops, rel=1e-15)


def test_chapter_example_layer():
    assert ref.matmul_flops(64, 1024, 4096) == 536_870_912
    assert ref.matmul_bytes(64, 1024, 4096, 4) == (65_536 + 4_194_304 + 262_144) * 4
    assert ref.arithmetic_intensity(64, 1024, 4096, 4) == pytest.approx(536_870_912 / 18_087_936)


def test_intensity_of_a_square_layer_grows_with_the_batch_towards_width_over_bytes():
    small = ref.arithmetic_intensity(1, 4096, 4096, 2)
    large = ref.arithmetic_intensity(1 << 20, 4096, 4096, 2)
    assert small < 1.01 and large == pytest.approx(4096 / 2, rel=0.01)


def run_on_device(durations, warmup, repeat, asynchronous=False, with_sync=True, overhead=1e-6):
    device = FakeDevice(durations, asynchronous, overhead)
    result = ref.time_op(device.run, warmup, repeat, device.read_clock, device.sync if with_sync else None)
    return result, device


def test_time_op_times_only_the_runs_after_warmup():
    durations = [1.0, 1.0, 1.0] + [0.01, 0.03, 0.02, 0.05, 0.04]
    result, device = run_on_device(durations, warmup=3, repeat=5)
    assert result == pytest.approx(0.03 + 1e-6, rel=1e-9)
    assert device.calls == 8 and len(device.clock_reads) == 10


@pytest.mark.parametrize("asynchronous", [False, True])
def test_time_op_returns_the_median_not_the_mean(asynchronous):
    durations = [0.5] + [0.010, 0.011, 0.500, 0.012, 0.013]
    result, _ = run_on_device(durations, warmup=1, repeat=5, asynchronous=asynchronous, overhead=2e-6)
    assert result == pytest.approx(0.012 + 2e-6, rel=1e-9)


def test_time_op_with_an_even_repeat_averages_the_two_middle_runs():
    result, _ = run_on_device([9.0, 4.0, 1.0, 3.0, 2.0], warmup=1, repeat=4, overhead=0.0)
    assert result == pytest.approx(2.5)


def test_time_op_synchronises_an_asynchronous_device():
    durations = [0.2, 0.2] + [0.01, 0.02, 0.03]
    result, _ = run_on_device(durations, warmup=2, repeat=3, asynchronous=True, overhead=5e-6)
    assert result == pytest.approx(0.02 + 5e-6, rel=1e-9)
    unsynced, _ = run_on_device(
        durations, warmup=2, repeat=3, asynchronous=True, with_sync=False, overhead=5e-6
    )
    assert unsynced == pytest.approx(5e-6, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 6),
    st.integers(1, 9),
    st.booleans(),
    st.lists(st.floats(1e-5, 1e-1), min_size=16, max_size=16),
)
def test_time_op_equals_the_median_of_the_timed_durations(warmup, repeat, asynchronous, durations):
    result, device = run_on_device(durations, warmup, repeat, asynchronous, overhead=3e-6)
    timed = [d + 3e-6 for d in durations[warmup : warmup + repeat]]
    assert result == pytest.approx(statistics.median(timed), rel=1e-9)
    assert device.calls == warmup + repeat and device.pending == 0


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 3),
    st.integers(1, 5),
    st.sampled_from([1, 7, 73]),
    st.lists(st.floats(1e-7, 1e-5), min_size=400, max_size=400),
)
def test_time_op_windows_of_number_calls_give_the_median_per_call(warmup, repeat, number, durations):
    device = FakeDevice(durations, True, 4e-6)
    result = ref.time_op(device.run, warmup, repeat, device.read_clock, device.sync, number)
    timed = durations[warmup:]
    windows = [sum(timed[i * number : (i + 1) * number]) / number + 4e-6 for i in range(repeat)]
    assert result == pytest.approx(statistics.median(windows), rel=1e-9)
    assert device.calls == warmup + repeat * number and len(device.clock_reads) == 2 * repeat


def test_time_op_on_a_real_cpu_matmul_is_positive_and_finite():
    A, B = np.ones((73, 64)), np.ones((64, 7))
    seconds = ref.time_op(lambda: A @ B, warmup=1, repeat=5)
    assert math.isfinite(seconds) and 0 < seconds < 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(fn=None), "callables"),
        (dict(timer=3.0), "callables"),
        (dict(sync="yes"), "callables"),
        (dict(warmup=-1), "warmup"),
        (dict(warmup=True), "warmup"),
        (dict(warmup="3"), "warmup"),
        (dict(repeat=0), "repeat"),
        (dict(repeat=2.5), "repeat"),
        (dict(number=0), "number"),
        (dict(number=True), "number"),
    ],
)
def test_time_op_rejects_bad_arguments(kwargs, message):
    arguments = dict(fn=lambda: None, warmup=1, repeat=2, timer=lambda: 0.0, sync=None) | kwargs
    with pytest.raises(ValueError, match=message):
        ref.time_op(**arguments)


def test_roofline_bound_on_both_sides_of_the_ridge_point():
    peak, bandwidth = 6e14, 2e12
    assert ref.roofline_bound(1.0, peak, bandwidth) == "memory"
    assert ref.roofline_bound(299.999, peak, bandwidth) == "memory"
    assert ref.roofline_bound(300.0, peak, bandwidth) == "compute"
    assert ref.roofline_bound(300.001, peak, bandwidth) == "compute"
    assert ref.roofline_bound(1e6, peak, bandwidth) == "compute"


def test_roofline_bound_for_the_example_layer_on_an_accelerator():
    intensity = ref.arithmetic_intensity(64, 1024, 4096, 2)
    assert ref.roofline_bound(intensity, 989e12, 3.35e12) == "memory"
    assert ref.roofline_bound(ref.arithmetic_intensity(8192, 8192, 8192, 2), 989e12, 3.35e12) == "compute"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: ref.matmul_flops(0, 3, 4), "batch"),
        (lambda: ref.matmul_flops(2, 3.5, 4), "d_in"),
        (lambda: ref.matmul_bytes(2, 3, 4, 0), "bytes_per_element"),
        (lambda: ref.matmul_bytes(2, 3, False, 4), "d_out"),
        (lambda: ref.achieved_flops(2, 3, 4, 0.0), "seconds"),
        (lambda: ref.achieved_flops(2, 3, 4, float("nan")), "seconds"),
        (lambda: ref.achieved_flops(2, 3, 4, "1"), "seconds"),
        (lambda: ref.roofline_bound(-1.0, 1e12, 1e9), "intensity"),
        (lambda: ref.roofline_bound(1.0, float("inf"), 1e9), "peak_flops"),
        (lambda: ref.roofline_bound(1.0, 1e12, True), "bandwidth"),
    ],
)
def test_bad_input_gets_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
