"""Does layerlab's reference timing agree with torch.utils.benchmark.Timer on the same shapes?

    python benchmarks/timing_agreement.py [--threads 1] [--calls 21]

Both timers take turns call by call with the same thread count, so load from other programs
falls on both medians alike. Prints the ratio of the medians per shape; exits 1 when a ratio is
more than 10% away from 1. Run it on a quiet machine: it is a measurement, not a unit test.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import torch
from torch.utils import benchmark as torch_benchmark

from grader.reference.benchmark import time_op
from layerlab import benchmark as lab

SHAPES = [(1024, 1024, 1024), (768, 1536, 1024), (1025, 1024, 1024)]


def agreement(shape, threads: int, calls: int) -> tuple[float, float]:
    """(reference_time / Timer, time_op / reference_time): medians of alternating single calls."""
    fn = lab.make_matmul(*shape)
    timer = torch_benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    fn()
    ours, theirs, students = [], [], []
    for _ in range(calls):
        ours.append(lab.reference_time(fn, "cpu", warmup=0, repeat=1))
        theirs.append(timer.timeit(1).median)
        students.append(time_op(fn, 0, 1))
    return statistics.median(ours) / statistics.median(theirs), statistics.median(
        students
    ) / statistics.median(ours)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=21)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{'shape (B, d_in, d_out)':>24}  {'reference/Timer':>15}  {'time_op/reference':>17}")
    worst = 0.0
    for shape in SHAPES:
        versus_timer, versus_reference = agreement(shape, args.threads, args.calls)
        worst = max(worst, abs(versus_timer - 1), abs(versus_reference - 1))
        print(f"{str(shape):>24}  {versus_timer:>15.3f}  {versus_reference:>17.3f}")
    print(f"largest disagreement: {worst:.1%} (target: within 10%) with {args.threads} thread(s)")
    return 0 if worst <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
