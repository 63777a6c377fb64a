"""layerlab.benchmark on the CPU: counts, timing in line with torch.utils.benchmark, sweep, plot."""

from __future__ import annotations

import statistics
import time

import matplotlib
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils import benchmark as torch_benchmark

from grader.reference.benchmark import (
    arithmetic_intensity,
    matmul_bytes,
    matmul_flops,
    roofline_bound,
    time_op,
)
from layerlab import benchmark as lab

matplotlib.use("Agg")

sizes = st.integers(1, 5000)


@settings(max_examples=50, deadline=None)
@given(batch=sizes, d_in=sizes, d_out=sizes, element_bytes=st.sampled_from([1, 2, 4, 8]))
def test_counts_match_the_formulas(batch, d_in, d_out, element_bytes):
    assert (
        lab.default_flops(batch, d_in, d_out) == 2 * batch * d_in * d_out == matmul_flops(batch, d_in, d_out)
    )
    expected_bytes = (batch * d_in + d_out * d_in + batch * d_out) * element_bytes
    assert lab.default_bytes(batch, d_in, d_out, element_bytes) == expected_bytes
    assert expected_bytes == matmul_bytes(batch, d_in, d_out, element_bytes)


@pytest.mark.parametrize("batch,d_in,d_out", [(1, 1, 1), (7, 73, 5), (64, 1024, 4096)])
def test_flops_of_the_kernel_match_a_count_of_multiply_adds(batch, d_in, d_out):
    # Each output entry of X @ W.T is d_in multiplies and d_in adds (the first add is onto zero).
    X, W = np.ones((batch, d_in)), np.ones((d_out, d_in))
    assert np.all(X @ W.T == d_in)
    assert lab.default_flops(batch, d_in, d_out) == batch * d_out * (d_in + d_in)


def test_make_matmul_computes_the_layer_product():
    fn = lab.make_matmul(7, 73, 5)
    Z = fn()
    assert Z.shape == (7, 5) and Z.dtype == torch.float32
    assert torch.equal(fn(), Z)  # same inputs each call


def _agreement(shape, threads) -> float:
    """Our median over torch.utils.benchmark's median, measured in alternation.

    A call of these shapes takes over 10 ms, where the Timer times single calls too. The two
    timers take turns call by call, so load from other programs on a shared machine falls on
    both medians alike.
    """
    fn = lab.make_matmul(*shape)
    timer = torch_benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    fn()
    ours, theirs = [], []
    for _ in range(21):
        ours.append(lab.reference_time(fn, "cpu", warmup=0, repeat=1))
        theirs.append(timer.timeit(1).median)
    return statistics.median(ours) / statistics.median(theirs)


@pytest.fixture
def one_thread():
    """One intra-op thread for both timers: on a busy 2-core machine a multi-threaded matmul waits
    for descheduled threads, which makes single timings bimodal."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield 1
    torch.set_num_threads(saved)


# The 10% agreement with torch.utils.benchmark is measured by benchmarks/timing_agreement.py on a
# quiet machine; under a parallel test run only a gross disagreement (units, warm-up) is a bug.
GROSS = 2.0


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (1025, 1024, 1024)])
def test_reference_timing_is_in_line_with_torch_utils_benchmark(shape, one_thread):
    ratio = _agreement(shape, one_thread)
    assert 1 / GROSS < ratio < GROSS, f"reference_time / torch.utils.benchmark = {ratio:.3f} for {shape}"


@pytest.mark.slow
def test_reference_time_op_is_in_line_with_reference_time(one_thread):
    fn = lab.make_matmul(1024, 1024, 1024)
    pairs = [(time_op(fn, 0, 1), lab.reference_time(fn, "cpu", 0, 1)) for _ in range(15)]
    ratio = statistics.median(p[0] for p in pairs) / statistics.median(p[1] for p in pairs)
    assert 1 / GROSS < ratio < GROSS, f"time_op / reference_time = {ratio:.3f}"


def test_reference_time_excludes_warmup_and_takes_the_median():
    durations = iter([0.05, 0.05] + [0.001, 0.003, 0.002])
    calls = []

    def fn():
        calls.append(1)
        time.sleep(next(durations))

    seconds = lab.reference_time(fn, "cpu", warmup=2, repeat=3)
    assert len(calls) == 5
    assert 0.0015 < seconds < 0.045  # the 50 ms warm-up calls are not in the median


def test_ceilings_are_positive_and_finite():
    peak = lab.measure_peak_flops("cpu", "fp32", size=256, repeat=2)
    bandwidth = lab.measure_bandwidth("cpu", megabytes=8, repeat=2)
    assert np.isfinite(peak) and peak > 1e7
    assert np.isfinite(bandwidth) and bandwidth > 1e7


def test_cpu_sweep_with_a_student_timing_function_runs():
    shapes = [(1, 64, 64), (7, 73, 5), (32, 255, 256), (32, 256, 256)]
    peak, bandwidth = 1e11, 1e10
    records = lab.run_sweep(
        shapes,
        time_fn=time_op,
        warmup=1,
        repeat=3,
        peak_flops=peak,
        bandwidth=bandwidth,
        flops_fn=matmul_flops,
        bytes_fn=matmul_bytes,
    )
    assert [(r["batch"], r["d_in"], r["d_out"]) for r in records] == shapes
    for r in records:
        assert r["device"] == "cpu" and r["precision"] == "fp32" and r["seconds"] > 0
        assert r["flops"] == 2 * r["batch"] * r["d_in"] * r["d_out"]
        assert r["bytes"] == matmul_bytes(r["batch"], r["d_in"], r["d_out"], 4)
        assert r["intensity"] == pytest.approx(arithmetic_intensity(r["batch"], r["d_in"], r["d_out"], 4))
        assert r["achieved"] == pytest.approx(r["flops"] / r["seconds"])
        assert r["fraction_of_peak"] == pytest.approx(r["achieved"] / peak)
        assert r["bound"] == roofline_bound(r["intensity"], peak, bandwidth)
    table = lab.format_table(records).splitlines()
    above = any(r["above_ceiling"] for r in records)  # depends on this machine's speed: both are fine
    assert "TFLOP/s" in table[0] and "7 x 73 x 5" in table[2]
    assert len(table) == 1 + len(shapes) + above and (table[-1] == lab.ABOVE_CEILING_NOTE) == above


def test_sweep_calls_the_timing_function_with_the_documented_signature():
    seen = []

    def spy(fn, warmup, repeat, timer, sync):
        seen.append((warmup, repeat, timer, sync))
        fn()
        return 1e-3

    records = lab.run_sweep([(2, 3, 4)], time_fn=spy, warmup=4, repeat=6)
    assert seen == [(4, 6, time.perf_counter, None)]  # no sync on the CPU
    assert records[0]["seconds"] == 1e-3 and "bound" not in records[0]


def _returns(value):
    def student_function(*args):
        return value

    return student_function


@pytest.mark.parametrize(
    "option,value",
    [
        ("time_fn", 0.0),
        ("time_fn", None),
        ("time_fn", float("nan")),
        ("time_fn", -1e-3),
        ("flops_fn", 0),
        ("bytes_fn", "many"),
        ("bytes_fn", True),
    ],
)
def test_sweep_names_a_student_function_whose_result_cannot_be_used(option, value):
    message = (
        rf"the \w+ student_function returned for shape \(7, 73, 5\) "
        rf"should be a positive finite number, got {value!r}"
    )
    with pytest.raises(ValueError, match=message):
        lab.run_sweep([(7, 73, 5)], **{option: _returns(value)}, warmup=0, repeat=1)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: lab.run_sweep([(1, 2)]), r"\(B, d_in, d_out\) triple, got \(1, 2\)"),
        (lambda: lab.make_matmul(0, 4, 4), "batch should be an integer >= 1, got 0"),
        (lambda: lab.make_matmul(2, 4.5, 4), "d_in should be an integer >= 1, got 4.5"),
        (lambda: lab.make_matmul(2, 4, 4, precision="fp64"), "precision must be one of"),
        (lambda: lab.bytes_per_element("fp8"), "precision must be one of"),
        (lambda: lab.reference_time(lambda: None, repeat=0), "repeat should be an integer >= 1, got 0"),
        (lambda: lab.measure_peak_flops(size=-1), "size should be an integer >= 1, got -1"),
        (lambda: lab.measure_bandwidth(megabytes=0), "megabytes should be an integer >= 1, got 0"),
        (lambda: lab.roofline_plot([], 1e9, 1e9), "at least one record"),
        (
            lambda: lab.roofline_plot([{"intensity": 1.0}], 1e9, 0.0),
            "bandwidth should be a positive finite number",
        ),
    ],
)
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_default_shapes_include_awkward_neighbours():
    shapes = lab.default_shapes("cpu")
    widths = {d_in for _, d_in, _ in shapes}
    assert {1024, 1025, 512, 513} <= widths
    assert 1 in {batch for batch, _, _ in shapes}
    assert len(shapes) == len(set(shapes))


def test_cpu_device_description_and_precisions():
    assert lab.precisions_for("cpu") == ["fp32"]
    assert lab.precisions_for("cuda") == ["fp32", "tf32", "bf16"]
    assert f"{lab.CPU_THREADS} thread" in lab.describe_device("cpu")
    assert "CPU" in lab.describe_device("cpu")
    assert lab.bytes_per_element("bf16") == 2 and lab.bytes_per_element("fp32") == 4
    assert lab.synchronizer("cpu") is None
    if not torch.cuda.is_available():
        assert lab.default_device() == "cpu"


def test_matmul_precision_restores_the_tf32_flag():
    before = torch.backends.cuda.matmul.allow_tf32
    with lab.matmul_precision("tf32"):
        assert torch.backends.cuda.matmul.allow_tf32
    with lab.matmul_precision("fp32"):
        assert not torch.backends.cuda.matmul.allow_tf32
    assert torch.backends.cuda.matmul.allow_tf32 == before
    with pytest.raises(ValueError, match="precision"):
        with lab.matmul_precision("fp8"):
            pass


def test_roofline_plot_draws_measured_points_under_the_ceilings():
    records = lab.run_sweep([(1, 64, 64), (64, 64, 64)], warmup=1, repeat=2)
    ax = lab.roofline_plot(records, peak_flops=1e11, bandwidth=1e10)
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    ceiling = ax.lines[0].get_ydata()
    assert ceiling.max() == pytest.approx(1e11)
    points = ax.collections[0].get_offsets()
    assert len(points) == 2
    matplotlib.pyplot.close("all")


def test_sweep_passes_number_to_the_timing_function_only_when_asked():
    seen = []

    def spy(fn, warmup, repeat, timer, sync, number=1):
        seen.append(number)
        return 1e-3

    lab.run_sweep([(2, 3, 4)], time_fn=spy, warmup=1, repeat=1, number=20)
    lab.run_sweep([(2, 3, 4)], time_fn=lambda fn, w, r, timer, sync: 1e-3, warmup=1, repeat=1)
    assert seen == [20]
    with pytest.raises(ValueError, match="number should be an integer >= 1, got 0"):
        lab.run_sweep([(2, 3, 4)], time_fn=spy, number=0)


def test_points_above_their_ceiling_are_flagged_and_explained():
    records = lab.run_sweep([(1, 64, 64), (64, 64, 64)], warmup=1, repeat=2, peak_flops=1.0, bandwidth=1.0)
    assert all(r["above_ceiling"] for r in records)  # a ceiling of 1 FLOP/s is beaten by every point
    table = lab.format_table(records)
    assert table.count(" !") == 2 and lab.ABOVE_CEILING_NOTE in table
    modest = lab.run_sweep([(1, 64, 64)], warmup=1, repeat=2, peak_flops=1e30, bandwidth=1e30)
    assert not modest[0]["above_ceiling"] and "!" not in lab.format_table(modest)


def test_sweep_and_ceilings_run_with_the_stated_thread_count():
    seen = []

    def spy(fn, warmup, repeat, timer, sync):
        seen.append(torch.get_num_threads())
        return 1e-3

    before = torch.get_num_threads()
    lab.run_sweep([(2, 3, 4)], time_fn=spy, warmup=1, repeat=1)
    assert seen == [lab.CPU_THREADS] and torch.get_num_threads() == before


def test_roofline_labels_of_close_points_do_not_overlap():
    records = [
        {
            "batch": b,
            "d_in": 512,
            "d_out": 512,
            "precision": "fp32",
            "intensity": 10.0 + b / 1000,
            "achieved": 1e9,
        }
        for b in (1, 2, 3)
    ]
    ax = lab.roofline_plot(records, peak_flops=1e11, bandwidth=1e10)
    offsets = [text.xyann for text in ax.texts if "x512" in text.get_text()]
    assert len(offsets) == 3 and len({dy for _, dy in offsets}) == 3
    matplotlib.pyplot.close("all")
