"""GPU timing: CUDA events, synchronisation and agreement with torch.utils.benchmark (fp32/tf32/bf16).

Run by benchmarks/gpu_check.sh on a machine with an NVIDIA GPU; skipped elsewhere.
"""

from __future__ import annotations

import statistics

import pytest
import torch
from torch.utils import benchmark as torch_benchmark

from grader.reference.benchmark import time_op
from layerlab import benchmark as lab

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available(),
        reason="no CUDA GPU: torch.cuda.is_available() is False (CPU-only torch build or no NVIDIA driver)",
    ),
]

SHAPE = (4096, 4096, 4096)


def _agreement(fn) -> float:
    timer = torch_benchmark.Timer(stmt="fn(); torch.cuda.synchronize()", globals={"fn": fn, "torch": torch})
    ours, theirs = [], []
    for _ in range(3):
        ours.append(lab.reference_time(fn, "cuda", warmup=3, repeat=20))
        theirs.append(timer.blocked_autorange(min_run_time=0.2).median)
    return statistics.median(ours) / statistics.median(theirs)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_cuda_event_timing_agrees_with_torch_utils_benchmark(precision):
    fn = lab.make_matmul(*SHAPE, device="cuda", precision=precision)
    with lab.matmul_precision(precision):
        ratio = _agreement(fn)
        if abs(ratio - 1) > 0.10:
            ratio = _agreement(fn)
    assert abs(ratio - 1) <= 0.10, f"{precision}: CUDA events / torch.utils.benchmark = {ratio:.3f}"


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_time_op_with_synchronize_agrees_with_cuda_events(precision):
    fn = lab.make_matmul(*SHAPE, device="cuda", precision=precision)
    with lab.matmul_precision(precision):
        for _ in range(2):
            ratio = time_op(fn, 3, 20, sync=torch.cuda.synchronize) / lab.reference_time(fn, "cuda", 3, 20)
            if abs(ratio - 1) <= 0.10:
                break
    assert abs(ratio - 1) <= 0.10, f"{precision}: time_op with sync / CUDA events = {ratio:.3f}"


def test_time_op_without_synchronize_measures_only_the_launch():
    fn = lab.make_matmul(8192, 8192, 8192, device="cuda", precision="fp32")
    with lab.matmul_precision("fp32"):
        synced = time_op(fn, 2, 5, sync=torch.cuda.synchronize)
        unsynced = time_op(fn, 2, 5)
        torch.cuda.synchronize()
    assert unsynced < 0.5 * synced, (unsynced, synced)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_measured_peak_is_positive_and_the_sweep_stays_below_it(precision):
    peak = lab.measure_peak_flops("cuda", precision)
    bandwidth = lab.measure_bandwidth("cuda")
    assert peak > 1e12 and bandwidth > 1e11
    records = lab.run_sweep(
        [(4096, 4096, 4096), (1, 4096, 4096)],
        time_fn=time_op,
        device="cuda",
        precision=precision,
        peak_flops=peak,
        bandwidth=bandwidth,
    )
    assert (
        records[1]["bound"] == "memory"
    )  # one row through a 4096-wide layer reads 16M weights for 33M FLOPs
    for r in records:
        assert 0 < r["fraction_of_peak"] < 1.3, r  # a little headroom: the peak is itself a measurement


def test_bf16_sweep_uses_two_bytes_per_element():
    records = lab.run_sweep([(64, 1024, 1024)], device="cuda", precision="bf16", warmup=1, repeat=3)
    assert records[0]["bytes"] == (64 * 1024 + 1024 * 1024 + 64 * 1024) * 2
