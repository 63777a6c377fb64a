"""Trusted-side verification of a tensor-parallel split on real gloo processes.

`verify_split_on_processes` takes shards as data (e.g. a student's decoded answer), starts one
CPU process per shard, builds the split layer from them, combines the ranks with real
collectives, runs forward and backward in float64 and compares Z, dL/dX, dL/dW and dL/db with
the single-process layer. Wrong answers are named with the course's misconception codes:

- `split-needs-no-communication`: the ranks' results were not combined (or combined with the
  wrong collective), so no rank holds the layer's output;
- `bias-added-per-shard`: every rank of a row-parallel split added the bias before the sum;
- `weight-rows-are-inputs`: the weight was split along the wrong axis (or transposed).

Nothing here can hang: the run has a deadline, after which the rank processes are killed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from grader.checks.base import WrongAnswer
from grader.checks.values import as_array, describe
from grader.codec import TensorData

KIND_ALIASES = {
    "column": "column",
    "split_output_rows": "column",
    "output_rows": "column",
    "row": "row",
    "split_input_columns": "row",
    "input_columns": "row",
}
MAX_WORLD_SIZE = 8
RTOL, ATOL = 1e-9, 1e-10


@dataclass(frozen=True)
class SplitVerification:
    """The outcome of running a split on processes.

    ok: the split reproduced the layer's forward and all three gradients.
    misconceptions: codes from grader.misconceptions naming the wrong model (may be empty).
    feedback: a sentence or two for the student.
    max_errors: largest absolute error of "Z", "dX", "dW", "db" (only when they could be compared).
    ran: whether the shards reached the processes (False when their shapes ruled that out).
    infrastructure_error: set when the processes themselves failed or timed out (not the
    student's fault: a check should report a grader error, not a wrong answer).
    """

    ok: bool
    kind: str
    world_size: int
    feedback: str
    misconceptions: tuple[str, ...] = ()
    max_errors: dict = field(default_factory=dict)
    ran: bool = False
    infrastructure_error: str | None = None


def _array(value, what: str) -> np.ndarray | str:
    """A finite float64 array, or a sentence saying why `value` is not one."""
    try:
        return as_array(value, what)
    except WrongAnswer as error:
        return error.feedback.rstrip(".")


def _is_matrix(value) -> bool:
    """Whether `value` looks 2-D (so a length-2 sequence holding it is a (W_i, b_i) pair)."""
    if type(value) is TensorData:
        value = value.array
    if type(value) is np.ndarray:
        return value.ndim == 2
    return type(value) in (list, tuple) and len(value) > 0 and type(value[0]) in (list, tuple)


def _parse_shards(kind: str, shards, world_size: int):
    """[(W_i, b_i or None)] from the decoded shards, or a sentence saying what is wrong."""
    if type(shards) not in (list, tuple):
        return f"the shards should be a list, but are {describe(shards)}"
    if len(shards) != world_size:
        return f"there should be one shard per rank ({world_size}), but there are {len(shards)}"
    parsed = []
    for rank, shard in enumerate(shards):
        if type(shard) in (list, tuple) and len(shard) == 2 and _is_matrix(shard[0]):
            weight, bias = (
                _array(shard[0], f"shard {rank}'s weight"),
                _array(shard[1], f"shard {rank}'s bias"),
            )
        elif kind == "row":
            weight, bias = _array(shard, f"shard {rank}"), None
        else:
            return f"shard {rank} should be a pair (W_i, b_i), but is {describe(shard)}"
        for item in (weight, bias):
            if type(item) is str:
                return item
        if weight.ndim != 2:
            return f"shard {rank}'s weight should be 2-D, but has shape {weight.shape}"
        if bias is not None and bias.ndim != 1:
            return f"shard {rank}'s bias should be 1-D, but has shape {bias.shape}"
        parsed.append((weight, bias))
    return parsed


def _shape_problem(kind: str, parsed, d_out: int, d_in: int):
    """None when the shard shapes fit `kind`; else (feedback, codes)."""
    shapes = [weight.shape for weight, _ in parsed]
    rows_split = all(s[1] == d_in for s in shapes) and sum(s[0] for s in shapes) == d_out
    cols_split = all(s[0] == d_out for s in shapes) and sum(s[1] for s in shapes) == d_in
    fits = rows_split if kind == "column" else cols_split
    other = cols_split if kind == "column" else rows_split
    if not fits:
        expected = (
            "(rows_i, d_in) blocks of W's output rows"
            if kind == "column"
            else "(d_out, cols_i) blocks of W's input columns"
        )
        feedback = (
            f"The shard weights have shapes {shapes} for W of shape {(d_out, d_in)}; a "
            f"{kind}-parallel split needs {expected}."
        )
        if other:
            return feedback + " They split the other axis: rows of W are output units, columns are inputs.", (
                "weight-rows-are-inputs",
            )
        return feedback, ()
    if kind == "column":
        for rank, (weight, bias) in enumerate(parsed):
            if bias is None or bias.shape != (weight.shape[0],):
                return (
                    f"Shard {rank} holds {weight.shape[0]} output rows, so its bias should have shape "
                    f"({weight.shape[0]},), not {None if bias is None else bias.shape}.",
                    (),
                )
    return None


def _first_difference(name: str, got: np.ndarray, expected: np.ndarray) -> str:
    if got.shape != expected.shape:
        return f"{name} has shape {got.shape}; the layer's has shape {expected.shape}"
    index = tuple(int(i) for i in np.argwhere(~np.isclose(got, expected, rtol=RTOL, atol=ATOL))[0])
    return f"{name}{list(index)} is {got[index]:.6g} but should be {expected[index]:.6g}"


def _close(got, expected) -> bool:
    return (
        got is not None
        and got.shape == expected.shape
        and bool(np.allclose(got, expected, rtol=RTOL, atol=ATOL))
    )


def _per_rank_bias(Z, X, W, b) -> bool:
    """Z - X W^T is one row vector repeated over the batch, but not b (bias added on every rank)."""
    offset = Z - X @ W.T
    return bool(np.allclose(offset, offset[:1], rtol=RTOL, atol=ATOL) and not np.allclose(offset[0], b))


def verify_split_on_processes(
    kind: str,
    shards,
    X,
    W,
    b,
    world_size: int,
    timeout: float = 60,
    combine: str | None = None,
    upstream=None,
    start_method: str | None = None,
) -> SplitVerification:
    """Run `shards` as a split linear layer on `world_size` gloo processes and judge the result.

    Inputs:
    - kind: "column" (split by output rows, shards = [(W_i (rows_i, d_in), b_i (rows_i,))])
      or "row" (split by input columns, shards = [W_i (d_out, cols_i)]; a (W_i, b_i) pair means
      that rank adds b_i itself before the reduction). Part names are accepted too
      ("split_output_rows", "split_input_columns").
    - shards: decoded data (arrays, TensorData, nested lists); checked here, never trusted.
    - X: (B, d_in) input; W: (d_out, d_in) weight; b: (d_out,) bias, all trusted.
    - world_size: ranks to start (1..8); must equal len(shards).
    - combine: the collective that joins the ranks: None for the correct one (all_gather for
      column, all_reduce for row), or "all_gather", "all_reduce", "none" to model a student's
      combine step.
    - upstream: (B, d_out) dL/dZ for the backward pass (default: fixed random numbers).

    Returns a SplitVerification; never raises for bad shards and never hangs.
    """
    # torch comes with it: 3.9 s measured, paid only by the tensor-parallel checks that run ranks
    from layerlab.distributed import DistributedRunError, DistributedTimeout, tensor_parallel_on_processes

    kind = KIND_ALIASES.get(kind, kind)
    if kind not in ("column", "row"):
        raise ValueError(f"kind must be 'column' or 'row', got {kind!r}")
    if type(world_size) is not int or not 1 <= world_size <= MAX_WORLD_SIZE:
        raise ValueError(f"world_size must be an integer in 1..{MAX_WORLD_SIZE}, got {world_size!r}")
    X, W, b = (np.asarray(a, dtype=np.float64) for a in (X, W, b))
    (batch, d_in), d_out = X.shape, W.shape[0]
    if W.shape != (d_out, d_in) or b.shape != (d_out,):
        raise ValueError(f"inconsistent layer: X {X.shape}, W {W.shape}, b {b.shape}")

    def result(ok, feedback, codes=(), **extra):
        return SplitVerification(ok, kind, world_size, feedback, tuple(codes), **extra)

    parsed = _parse_shards(kind, shards, world_size)
    if type(parsed) is str:
        return result(False, f"The shards could not be run: {parsed}.")
    problem = _shape_problem(kind, parsed, d_out, d_in)
    if problem is not None:
        return result(False, problem[0], problem[1])

    G = (
        np.random.default_rng(12345).normal(size=(batch, d_out))
        if upstream is None
        else np.asarray(upstream, dtype=np.float64)
    )
    correct = "all_gather" if kind == "column" else "all_reduce"
    row_biases = kind == "row" and any(bias is not None for _, bias in parsed)
    try:
        run = tensor_parallel_on_processes(
            kind,
            parsed,
            X,
            b=None if kind == "column" or row_biases else b,
            upstream=G,
            combine=combine or correct,
            timeout=timeout,
            start_method=start_method,
        )
    except ValueError as error:  # the shapes fit the split, so only a modelled wrong collective gets here
        if combine in (None, correct):
            raise
        return result(
            False,
            f"The ranks' blocks cannot be joined with {combine}: {error}. The ranks must use {correct}.",
            ["split-needs-no-communication"],
        )
    except (DistributedTimeout, DistributedRunError) as error:
        return result(
            False,
            "The split could not be checked on processes (a grader problem, not your answer).",
            infrastructure_error=str(error)[:2000],
        )

    Z_ref, dX_ref, dW_ref, db_ref = X @ W.T + b, G @ W, G.T @ X, G.sum(axis=0)
    got = {"Z": run.Z, "dX": run.dX, "dW": run.dW, "db": run.db}
    expected = {"Z": Z_ref, "dX": dX_ref, "dW": dW_ref, "db": db_ref}
    errors = {
        name: float(np.max(np.abs(got[name] - expected[name])))
        for name in got
        if got[name] is not None and got[name].shape == expected[name].shape
    }
    where = f"On {world_size} gloo processes, the {kind}-parallel layer built from the shards"
    if all(_close(got[name], expected[name]) for name in got):
        return result(
            True,
            f"{where} matches the single-process layer: Z, dL/dX, dL/dW and dL/db agree.",
            max_errors=errors,
            ran=True,
        )
    wrong = next(name for name in got if not _close(got[name], expected[name]))
    detail = (
        _first_difference(wrong, got[wrong], expected[wrong])
        if got[wrong] is not None
        else f"{wrong} was not produced"
    )

    if combine is not None and combine != correct:
        needed = (
            "concatenate their column blocks (all_gather)"
            if kind == "column"
            else "sum their partial products (all_reduce)"
        )
        return result(
            False,
            f"{where} does not give any rank the layer's output: {detail}. The ranks must "
            f"{needed} before the output is complete.",
            ["split-needs-no-communication"],
            max_errors=errors,
            ran=True,
        )
    if row_biases and run.Z.shape == Z_ref.shape and _per_rank_bias(run.Z, X, W, b):
        return result(
            False,
            f"{where} adds a bias on every rank, so the sum holds it {world_size} times over "
            f"({detail}). Add b once, after the partial products are reduced.",
            ["bias-added-per-shard"],
            max_errors=errors,
            ran=True,
        )
    if d_out == d_in and run.Z.shape == Z_ref.shape and np.allclose(run.Z, X @ W + b, rtol=RTOL, atol=ATOL):
        return result(
            False,
            f"{where} computes X @ W + b instead of X @ W.T + b ({detail}): the shards were "
            "cut from W's transpose. Rows of W are output units, columns are inputs.",
            ["weight-rows-are-inputs"],
            max_errors=errors,
            ran=True,
        )
    return result(
        False,
        f"{where} does not match the single-process layer: {detail}. Check that the shards, "
        "put back together along the split axis, give exactly W (and b).",
        max_errors=errors,
        ran=True,
    )
