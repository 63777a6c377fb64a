"""Dense-layer matmul sweep on the best available device; prints a table last.

    python benchmarks/matmul_sweep.py            # CUDA if available (fp32, tf32, bf16), else CPU fp32
    python benchmarks/matmul_sweep.py --quick    # fewer shapes

Columns: shape (B x d_in x d_out), precision, median time, achieved TFLOP/s, fraction of the peak
measured on the same device (a large square matmul), and arithmetic intensity.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from grader.reference.benchmark import time_op
from layerlab import benchmark as lab


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sweep fewer shapes")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    args = parser.parse_args(argv)
    device = args.device or lab.default_device()
    if device.startswith("cuda") and not torch.cuda.is_available():
        print("CUDA requested but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    shapes = lab.default_shapes(device)
    if args.quick:
        shapes = shapes[::2]
    print(lab.describe_device(device), f"| torch {torch.__version__}", flush=True)
    start = time.perf_counter()
    records = []
    bandwidth = lab.measure_bandwidth(device)  # a plain copy: the same for every precision
    for precision in lab.precisions_for(device):
        peak = lab.measure_peak_flops(device, precision)
        print(
            f"{precision}: measured peak {peak / 1e12:.2f} TFLOP/s, bandwidth {bandwidth / 1e9:.0f} GB/s, "
            f"ridge {peak / bandwidth:.0f} FLOP/byte",
            flush=True,
        )
        records += lab.run_sweep(
            shapes,
            time_fn=time_op,
            device=device,
            precision=precision,
            warmup=3,
            repeat=10,
            peak_flops=peak,
            bandwidth=bandwidth,
        )
    print(f"sweep took {time.perf_counter() - start:.1f} s\n")
    print(lab.format_table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
