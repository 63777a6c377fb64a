"""Tensor parallelism on real processes: one CPU process per rank, talking through gloo.

`run_on_processes` starts `world_size` processes, initialises a gloo process group in each
(rendezvous through a file in a fresh temporary folder, so concurrent runs never share a port
or a file), calls `worker(rank, world_size, *args)` and returns the workers' results in rank
order. `tensor_parallel_on_processes` uses it to run a column- or row-parallel linear layer
from shards given as data, forward and backward, with the f/g communication pair written as
`torch.autograd.Function`s. `time_collectives` and `fit_alpha_beta` measure the collectives.

Results travel back through a multiprocessing queue, so they must be picklable (NumPy arrays,
numbers, strings). Every run has a deadline: when it passes, the rank processes are killed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
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
            import ctypes
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
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=max(timeout, 1.0)))
        value = worker(rank, world_size, *args)
        dist.barrier()  # nobody leaves before every rank is connected and done
        results.put((rank, "ok", value))
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


def run_on_processes(worker, world_size: int, args: tuple = (), timeout: float = 60.0,
                     start_method: str | None = None) -> list:
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
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    context = multiprocessing.get_context(start_method or default_start_method())
    folder = tempfile.mkdtemp(prefix="layerlab-gloo-")
    init_file = os.path.join(folder, "rendezvous")
    results = context.Queue()
    processes = [context.Process(target=_rank_main, daemon=True, name=f"rank-{rank}",
                                 args=(worker, rank, world_size, init_file, timeout, tuple(args), results))
                 for rank in range(world_size)]
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
                dead = [p for rank, p in enumerate(processes) if rank not in received
                        and p.exitcode is not None]
                if dead:
                    with contextlib.suppress(Empty):  # its result may still be in the pipe
                        rank, status, value = results.get(timeout=1.0)
                        received[rank] = (status, value)
                        continue
                    raise DistributedRunError(f"{dead[0].name} exited with code {dead[0].exitcode} "
                                              "before reporting a result")
                continue
            if status == "error":
                raise DistributedRunError(f"rank {rank} failed: {value}")
            received[rank] = (status, value)
        for process in processes:
            process.join(timeout=max(0.1, min(EXIT_GRACE_S, deadline - time.monotonic())))
        return [received[rank][1] for rank in range(world_size)]
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
        start = sum(ctx.sizes[:dist.get_rank()])
        return grad[..., start:start + ctx.sizes[dist.get_rank()]].contiguous(), None


class SplitToRanks(torch.autograd.Function):
    """Keep this rank's column block forward, all-gather backward (the mirror of GatherFromRanks)."""

    @staticmethod
    def forward(ctx, full, sizes):
        ctx.sizes = list(sizes)
        start = sum(ctx.sizes[:dist.get_rank()])
        return full[..., start:start + ctx.sizes[dist.get_rank()]].contiguous()

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_last_dim(grad.contiguous(), ctx.sizes), None


# ---- a linear layer split across ranks ------------------------------------------------------

def _tensor(array) -> torch.Tensor:
    return torch.tensor(np.asarray(array, dtype=np.float64), dtype=torch.float64)


def _numpy(tensor: torch.Tensor | None):
    return None if tensor is None else tensor.detach().numpy().copy()


def _tensor_parallel_rank(rank: int, world_size: int, kind: str, X, shards, b, upstream, combine: str) -> dict:
    """One rank's share of a split layer, forward then backward of sum(Z * upstream).

    Column kind: shards[r] = (W_r (rows_r, d_in), b_r (rows_r,)); every rank sees all of X.
    Row kind: shards[r] = W_r (d_out, cols_r) or (W_r, b_r) when a rank adds its own bias;
    rank r sees X's column block r; `b` (d_out,) is added once after the reduction.
    Returns this rank's output Z, dL/dX, and the gradients of its own shard.
    """
    X = _tensor(X).requires_grad_(True)
    G = _tensor(upstream)
    shard = shards[rank]
    weight, bias = (shard if isinstance(shard, (tuple, list)) else (shard, None))
    weight = _tensor(weight).requires_grad_(True)
    bias = None if bias is None else _tensor(bias).requires_grad_(True)
    if kind == "column":
        sizes = [int(np.shape(pair[0])[0]) for pair in shards]
        local = CopyToRanks.apply(X) if combine != "none" else X
        Z_local = local @ weight.T + (bias if bias is not None else 0.0)
        if combine == "all_gather":
            Z = GatherFromRanks.apply(Z_local, sizes)
        elif combine == "all_reduce":
            Z = ReduceFromRanks.apply(Z_local)
        else:
            Z = Z_local
    else:
        sizes = [int(np.shape(item[0] if isinstance(item, (tuple, list)) else item)[1]) for item in shards]
        X_local = SplitToRanks.apply(X, sizes)
        partial = X_local @ weight.T + (bias if bias is not None else 0.0)
        if combine == "all_reduce":
            Z = ReduceFromRanks.apply(partial)
        elif combine == "all_gather":
            Z = GatherFromRanks.apply(partial, [int(partial.shape[-1])] * world_size)
        else:
            Z = partial
        shared_bias = None if b is None else _tensor(b).requires_grad_(True)
        if shared_bias is not None and Z.shape[-1] == shared_bias.shape[0]:
            Z = Z + shared_bias
    G_used = G if tuple(G.shape) == tuple(Z.shape) else torch.ones_like(Z)
    (Z * G_used).sum().backward()
    result = {"Z": _numpy(Z), "dX": _numpy(X.grad), "dW": _numpy(weight.grad),
              "db": _numpy(bias.grad) if bias is not None else None,
              "weight_shape": tuple(weight.shape), "upstream_matched": G_used is G}
    if kind == "row":
        result["db_shared"] = _numpy(shared_bias.grad) if shared_bias is not None and shared_bias.grad is not None else None
    return result


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


def tensor_parallel_on_processes(kind: str, shards, X, b=None, upstream=None, combine: str | None = None,
                                 timeout: float = 60.0, start_method: str | None = None) -> TensorParallelRun:
    """Run a split linear layer on len(shards) gloo processes, forward and backward, in float64.

    Inputs:
    - kind: "column" (split by output rows; shards = [(W_i (rows_i, d_in), b_i (rows_i,)), ...])
      or "row" (split by input columns; shards = [W_i (d_out, cols_i), ...], or (W_i, b_i)
      pairs when each rank adds a bias of its own).
    - X: (B, d_in) input; b: (d_out,) bias added once after the reduction (row kind only).
    - upstream: (B, d_out) gradient dL/dZ for the backward pass (default: ones).
    - combine: how ranks combine their results: "all_gather", "all_reduce" or "none"
      (default: all_gather for column, all_reduce for row).

    Returns a TensorParallelRun. Raises ValueError for a bad kind or combine, and the errors of
    `run_on_processes`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    combine = combine or ("all_gather" if kind == "column" else "all_reduce")
    if combine not in COMBINES:
        raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
    shards = [tuple(np.asarray(part, dtype=np.float64) for part in shard) if isinstance(shard, (tuple, list))
              else np.asarray(shard, dtype=np.float64) for shard in shards]
    X = np.asarray(X, dtype=np.float64)
    if upstream is None:
        width = sum(np.shape(s[0])[0] for s in shards) if kind == "column" else np.shape(
            shards[0][0] if isinstance(shards[0], tuple) else shards[0])[0]
        upstream = np.ones((X.shape[0], width))
    start = time.perf_counter()
    ranks = run_on_processes(_tensor_parallel_rank, len(shards),
                             (kind, X, shards, None if b is None else np.asarray(b, dtype=np.float64),
                              np.asarray(upstream, dtype=np.float64), combine),
                             timeout=timeout, start_method=start_method)
    seconds = time.perf_counter() - start
    axis = 0 if kind == "column" else 1
    dW = np.concatenate([rank["dW"] for rank in ranks], axis=axis) if all(
        rank["dW"] is not None for rank in ranks) else None
    if kind == "column":
        db = (np.concatenate([rank["db"] for rank in ranks])
              if all(rank["db"] is not None for rank in ranks) else None)
    else:
        db = ranks[0]["db_shared"]
        if db is None and ranks[0]["db"] is not None:
            db = sum(rank["db"] for rank in ranks)
    return TensorParallelRun(kind, len(shards), combine, ranks[0]["Z"], ranks[0]["dX"], dW, db,
                             [rank["Z"] for rank in ranks], [rank["dX"] for rank in ranks],
                             [rank["weight_shape"] for rank in ranks], seconds)


# ---- measuring the collectives --------------------------------------------------------------

def _collective_timing_rank(rank: int, world_size: int, sizes, repeat: int, warmup: int) -> dict:
    timings = {"all_gather": [], "all_reduce": []}
    for size in sizes:
        piece = torch.randn(max(1, size // world_size), dtype=torch.float32)
        full = torch.randn(size, dtype=torch.float32)
        gathered = [torch.empty_like(piece) for _ in range(world_size)]
        for name, op in (("all_gather", lambda: dist.all_gather(gathered, piece)),
                         ("all_reduce", lambda: dist.all_reduce(full))):
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


def time_collectives(sizes, world_size: int = 2, repeat: int = 7, warmup: int = 2,
                     timeout: float = 60.0) -> dict[str, np.ndarray]:
    """Median seconds of all_gather and all_reduce (float32) for each total output size.

    Inputs: sizes, a list of element counts N (the full output B*d_out); world_size ranks.
    all_gather: each rank contributes N/p elements and receives all N; all_reduce: every rank
    holds N elements and ends with their sum.
    Returns {"sizes": (S,), "all_gather": (S,), "all_reduce": (S,)}, the slowest rank's
    median per size.
    """
    sizes = [int(size) for size in sizes]
    ranks = run_on_processes(_collective_timing_rank, world_size, (sizes, repeat, warmup), timeout=timeout)
    return {"sizes": np.array(sizes),
            **{name: np.max([rank[name] for rank in ranks], axis=0) for name in ("all_gather", "all_reduce")}}


def fit_alpha_beta(volumes, seconds) -> tuple[float, float]:
    """Fit seconds = alpha + volume / bandwidth by least squares on the relative error.

    Each point is weighted by 1/seconds, so the small messages (which fix alpha) count as much
    as the large ones (which fix the bandwidth); alpha is kept >= 0.
    Inputs: volumes (S,), bytes each rank sends; seconds (S,), measured times (> 0).
    Returns (alpha in seconds, bandwidth in bytes per second; inf when time does not grow).
    """
    volumes, seconds = np.asarray(volumes, float), np.asarray(seconds, float)
    weights = 1.0 / seconds
    design = np.stack([np.ones_like(volumes), volumes], axis=1) * weights[:, None]
    (alpha, per_byte), *_ = np.linalg.lstsq(design, seconds * weights, rcond=None)
    if alpha < 0:
        alpha = 0.0
        per_byte = float(np.sum(weights**2 * volumes * seconds) / np.sum((weights * volumes) ** 2))
    growth = per_byte * volumes.max(initial=0.0)
    return float(alpha), float(1.0 / per_byte) if growth > 1e-9 * np.abs(seconds).mean() else float("inf")
