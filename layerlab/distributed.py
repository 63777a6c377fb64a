"""Tensor parallelism on real processes: one CPU process per rank, talking through gloo.

`run_on_processes` starts `world_size` processes, initialises a gloo process group in each
(rendezvous through a file in a fresh temporary folder, so concurrent runs never share a port
or a file), calls `worker(rank, world_size, *args)` and returns the workers' results in rank
order. `tensor_parallel_on_processes` uses it to run a column- or row-parallel linear layer
from shards given as data, forward and backward, with the f/g communication pair written as
`torch.autograd.Function`s. `time_collectives` and `fit_alpha_beta` measure the collectives.

Results are pickled in the rank and travel back as bytes through a multiprocessing queue, so
they must be picklable (NumPy arrays, tensors, numbers, strings). Every run has a deadline:
when it passes, the rank processes are killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from datetime import timedelta
from queue import Empty

import numpy as np
import torch
import torch.distributed as dist

KINDS = ("column", "row")
COMBINES = ("all_gather", "all_reduce", "none")
EXIT_GRACE_S = 5.0


class DistributedRunError(RuntimeError):
    """A rank failed; the message holds the rank number and its traceback."""


class DistributedTimeout(TimeoutError):
    """The ranks did not all report back before the deadline; they were killed."""


def default_start_method() -> str:
    """'fork' where the platform has it (functions defined in a notebook then work), else 'spawn'."""
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _loopback_interface() -> str | None:
    names = [name for _, name in socket.if_nameindex()] if hasattr(socket, "if_nameindex") else []
    return next((name for name in ("lo", "lo0") if name in names), None)


def _die_with_parent() -> None:
    """Ask Linux to kill this process if the parent dies, so no rank outlives a crashed run."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _rank_main(worker, rank: int, world_size: int, init_file: str, timeout: float, args, results) -> None:
    """Body of one rank process: join the group, run the worker, report, leave quickly."""
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)
    _die_with_parent()
    # One thread per rank: avoids oversubscribing small machines and OpenMP's trouble after fork.
    torch.set_num_threads(1)
    if "GLOO_SOCKET_IFNAME" not in os.environ and (interface := _loopback_interface()):
        os.environ["GLOO_SOCKET_IFNAME"] = interface
    try:
        dist.init_process_group(
            "gloo",
            init_method=f"file://{init_file}",
            rank=rank,
            world_size=world_size,
            timeout=timedelta(seconds=max(timeout, 1.0)),
        )
        value = worker(rank, world_size, *args)
        dist.barrier()  # nobody leaves before every rank is connected and done
        try:  # by value here: the rank exits at once, so nothing may be left to fetch from it later
            payload = pickle.dumps(value)
        except Exception as error:
            raise TypeError(
                f"the worker returned {type(value).__name__}, which cannot be sent back to the "
                f"parent ({error}); return NumPy arrays, numbers or strings"
            ) from None
        results.put((rank, "ok", payload))
    except BaseException as error:  # reported to the parent, which raises DistributedRunError
        results.put((rank, "error", f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=6)}"))
    finally:
        results.close()
        results.join_thread()
    # Skip interpreter teardown: gloo sometimes aborts in its destructors once the work is done.
    os._exit(0)


def _kill(process) -> None:
    if process.pid is None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        process.kill()


def run_on_processes(
    worker, world_size: int, args: tuple = (), timeout: float = 60.0, start_method: str | None = None
) -> list:
    """Run `worker(rank, world_size, *args)` on `world_size` gloo ranks; return results by rank.

    Inputs:
    - worker: a function of (rank, world_size, *args) returning picklable data. With the
      'fork' start method it may be defined anywhere (also in a notebook); with 'spawn' it must
      be importable from a module.
    - world_size: number of processes, >= 1.
    - args: picklable data given to every rank (each rank picks its own part by `rank`).
    - timeout: seconds for the whole run, including process start-up.
    - start_method: 'fork' or 'spawn' (default: `default_start_method()`).

    Returns a list of length world_size: the value each rank's worker returned.
    Raises DistributedRunError when a rank raises, DistributedTimeout past the deadline. A rank
    that exits abnormally after its result has arrived is tolerated.
    """
    if type(world_size) is not int or world_size < 1:
        raise ValueError(f"world_size must be a positive integer, got {world_size!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, np.number)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    context = multiprocessing.get_context(start_method or default_start_method())
    folder = tempfile.mkdtemp(prefix="layerlab-gloo-")
    init_file = os.path.join(folder, "rendezvous")
    results = context.Queue()
    processes = [
        context.Process(
            target=_rank_main,
            daemon=True,
            name=f"rank-{rank}",
            args=(worker, rank, world_size, init_file, timeout, tuple(args), results),
        )
        for rank in range(world_size)
    ]
    deadline = time.monotonic() + timeout
    received: dict[int, object] = {}
    try:
        for process in processes:
            process.start()
        while len(received) < world_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                missing = sorted(set(range(world_size)) - set(received))
                raise DistributedTimeout(f"ranks {missing} did not finish within {timeout:g} s")
            try:
                rank, status, value = results.get(timeout=min(remaining, 0.5))
            except Empty:
                dead = [
                    p for index, p in enumerate(processes) if index not in received and p.exitcode is not None
                ]
                if not dead:
                    continue
                try:  # its result may still be in the pipe
                    rank, status, value = results.get(timeout=1.0)
                except Empty:
                    raise DistributedRunError(
                        f"{dead[0].name} exited with code {dead[0].exitcode} before reporting a result"
                    ) from None
            if status == "error":
                crashed = [
                    p
                    for index, p in enumerate(processes)
                    if index not in received and index != rank and p.exitcode not in (None, 0)
                ]
                cause = "".join(f"{p.name} exited with code {p.exitcode} first; " for p in crashed)
                raise DistributedRunError(f"{cause}rank {rank} failed: {value}")
            received[rank] = value
        for process in processes:
            process.join(timeout=max(0.1, min(EXIT_GRACE_S, deadline - time.monotonic())))
        return [pickle.loads(received[rank]) for rank in range(world_size)]
    finally:
        for process in processes:
            if process.is_alive():
                _kill(process)
        for process in processes:
            with contextlib.suppress(Exception):
                process.join(timeout=1.0)
        results.close()
        results.cancel_join_thread()
        shutil.rmtree(folder, ignore_errors=True)


# ---- the communication operators, as autograd functions -----------------------------------


class CopyToRanks(torch.autograd.Function):
    """f: identity forward, all-reduce (sum) backward. Put in front of a column-parallel layer.

    Every rank uses the full input X; each rank's gradient G_i W_i is only part of dL/dX.
    """

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad


class ReduceFromRanks(torch.autograd.Function):
    """g: all-reduce (sum) forward, identity backward. Ends a row-parallel layer.

    Each rank holds a partial product X_i W_i^T; their sum is the layer's output.
    """

    @staticmethod
    def forward(ctx, partial):
        total = partial.clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total

    @staticmethod
    def backward(ctx, grad):
        return grad


def _all_gather_last_dim(piece: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    """Concatenate every rank's (..., sizes[r]) piece along the last axis (uneven sizes padded)."""
    widest = max(sizes)
    padded = torch.nn.functional.pad(piece, (0, widest - piece.shape[-1])).contiguous()
    buffers = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(buffers, padded)
    return torch.cat([buffer[..., :size] for buffer, size in zip(buffers, sizes)], dim=-1)


class GatherFromRanks(torch.autograd.Function):
    """All-gather forward (concatenate the ranks' column blocks), slice backward."""

    @staticmethod
    def forward(ctx, piece, sizes):
        ctx.sizes = list(sizes)
        return _all_gather_last_dim(piece, ctx.sizes)

    @staticmethod
    def backward(ctx, grad):
        start = sum(ctx.sizes[: dist.get_rank()])
        return grad[..., start : start + ctx.sizes[dist.get_rank()]].contiguous(), None


class SplitToRanks(torch.autograd.Function):
    """Keep this rank's column block forward, all-gather backward (the mirror of GatherFromRanks)."""

    @staticmethod
    def forward(ctx, full, sizes):
        ctx.sizes = list(sizes)
        start = sum(ctx.sizes[: dist.get_rank()])
        return full[..., start : start + ctx.sizes[dist.get_rank()]].contiguous()

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_last_dim(grad.contiguous(), ctx.sizes), None


# ---- a linear layer split across ranks ------------------------------------------------------


def _tensor(array) -> torch.Tensor:
    return torch.tensor(np.asarray(array, dtype=np.float64), dtype=torch.float64)


def _numpy(tensor: torch.Tensor | None):
    return None if tensor is None else tensor.detach().numpy().copy()


def _tensor_parallel_rank(
    rank: int, world_size: int, kind: str, X, shards, b, upstream, combine: str
) -> dict:
    """One rank's share of a split layer, forward then backward of sum(Z * upstream).

    shards[r] = (W_r, b_r or None). Column kind: W_r (rows_r, d_in), and every rank sees all of
    X. Row kind: W_r (d_out, cols_r), rank r sees X's column block r, b_r (d_out,) is a bias the
    rank adds itself before the reduction, and `b` (d_out,) is added once after it.
    Returns this rank's output Z, dL/dX, and the gradients of its own shard.
    """
    X = _tensor(X).requires_grad_(True)
    G = _tensor(upstream)
    weight, bias = (None if part is None else _tensor(part).requires_grad_(True) for part in shards[rank])
    if kind == "column":
        local = CopyToRanks.apply(X) if combine != "none" else X
    else:
        local = SplitToRanks.apply(X, [int(np.shape(W_r)[1]) for W_r, _ in shards])
    Z_local = local @ weight.T + (bias if bias is not None else 0.0)
    if combine == "all_gather":
        Z = GatherFromRanks.apply(Z_local, [int(np.shape(W_r)[0]) for W_r, _ in shards])
    elif combine == "all_reduce":
        Z = ReduceFromRanks.apply(Z_local)
    else:
        Z = Z_local
    shared_bias = None if kind == "column" or b is None else _tensor(b).requires_grad_(True)
    if shared_bias is not None and Z.shape[-1] == shared_bias.shape[0]:
        Z = Z + shared_bias
    (Z * (G if G.shape == Z.shape else torch.ones_like(Z))).sum().backward()
    return {
        "Z": _numpy(Z),
        "dX": _numpy(X.grad),
        "dW": _numpy(weight.grad),
        "db": _numpy(bias.grad) if bias is not None else None,
        "db_shared": _numpy(shared_bias.grad) if shared_bias is not None else None,
        "weight_shape": tuple(weight.shape),
    }


def _checked_shards(kind: str, shards, X: np.ndarray, b, upstream, combine: str):
    """[(W_i, b_i or None)] in float64, b and upstream as float64 arrays, all checked against X.

    A shard is a weight W_i, or a pair (W_i, b_i) whose first item is 2-D. Raises ValueError
    naming the shard or argument whose shape does not fit the split.
    """
    if X.ndim != 2:
        raise ValueError(f"X should be 2-D (B, d_in), but has shape {X.shape}")
    if not isinstance(shards, (list, tuple)) or not shards:
        got = "an empty list" if isinstance(shards, (list, tuple)) else type(shards).__name__
        raise ValueError(f"shards should be a list with one shard per rank, got {got}")
    batch, d_in = X.shape
    pairs = []
    for rank, shard in enumerate(shards):
        is_pair = isinstance(shard, (tuple, list)) and len(shard) == 2 and np.ndim(shard[0]) == 2
        weight, bias = shard if is_pair else (shard, None)
        try:
            weight = np.asarray(weight, dtype=np.float64)
            bias = None if bias is None else np.asarray(bias, dtype=np.float64)
        except (TypeError, ValueError) as error:
            raise ValueError(f"shard {rank} is not made of rectangular arrays of numbers ({error})") from None
        if weight.ndim != 2:
            raise ValueError(f"shard {rank}'s weight should be 2-D, but has shape {weight.shape}")
        if bias is not None and bias.shape != weight.shape[:1]:
            raise ValueError(f"shard {rank}'s bias should have shape {weight.shape[:1]}, not {bias.shape}")
        if kind == "column" and weight.shape[1] != d_in:
            raise ValueError(
                f"shard {rank}'s weight has shape {weight.shape}; a column-parallel shard needs "
                f"{d_in} columns, one per input feature of X {X.shape}"
            )
        pairs.append((weight, bias))
    rows, columns = ([weight.shape[axis] for weight, _ in pairs] for axis in (0, 1))
    if kind == "row" and (len(set(rows)) > 1 or sum(columns) != d_in):
        raise ValueError(
            f"the row-parallel shards have shapes {[w.shape for w, _ in pairs]}; they need the same "
            f"number of output rows and columns adding up to X's {d_in} input features"
        )
    if combine == "all_reduce" and len(set(rows)) > 1:
        raise ValueError(f"all_reduce sums equal-sized blocks, but the shards have {rows} rows")
    d_out = sum(rows) if kind == "column" else rows[0]
    b = None if b is None else np.asarray(b, dtype=np.float64)
    if b is not None and b.shape != (d_out,):
        raise ValueError(f"b should have shape ({d_out},), not {b.shape}")
    upstream = np.ones((batch, d_out)) if upstream is None else np.asarray(upstream, dtype=np.float64)
    if upstream.shape != (batch, d_out):
        raise ValueError(f"upstream should have shape {(batch, d_out)} (dL/dZ), not {upstream.shape}")
    return pairs, b, upstream


@dataclass
class TensorParallelRun:
    """What a split layer computed on real processes (rank 0's copy of replicated values).

    Z: (B, d_out) output; dX: (B, d_in) = dL/dX; dW: shards' weight gradients reassembled
    (concatenated along the split axis); db: (d_out,) bias gradient; rank_Z: every rank's own Z;
    weight_shapes: each rank's weight shard shape.
    """

    kind: str
    world_size: int
    combine: str
    Z: np.ndarray
    dX: np.ndarray
    dW: np.ndarray | None
    db: np.ndarray | None
    rank_Z: list = field(default_factory=list)
    rank_dX: list = field(default_factory=list)
    weight_shapes: list = field(default_factory=list)
    seconds: float = 0.0


def tensor_parallel_on_processes(
    kind: str,
    shards,
    X,
    b=None,
    upstream=None,
    combine: str | None = None,
    timeout: float = 60.0,
    start_method: str | None = None,
) -> TensorParallelRun:
    """Run a split linear layer on len(shards) gloo processes, forward and backward, in float64.

    Inputs:
    - kind: "column" (split by output rows; shards = [(W_i (rows_i, d_in), b_i (rows_i,)), ...])
      or "row" (split by input columns; shards = [W_i (d_out, cols_i), ...], or (W_i, b_i)
      pairs when each rank adds a bias of its own).
    - X: (B, d_in) input; b: (d_out,) bias added once after the reduction (row kind only).
    - upstream: (B, d_out) gradient dL/dZ for the backward pass (default: ones).
    - combine: how ranks combine their results: "all_gather", "all_reduce" or "none"
      (default: all_gather for column, all_reduce for row).

    Returns a TensorParallelRun. Raises ValueError for a bad kind or combine, or shapes that do
    not fit together (naming the shard), and the errors of `run_on_processes`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    combine = combine or ("all_gather" if kind == "column" else "all_reduce")
    if combine not in COMBINES:
        raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
    X = np.asarray(X, dtype=np.float64)
    pairs, b, upstream = _checked_shards(kind, shards, X, b, upstream, combine)
    start = time.perf_counter()
    ranks = run_on_processes(
        _tensor_parallel_rank,
        len(pairs),
        (kind, X, pairs, b, upstream, combine),
        timeout=timeout,
        start_method=start_method,
    )
    seconds = time.perf_counter() - start
    axis = 0 if kind == "column" else 1
    dW = np.concatenate([rank["dW"] for rank in ranks], axis=axis)
    if kind == "column":
        db = (
            np.concatenate([rank["db"] for rank in ranks])
            if all(rank["db"] is not None for rank in ranks)
            else None
        )
    else:
        db = ranks[0]["db_shared"]
        if db is None and ranks[0]["db"] is not None:
            db = sum(rank["db"] for rank in ranks)
    return TensorParallelRun(
        kind,
        len(pairs),
        combine,
        ranks[0]["Z"],
        ranks[0]["dX"],
        dW,
        db,
        [rank["Z"] for rank in ranks],
        [rank["dX"] for rank in ranks],
        [rank["weight_shape"] for rank in ranks],
        seconds,
    )


# ---- measuring the collectives --------------------------------------------------------------


def _collective_timing_rank(rank: int, world_size: int, sizes, repeat: int, warmup: int) -> dict:
    timings = {"all_gather": [], "all_reduce": []}
    for size in sizes:
        piece = torch.randn(max(1, size // world_size), dtype=torch.float32)
        full = torch.randn(size, dtype=torch.float32)
        gathered = [torch.empty_like(piece) for _ in range(world_size)]
        for name, op in (
            ("all_gather", lambda: dist.all_gather(gathered, piece)),
            ("all_reduce", lambda: dist.all_reduce(full)),
        ):
            for _ in range(warmup):
                op()
            samples = []
            for _ in range(repeat):
                dist.barrier()
                start = time.perf_counter()
                op()
                samples.append(time.perf_counter() - start)
            timings[name].append(float(np.median(samples)))
    return timings


def time_collectives(
    sizes, world_size: int = 2, repeat: int = 7, warmup: int = 2, timeout: float = 60.0
) -> dict[str, np.ndarray]:
    """Median seconds of all_gather and all_reduce (float32) for each total output size.

    Inputs: sizes, a list of element counts N (the full output B*d_out); world_size ranks.
    all_gather: each rank contributes N/p elements and receives all N; all_reduce: every rank
    holds N elements and ends with their sum.
    Returns {"sizes": (S,), "all_gather": (S,), "all_reduce": (S,)}, the slowest rank's
    median per size.
    """
    sizes = [int(size) for size in sizes]
    if (
        not sizes
        or min(sizes) < 1
        or type(repeat) is not int
        or repeat < 1
        or type(warmup) is not int
        or warmup < 0
    ):
        raise ValueError(
            f"time_collectives needs positive sizes, repeat >= 1 and warmup >= 0; got sizes {sizes}, "
            f"repeat {repeat!r}, warmup {warmup!r}"
        )
    ranks = run_on_processes(_collective_timing_rank, world_size, (sizes, repeat, warmup), timeout=timeout)
    return {
        "sizes": np.array(sizes),
        **{name: np.max([rank[name] for rank in ranks], axis=0) for name in ("all_gather", "all_reduce")},
    }


def fit_alpha_beta(volumes, seconds) -> tuple[float, float]:
    """Fit seconds = alpha + volume / bandwidth by least squares on the relative error.

    Each point is weighted by 1/seconds, so the small messages (which fix alpha) count as much
    as the large ones (which fix the bandwidth); alpha is kept >= 0.
    Inputs: volumes (S,), bytes each rank sends; seconds (S,), measured times (> 0).
    Returns (alpha in seconds, bandwidth in bytes per second; inf when time does not grow).
    Raises ValueError for fewer than 2 points, mismatched lengths, or non-positive times.
    """
    volumes, seconds = np.asarray(volumes, float), np.asarray(seconds, float)
    if volumes.ndim != 1 or volumes.shape != seconds.shape or volumes.size < 2:
        raise ValueError(
            f"volumes and seconds should be 1-D with the same length of at least 2, "
            f"got shapes {volumes.shape} and {seconds.shape}"
        )
    if not (
        np.all(np.isfinite(volumes))
        and np.all(volumes >= 0)
        and np.all(np.isfinite(seconds))
        and np.all(seconds > 0)
    ):
        raise ValueError("volumes should be finite and >= 0, and seconds finite and > 0")
    weights = 1.0 / seconds
    design = np.stack([np.ones_like(volumes), volumes], axis=1) * weights[:, None]
    (alpha, per_byte), *_ = np.linalg.lstsq(design, seconds * weights, rcond=None)
    if alpha < 0:
        alpha = 0.0
        per_byte = float(np.sum(weights**2 * volumes * seconds) / np.sum((weights * volumes) ** 2))
    growth = per_byte * volumes.max(initial=0.0)
    return float(alpha), float(1.0 / per_byte) if growth > 1e-9 * np.abs(seconds).mean() else float("inf")
