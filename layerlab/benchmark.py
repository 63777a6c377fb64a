"""Measuring dense layers: ceilings measured on this machine, a shape sweep, and a roofline plot.

The course's graded formulas (FLOPs, bytes, intensity, timing) are written by students in the
notebook; this module is the surrounding apparatus. `run_sweep` takes the student's own timing
function, `measure_peak_flops` and `measure_bandwidth` measure the two roofline ceilings on
the same device, and `roofline_plot` draws the result. Everything runs on the CPU (float32) and,
where a CUDA GPU is present, on the GPU in fp32, tf32 and bf16.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time

import numpy as np
import torch

PRECISIONS = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16}
CPU_THREADS = 1  # the ceilings and the sweep all run with this many threads on the CPU


def cuda_available() -> bool:
    return torch.cuda.is_available()


def default_device() -> str:
    """'cuda' when a CUDA GPU is usable, else 'cpu'."""
    return "cuda" if cuda_available() else "cpu"


def precisions_for(device: str) -> list[str]:
    """The precisions worth sweeping: fp32 on CPU; fp32, tf32 and bf16 on a GPU."""
    return ["fp32", "tf32", "bf16"] if device.startswith("cuda") else ["fp32"]


def describe_device(device: str) -> str:
    """One line naming the device, with the fixed thread count on CPU."""
    if device.startswith("cuda"):
        return f"GPU: {torch.cuda.get_device_name(torch.device(device))}"
    return (
        f"CPU: {CPU_THREADS} thread(s) for the ceilings and the sweep, float32 "
        "(no CUDA GPU found, so the benchmark runs on the CPU)"
    )


@contextlib.contextmanager
def fixed_threads(device: str):
    """Within the block, torch uses CPU_THREADS threads on the CPU (the count every measurement states)."""
    if device.startswith("cuda"):
        yield
        return
    saved = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(saved)


def dtype_of(precision: str) -> torch.dtype:
    """The torch dtype a precision name stores its tensors in; ValueError for an unknown name."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(PRECISIONS)}, got {precision!r}")
    return PRECISIONS[precision]


def bytes_per_element(precision: str) -> int:
    return torch.finfo(dtype_of(precision)).bits // 8


def _count(value, what: str, minimum: int = 1) -> int:
    """`value` as an int >= minimum, or a ValueError naming `what`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{what} should be an integer >= {minimum}, got {value!r}")
    return int(value)


def _measured(value, what: str) -> float:
    """`value` as a finite float > 0 (seconds, FLOPs, bytes), or a ValueError naming `what`."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise ValueError(f"{what} should be a positive finite number, got {value!r}")
    return number


@contextlib.contextmanager
def matmul_precision(precision: str):
    """Within the block, float32 matmuls on a GPU use TF32 tensor cores iff precision == 'tf32'."""
    dtype_of(precision)
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


def synchronizer(device: str):
    """A function that waits for queued work on `device`, or None on the CPU (nothing to wait for)."""
    return torch.cuda.synchronize if device.startswith("cuda") else None


def make_matmul(
    batch: int, d_in: int, d_out: int, device: str = "cpu", precision: str = "fp32", seed: int = 0
):
    """A zero-argument function computing one dense layer's product Z = X @ W.T.

    Inputs: batch B, d_in, d_out; X (B, d_in) and W (d_out, d_in) are random, on `device`, in
    the dtype of `precision`. Returns fn() -> Z of shape (B, d_out).
    """
    batch, d_in, d_out = (_count(n, name) for n, name in ((batch, "batch"), (d_in, "d_in"), (d_out, "d_out")))
    dtype = dtype_of(precision)
    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(batch, d_in, generator=generator).to(device=device, dtype=dtype)
    W = torch.randn(d_out, d_in, generator=generator).to(device=device, dtype=dtype)
    return lambda: torch.nn.functional.linear(X, W)


def reference_time(fn, device: str = "cpu", warmup: int = 3, repeat: int = 10) -> float:
    """Median seconds of one fn() call, warm-up excluded.

    On a GPU each run is timed with CUDA events (recorded on the stream around the call); on the
    CPU with time.perf_counter.
    """
    warmup, repeat = _count(warmup, "warmup", 0), _count(repeat, "repeat")
    for _ in range(warmup):
        fn()
    samples = []
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        for _ in range(repeat):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1e3)
    else:
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure_peak_flops(
    device: str = "cpu", precision: str = "fp32", size: int | None = None, repeat: int = 5
) -> float:
    """FLOP/s of square matmuls (n x n, 2*n**3 FLOPs): the compute ceiling.

    Several sizes are tried unless `size` is given (on the CPU also sizes whose operands fit in
    cache, as the sweep's do), and the fastest of `repeat` runs of each is taken: a ceiling is the
    best the device reaches.
    """
    sizes = (
        [_count(size, "size")]
        if size is not None
        else ([4096, 8192] if device.startswith("cuda") else [256, 512, 1024])
    )
    repeat = _count(repeat, "repeat")
    best = 0.0
    with matmul_precision(precision), fixed_threads(device):
        for n in sizes:
            fn = make_matmul(n, n, n, device, precision)
            seconds = min(reference_time(fn, device, warmup=1, repeat=1) for _ in range(repeat))
            best = max(best, 2.0 * n**3 / seconds)
    return best


def measure_bandwidth(device: str = "cpu", megabytes: int | None = None, repeat: int = 3) -> float:
    """Bytes per second of a large tensor copy (each byte read once and written once): the memory ceiling."""
    megabytes = (
        _count(megabytes, "megabytes")
        if megabytes is not None
        else (1024 if device.startswith("cuda") else 64)
    )
    repeat = _count(repeat, "repeat")
    source = torch.empty(megabytes * 2**20 // 4, dtype=torch.float32, device=device).uniform_()
    target = torch.empty_like(source)
    with fixed_threads(device):
        seconds = min(
            reference_time(lambda: target.copy_(source), device, warmup=1, repeat=3) for _ in range(repeat)
        )
    return 2.0 * source.numel() * 4 / seconds


def default_shapes(device: str = "cpu") -> list[tuple[int, int, int]]:
    """(B, d_in, d_out) shapes: a batch sweep at a fixed width and a width sweep with awkward sizes."""
    if device.startswith("cuda"):
        width, batches, widths, batch = (
            4096,
            [1, 16, 128, 1024, 4096, 8192],
            [1023, 1024, 1025, 4095, 4096, 8192],
            4096,
        )
    else:
        width, batches, widths, batch = 512, [1, 8, 64, 256, 1024], [255, 256, 511, 512, 513, 1024, 1025], 256
    shapes = [(b, width, width) for b in batches] + [(batch, w, w) for w in widths]
    return list(dict.fromkeys(shapes))


def default_flops(batch, d_in, d_out):
    return 2 * batch * d_in * d_out


def default_bytes(batch, d_in, d_out, element_bytes):
    return (batch * d_in + d_out * d_in + batch * d_out) * element_bytes


def run_sweep(
    shapes,
    time_fn=None,
    device: str = "cpu",
    precision: str = "fp32",
    warmup: int = 2,
    repeat: int = 5,
    peak_flops: float | None = None,
    bandwidth: float | None = None,
    flops_fn=default_flops,
    bytes_fn=default_bytes,
    number: int = 1,
) -> list[dict]:
    """Time Z = X @ W.T for every (B, d_in, d_out) in `shapes`.

    Inputs:
    - time_fn: a timing function with the signature time_op(fn, warmup, repeat, timer, sync[, number])
      returning median seconds per call (the notebook's own); None uses `reference_time`.
    - number: calls per timed window, passed to time_fn as a sixth argument when it is not 1
      (short GPU kernels are timed many calls at a time).
    - peak_flops, bandwidth: measured ceilings; when given, each record also has the fraction
      of peak and the bound the roofline predicts.
    - flops_fn(B, d_in, d_out) and bytes_fn(B, d_in, d_out, bytes_per_element): the counting
      formulas (pass the notebook's own).
    Returns one dict per shape: batch, d_in, d_out, precision, device, seconds, flops, bytes,
    intensity (FLOP/byte), achieved (FLOP/s) and, with ceilings, fraction_of_peak, bound and
    above_ceiling (True when the point beats min(peak, bandwidth * intensity): see format_table).
    On the CPU everything runs with CPU_THREADS threads, like the ceilings.
    """
    records = []
    element_bytes = bytes_per_element(precision)
    extra = () if _count(number, "number") == 1 else (number,)
    with matmul_precision(precision), fixed_threads(device):
        for shape in shapes:
            if not isinstance(shape, (tuple, list)) or len(shape) != 3:
                raise ValueError(f"each shape should be a (B, d_in, d_out) triple, got {shape!r}")
            batch, d_in, d_out = shape
            fn = make_matmul(batch, d_in, d_out, device, precision)
            if time_fn is None:
                seconds = reference_time(fn, device, warmup, repeat)
            else:
                seconds = _measured(
                    time_fn(fn, warmup, repeat, time.perf_counter, synchronizer(device), *extra),
                    f"the seconds {_name(time_fn)} returned for shape {shape}",
                )
            flops = _measured(
                flops_fn(batch, d_in, d_out), f"the FLOPs {_name(flops_fn)} returned for shape {shape}"
            )
            moved = _measured(
                bytes_fn(batch, d_in, d_out, element_bytes),
                f"the bytes {_name(bytes_fn)} returned for shape {shape}",
            )
            record = {
                "batch": batch,
                "d_in": d_in,
                "d_out": d_out,
                "precision": precision,
                "device": device,
                "seconds": seconds,
                "flops": flops,
                "bytes": moved,
                "intensity": flops / moved,
                "achieved": flops / seconds,
            }
            if peak_flops and bandwidth:
                record["fraction_of_peak"] = record["achieved"] / peak_flops
                record["bound"] = "memory" if record["intensity"] < peak_flops / bandwidth else "compute"
                record["above_ceiling"] = record["achieved"] > min(
                    peak_flops, bandwidth * record["intensity"]
                )
            records.append(record)
    return records


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


ABOVE_CEILING_NOTE = (
    "! above its own measured ceiling: above the flat line the peak was measured while the machine "
    "was busy (measure again); above the slanted line the operands stayed in cache, which is faster "
    "than the main memory the copy measured."
)


def format_table(records, peak_flops: float | None = None) -> str:
    """A plain-text table: shape, precision, time, achieved TFLOP/s and fraction of the peak.

    A point above its own roofline ceiling is marked "!" and explained in a last line.
    """
    lines = [f"{'B x d_in x d_out':>22} {'prec':>5} {'ms':>9} {'TFLOP/s':>9} {'of peak':>8} {'FLOP/B':>8}"]
    for r in records:
        fraction = r.get("fraction_of_peak", r["achieved"] / peak_flops if peak_flops else float("nan"))
        shape = f"{r['batch']} x {r['d_in']} x {r['d_out']}"
        lines.append(
            f"{shape:>22} {r['precision']:>5} {r['seconds'] * 1e3:9.3f} {r['achieved'] / 1e12:9.4f} "
            f"{fraction:8.1%} {r['intensity']:8.1f}" + (" !" if r.get("above_ceiling") else "")
        )
    if any(r.get("above_ceiling") for r in records):
        lines.append(ABOVE_CEILING_NOTE)
    return "\n".join(lines)


def _label_offsets(ax, points, step: float = 9.0, gap: float = 30.0) -> list[tuple[float, float]]:
    """Label offsets (in points), one per point, so that no two labels start within gap x step points."""
    placed: list[tuple[float, float]] = []
    offsets = []
    scale = ax.figure.dpi / 72.0
    for x, y in ax.transData.transform(points) / scale:
        dy = 3.0
        while any(abs(x - px) < gap and abs(y + dy - py) < step for px, py in placed):
            dy -= step
        placed.append((x, y + dy))
        offsets.append((4.0, dy))
    return offsets


def roofline_plot(records, peak_flops: float, bandwidth: float, ax=None, title: str | None = None):
    """Achieved FLOP/s against arithmetic intensity, under the measured ceilings (log-log).

    The slanted ceiling is bandwidth * intensity (memory-bound), the flat one the measured
    peak; they meet at the ridge point peak / bandwidth. Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt  # 1.2 s measured: paid by a plot, not by every sweep

    if not records:
        raise ValueError("roofline_plot needs at least one record from run_sweep")
    _measured(peak_flops, "peak_flops")
    _measured(bandwidth, "bandwidth")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 5))
    intensities = np.array([r["intensity"] for r in records])
    ridge = peak_flops / bandwidth
    grid = np.logspace(
        np.log10(min(intensities.min(), ridge) / 2), np.log10(max(intensities.max(), ridge) * 2), 200
    )
    ax.plot(
        grid,
        np.minimum(peak_flops, bandwidth * grid),
        color="#444444",
        linewidth=2,
        label="measured ceilings",
    )
    ax.axvline(ridge, color="#999999", linestyle=":", linewidth=1)
    ax.annotate(
        f"ridge {ridge:.0f} FLOP/B",
        (ridge, peak_flops),
        textcoords="offset points",
        xytext=(5, -15),
        color="#555555",
    )
    colours = {"fp32": "#1f4e79", "tf32": "#2a9d8f", "bf16": "#e07a3f"}
    ax.set_xscale("log")
    ax.set_yscale("log")
    for precision in dict.fromkeys(r["precision"] for r in records):
        chosen = [r for r in records if r["precision"] == precision]
        colour = colours.get(precision, "#708090")
        above = [bool(r["achieved"] > min(peak_flops, bandwidth * r["intensity"])) for r in chosen]
        ax.scatter(
            [r["intensity"] for r in chosen],
            [r["achieved"] for r in chosen],
            s=36,
            color=colour,
            label=f"measured, {precision}",
            zorder=3,
        )
        if any(above):
            ax.scatter(
                [r["intensity"] for r, flag in zip(chosen, above) if flag],
                [r["achieved"] for r, flag in zip(chosen, above) if flag],
                s=90,
                facecolors="none",
                edgecolors="#c0392b",
                label="above its own ceiling (see the table's note)",
                zorder=4,
            )
    ax.relim()
    ax.autoscale_view()
    for r, offset in zip(records, _label_offsets(ax, [(r["intensity"], r["achieved"]) for r in records])):
        awkward = r["d_in"] % 64 != 0 or r["batch"] % 8 != 0
        ax.annotate(
            f"{r['batch']}x{r['d_in']}" + ("*" if awkward else ""),
            (r["intensity"], r["achieved"]),
            textcoords="offset points",
            xytext=offset,
            fontsize=7,
            color="#333333",
        )
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(title or "Roofline of a dense layer's matmul")
    ax.legend(frameon=False, loc="lower right")
    return ax
