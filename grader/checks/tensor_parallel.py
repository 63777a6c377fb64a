"""Checks for assignment 04: splitting a dense layer across ranks and combining the results.

Every check builds random layers with awkward sizes (uneven splits first, so that the most
telling case decides the feedback), compares with `grader.reference.tensor_parallel`, and on a
mismatch replays the known wrong models (rows and columns swapped, bias per shard, no
reduction...) to name the mistake.
"""

from __future__ import annotations

import numpy as np

from grader.checks.base import WrongAnswer, check
from grader.checks.common import (
    CallWording,
    call_student,
    first_difference,
    first_differing_index,
    reject_float32,
    reject_known_mistakes,
    same,
    show_args,
)
from grader.checks.distributed import verify_split_on_processes
from grader.checks.formulas import KnownAnswer, SymbolicPart, symbolic_part
from grader.checks.values import as_array, as_float, describe
from grader.reference import tensor_parallel as ref
from grader.student import StudentRaised

ASSIGNMENT = "04_tensor_parallel"

# The chapter's running example: three inputs, three output units.
EXAMPLE_X = np.array([[2.0, 4.0, 1.0]])
EXAMPLE_W = np.array([[0.5, -1.0, 2.0], [-0.25, 0.5, 1.0], [1.0, 0.25, -0.5]])
EXAMPLE_B = np.array([3.0, -1.0, -4.0])


# A raised error reaches run_check (status error); side effects are a clear zero.
SPLIT_CALLS = CallWording(
    raised=None,
    mutated=(
        "`{function}` modified its input ({inputs}); build new arrays instead of changing the inputs in "
        "place."
    ),
    returned_input="`{function}` returned its input array itself; return a new array.",
)


def random_matrix(rng, rows: int, cols: int) -> np.ndarray:
    return rng.uniform(-2, 2, size=(rows, cols))


def uneven_size(rng, n: int) -> int:
    """A size >= n that n does not divide (any size for n = 1); includes 73 when it fits."""
    choices = [size for size in (7, 9, 10, 11, 13, 73) if size >= n and (n == 1 or size % n)]
    return int(rng.choice(choices))


def even_size(rng, n: int) -> int:
    return n * int(rng.integers(1, 6))


def split_size(rng, n: int) -> int:
    """The size of the axis split across n ranks: a multiple of n for n = 2, otherwise uneven."""
    return even_size(rng, n) if n == 2 else uneven_size(rng, n)


def sizes_text(blocks, axis: int) -> str:
    return "[" + ", ".join(str(block.shape[axis]) if block.ndim == 2 else "?" for block in blocks) + "]"


def array_list(got, n: int, name: str, item: str) -> list:
    """The student's list of per-rank results: checks it is a list or tuple of n entries."""
    if type(got) not in (list, tuple):
        raise WrongAnswer(
            f"`{name}` should return a list of {n} {item}, one per rank, but returned {describe(got)}."
        )
    if len(got) != n:
        raise WrongAnswer(
            f"`{name}` returned {len(got)} shards for n = {n} ranks; it should return one "
            f"{item[:-1]} per rank."
        )
    return list(got)


def block_models(W: np.ndarray, n: int, axis: int, name: str, expected: list):
    """Wrong ways of splitting W along `axis` (0: output rows, 1: input columns).

    Each is (blocks, feedback, *codes).
    """
    other = 1 - axis
    owned, wrong = (
        (("output units", "rows"), ("input features", "columns"))
        if axis == 0
        else (("input features", "columns"), ("output units", "rows"))
    )
    strided = [W[rank::n] if axis == 0 else W[:, rank::n] for rank in range(n)]
    return [
        (
            np.array_split(W, n, axis=other),
            f"`{name}` split the {wrong[1]} of W, which are its {wrong[0]}. In PyTorch's (d_out, d_in) "
            f"layout the {owned[1]} are the {owned[0]}, so rank i must own a block of {owned[1]}.",
            "weight-rows-are-inputs",
        ),
        (
            [block.T for block in expected],
            f"`{name}` returned transposed blocks. Keep PyTorch's (d_out, d_in) layout: rows are output "
            "units and columns input features, so each block has the shape of a slice of W.",
            "weight-rows-are-inputs",
        ),
        (
            strided,
            f"`{name}` gave rank i the {owned[1]} i, i + n, i + 2n, ... (n = {n}). Each rank must own one "
            f"contiguous block of {owned[1]}, like numpy.array_split: rank 0 the first block, rank 1 the "
            "next, and so on.",
        ),
    ]


def require_exact_copies(got: list, expected: list, label: str) -> None:
    """Shards only copy entries of W (or b): values within float64 tolerance yet not equal were rounded.

    `label` names shard {rank} in the feedback. Rounded shards (float32, say) would fail the runs on
    real processes with numbers that print alike, so they are named here.
    """
    for rank, (block, want) in enumerate(zip(got, expected)):
        if block is not None and not np.array_equal(block, want):
            raise WrongAnswer(
                f"{label.format(rank=rank)} holds the entries only approximately "
                f"({first_difference(block, want, rtol=0, atol=0)}), as if converted to float32. "
                "Splitting only copies entries: keep the input's float64 dtype."
            )


def check_blocks(got_blocks: list, W: np.ndarray, n: int, axis: int, name: str, label: str) -> None:
    """Compare a student's blocks of W with numpy.array_split(W, n, axis) and explain any difference."""
    expected = np.array_split(W, n, axis=axis)
    if same(got_blocks, expected):
        require_exact_copies(got_blocks, expected, label)
        return
    reject_known_mistakes(got_blocks, expected, block_models(W, n, axis, name, expected))
    shapes_fit = all(block.ndim == 2 and block.shape[1 - axis] == W.shape[1 - axis] for block in got_blocks)
    if shapes_fit and same(np.concatenate(got_blocks, axis=axis), W):
        raise WrongAnswer(
            f"`{name}` covers W in order, but with n = {n} its blocks have sizes "
            f"{sizes_text(got_blocks, axis)} along axis {axis}, where numpy.array_split gives "
            f"{sizes_text(expected, axis)}: when {W.shape[axis]} does not divide evenly, the first "
            f"{W.shape[axis]} % {n} = {W.shape[axis] % n} blocks are one larger."
        )
    for rank, (block, want) in enumerate(zip(got_blocks, expected)):
        if not same(block, want):
            start = sum(e.shape[axis] for e in expected[:rank])
            part = "rows" if axis == 0 else "columns"
            what = f"{part} {start} to {start + want.shape[axis] - 1} of W, shape {want.shape}"
            found = (
                f"has shape {block.shape}"
                if block.shape != want.shape
                else "has that shape but different values"
            )
            raise WrongAnswer(
                f"With W of shape {W.shape} and n = {n}, {label.format(rank=rank)} should be "
                f"{what}; yours {found}."
            )


def split_cases(rng, axis: int):
    """(W, b, n) cases for splitting along `axis` (0: output rows, with b; 1: input columns, b None).

    The split axis is uneven for n = 3, 4, 7 (numpy.array_split's larger first blocks) and the other
    axis has a different size, so that swapping rows and columns always shows.
    """
    for n in (3, 4, 7, 2, 1):
        split = split_size(rng, n)
        other = int(rng.choice([size for size in (5, 7, 12) if size != split]))
        d_out, d_in = (split, other) if axis == 0 else (other, split)
        W = random_matrix(rng, d_out, d_in)
        yield W, random_matrix(rng, 1, d_out)[0] if axis == 0 else None, n


@check(ASSIGNMENT, "split_output_rows")
def check_split_output_rows(answer, ctx):
    for W, b, n in split_cases(ctx.rng, axis=0):
        got = array_list(
            call_student(answer, (W, b, n), ("W", "b", "n"), SPLIT_CALLS),
            n,
            "split_output_rows",
            "(W_i, b_i) pairs",
        )
        for rank, pair in enumerate(got):
            if type(pair) not in (list, tuple) or len(pair) != 2:
                raise WrongAnswer(
                    f"Entry {rank} of the result should be a pair (W_{rank}, b_{rank}), but is "
                    f"{describe(pair)}."
                )
        check_blocks(
            [as_array(W_i, f"W_{rank}") for rank, (W_i, _) in enumerate(got)],
            W,
            n,
            0,
            "split_output_rows",
            "W_{rank} (the weights of rank {rank})",
        )
        biases = [None if b_i is None else as_array(b_i, f"b_{rank}") for rank, (_, b_i) in enumerate(got)]
        expected = [b_i for _, b_i in ref.split_output_rows(W, b, n)]
        if same(biases, expected):
            require_exact_copies(biases, expected, "b_{rank} (the biases of rank {rank})")
            continue
        reject_known_mistakes(
            biases,
            expected,
            [
                (
                    [b] * n,
                    f"Every rank got the whole bias vector (shape {b.shape}). Rank i owns only its output "
                    "units, so it holds only their biases: b_i = the matching block of b, shape (d_i,).",
                ),
                (
                    [None] * n,
                    "The bias blocks are missing: rank i adds the biases of its own output units, so return "
                    "b_i, the matching block of b, with each W_i.",
                    "missing-bias",
                ),
            ],
        )
        rank = next(i for i, (got_b, want) in enumerate(zip(biases, expected)) if not same(got_b, want))
        want, got_b = expected[rank], biases[rank]
        values = " with different values" if got_b is not None and got_b.shape == want.shape else ""
        raise WrongAnswer(
            f"With d_out = {W.shape[0]} and n = {n}, b_{rank} should be the {want.size} biases of rank "
            f"{rank}'s output units (shape {want.shape}); yours is {describe(got_b)}{values}."
        )
    d_out = int(ctx.rng.choice([3, 5, 7]))
    W, b = random_matrix(ctx.rng, d_out, 4), random_matrix(ctx.rng, 1, d_out)[0]
    require_value_error(
        answer,
        (W, b, d_out + 1),
        ("W", "b", "n"),
        f"{d_out + 1} ranks cannot each get at least one of {d_out} output rows",
    )
    return ctx.passed(
        "Correct: contiguous blocks of output rows, with the matching biases, and too many ranks refused. "
        + confirm_on_processes(answer, ctx, "column")
    )


def require_value_error(answer, args: tuple, names: tuple[str, ...], why: str) -> None:
    """Half marks unless the student's function raises ValueError for `args` (the rest was right)."""
    call = show_args(names, args)
    try:
        value = answer(*args)
    except StudentRaised as raised:
        if raised.not_implemented:
            raise
        if raised.type_name == "ValueError":
            return
        raise WrongAnswer(
            f"The split is right, but `{answer.name}` called with {call} raised {raised.type_name}; "
            f"{why}, and the task asks for a ValueError that says so.",
            fraction=0.5,
        ) from None
    raise WrongAnswer(
        f"The split is right, but `{answer.name}` called with {call} returned {describe(value)}; "
        f"{why}, so it should raise a ValueError that says so.",
        fraction=0.5,
    )


@check(ASSIGNMENT, "split_input_columns")
def check_split_input_columns(answer, ctx):
    for W, _, n in split_cases(ctx.rng, axis=1):
        got = array_list(
            call_student(answer, (W, n), ("W", "n"), SPLIT_CALLS), n, "split_input_columns", "weight blocks"
        )
        blocks = [as_array(W_i, f"W_{rank}") for rank, W_i in enumerate(got)]
        check_blocks(blocks, W, n, 1, "split_input_columns", "W_{rank} (the weights of rank {rank})")
    return ctx.passed(
        "Correct: contiguous blocks of input columns, like numpy.array_split. "
        + confirm_on_processes(answer, ctx, "row")
    )


PROCESS_WORLD_SIZES = (2, 3)
PROCESS_TIMEOUT_S = 30


def confirm_on_processes(answer, ctx, kind: str) -> str:
    """Run the student's split on real gloo processes (world sizes 2 and 3, uneven widths).

    The student's shards arrive as data; the trusted process starts the ranks, combines them with
    the real collective and compares forward and all three gradients with the unsplit layer.
    Returns a sentence for the feedback, or raises WrongAnswer with the code of the wrong model.
    """
    summaries = []
    for n in PROCESS_WORLD_SIZES:
        d_out, d_in = (uneven_size(ctx.rng, n), 5) if kind == "column" else (5, uneven_size(ctx.rng, n))
        X, W, b = (
            random_matrix(ctx.rng, 4, d_in),
            random_matrix(ctx.rng, d_out, d_in),
            random_matrix(ctx.rng, 1, d_out)[0],
        )
        args, names = ((W, b, n), ("W", "b", "n")) if kind == "column" else ((W, n), ("W", "n"))
        shards = call_student(answer, args, names, SPLIT_CALLS)
        run = verify_split_on_processes(kind, shards, X, W, b, n, timeout=PROCESS_TIMEOUT_S)
        if run.infrastructure_error:
            return f"(The run on real processes could not start here: {run.infrastructure_error[:200]})"
        if not run.ok:
            raise WrongAnswer(f"On {n} real processes: {run.feedback}", *run.misconceptions)
        summaries.append(f"{n} ranks with d = {d_out if kind == 'column' else d_in}")
    collective = "all-gather" if kind == "column" else "all-reduce"
    return (
        f"Run on real gloo processes ({'; '.join(summaries)}), combined with {collective}, your shards "
        f"reproduce the layer's output and all three gradients."
    )


def forward_cases(rng, split: str):
    """(X, W, b, n) cases; an even split comes first so that adding instead of concatenating is recognised."""
    cases = []
    for n in (2, 3, 7, 4, 1):
        width = split_size(rng, n)
        batch = int(rng.choice([1, 5, 7, 16]))
        other = int(rng.choice([size for size in (1, 6, 7, 12) if size != width]))
        d_out, d_in = (width, other) if split == "rows" else (other, width)
        cases.append(
            (
                random_matrix(rng, batch, d_in),
                random_matrix(rng, d_out, d_in),
                random_matrix(rng, 1, d_out)[0],
                n,
            )
        )
    cases.append((EXAMPLE_X, EXAMPLE_W, EXAMPLE_B, 3))
    return cases


def output_array(got, name: str, shape: tuple[int, int]) -> np.ndarray:
    if type(got) in (list, tuple) and got and all(type(item) is np.ndarray for item in got):
        raise WrongAnswer(
            f"`{name}` returned a list of {len(got)} per-rank arrays; combine them into one array Z "
            f"of shape {shape}."
        )
    return as_array(got, "Z")


def explain_difference(Z: np.ndarray, expected: np.ndarray, name: str) -> WrongAnswer:
    if Z.shape != expected.shape:
        return WrongAnswer(
            f"`{name}` returned Z of shape {Z.shape}; the layer's output has shape "
            f"{expected.shape} (B, d_out)."
        )
    i, j = first_differing_index(Z, expected)
    return WrongAnswer(
        f"`{name}` returned Z of the right shape {Z.shape}, but Z[{i}, {j}] = {Z[i, j]:.6g} differs from "
        f"X @ W.T + b, the unsplit layer's output ({expected[i, j]:.6g})."
    )


@check(ASSIGNMENT, "column_parallel_forward")
def check_column_parallel_forward(answer, ctx):
    for X, W, b, n in forward_cases(ctx.rng, "rows"):
        shards = ref.split_output_rows(W, b, n)
        expected = ref.column_parallel_forward(X, shards)
        Z = output_array(
            call_student(answer, (X, shards), ("X", "shards"), SPLIT_CALLS),
            "column_parallel_forward",
            expected.shape,
        )
        if same(Z, expected):
            continue
        local = [X @ W_i.T + b_i for W_i, b_i in shards]
        equal_sizes = len({block.shape for block in local}) == 1
        reject_known_mistakes(
            Z,
            expected,
            [
                (
                    np.sum(local, axis=0) if equal_sizes else None,
                    "You added the ranks' outputs. In a column-parallel layer each rank computes different "
                    "output units, so their blocks are concatenated along the last axis (an all-gather), "
                    "not summed.",
                ),
                (
                    np.concatenate([X @ W_i.T for W_i, _ in shards], axis=-1),
                    "The bias is missing: each rank adds its own block b_i to X @ W_i.T.",
                    "missing-bias",
                ),
                (
                    np.concatenate(local, axis=0),
                    "You concatenated the blocks along the batch axis. Each rank holds some output units "
                    "for every row, so the blocks go side by side along the last (feature) axis, giving "
                    "shape (B, d_out).",
                ),
                *[
                    (
                        block,
                        f"You returned only rank {rank}'s block, shape {block.shape}. The other ranks hold "
                        "the remaining output units: an all-gather concatenates every rank's block to form "
                        "Z.",
                        "split-needs-no-communication",
                    )
                    for rank, block in enumerate(local)
                ],
            ],
        )
        raise explain_difference(Z, expected, "column_parallel_forward")
    return ctx.passed("Correct: each rank's outputs, gathered along the last axis, equal the unsplit layer.")


@check(ASSIGNMENT, "row_parallel_forward")
def check_row_parallel_forward(answer, ctx):
    for X, W, b, n in forward_cases(ctx.rng, "columns"):
        shards = ref.split_input_columns(W, n)
        expected = ref.row_parallel_forward(X, shards, b)
        Z = output_array(
            call_student(answer, (X, shards, b), ("X", "shards", "b"), SPLIT_CALLS),
            "row_parallel_forward",
            expected.shape,
        )
        if same(Z, expected):
            continue
        columns = np.cumsum([0] + [W_i.shape[1] for W_i in shards])
        partials = [X[:, start:stop] @ W_i.T for W_i, start, stop in zip(shards, columns[:-1], columns[1:])]
        no_reduction = (
            "Each rank's product X_i @ W_i.T is only a partial sum over its own input features; the "
            "partial products must be added across ranks (an all-reduce) before the bias is added once."
        )
        reject_known_mistakes(
            Z,
            expected,
            [
                (
                    np.sum(partials, axis=0) + n * b,
                    f"The bias was added {n} times, once per rank. Add the partial products first (the "
                    "all-reduce), then add b once.",
                    "bias-added-per-shard",
                ),
                (
                    np.sum(partials, axis=0),
                    "The bias is missing: after summing the partial products, add b once.",
                    "missing-bias",
                ),
                (
                    np.concatenate(partials, axis=-1),
                    "You concatenated the partial products. " + no_reduction,
                    "split-needs-no-communication",
                ),
                (
                    np.concatenate([partial + b for partial in partials], axis=-1),
                    "You concatenated the partial products. " + no_reduction,
                    "split-needs-no-communication",
                ),
                *[
                    (
                        value,
                        f"You returned rank {rank}'s {what} alone. " + no_reduction,
                        "split-needs-no-communication",
                    )
                    for rank, partial in enumerate(partials)
                    for value, what in ((partial + b, "partial product plus b"), (partial, "partial product"))
                ],
                (
                    np.mean(partials, axis=0) + b,
                    "You averaged the partial products. An all-reduce for a row-parallel layer sums them: "
                    "each is a part of the same dot products.",
                ),
            ],
        )
        raise explain_difference(Z, expected, "row_parallel_forward")
    return ctx.passed("Correct: partial products summed (one all-reduce), bias added once.")


def communication_cases(rng):
    """(collective, batch, d_out, world_size) cases.

    World sizes 3, 4 and 7 come first: there the wrong formulas all differ.
    """
    cases = []
    for world_size in (3, 4, 7, 2, 8, 1):
        for collective in ("all_reduce", "all_gather"):
            cases.append(
                (
                    collective,
                    int(rng.choice([1, 7, 16, 64, 73])),
                    int(rng.choice([7, 73, 512, 4096])),
                    world_size,
                )
            )
    return cases


@check(ASSIGNMENT, "communication_elements")
def check_communication_elements(answer, ctx):
    for collective, batch, d_out, p in communication_cases(ctx.rng):
        expected = ref.communication_elements(collective, batch, d_out, p)
        got = as_float(
            call_student(
                answer,
                (collective, batch, d_out, p),
                ("collective", "batch", "d_out", "world_size"),
                SPLIT_CALLS,
            ),
            "The number of elements",
        )
        if same(got, expected):
            continue
        setting = (
            f"For {collective} with B = {batch}, d_out = {d_out} and p = {p} ranks (N = B*d_out = "
            f"{batch * d_out})"
        )
        reject_float32(got, expected, setting)
        if p == 1:
            raise WrongAnswer(
                f"{setting} you returned {got:g}. A single rank already holds the whole output and "
                f"sends nothing: return 0."
            )
        N, share = batch * d_out, (p - 1) / p
        ring = (
            "A ring sends the tensor in p chunks of N/p and each rank forwards p - 1 of them: (p-1)/p * N "
            "for an all-gather, twice that for an all-reduce."
        )
        reject_known_mistakes(
            got,
            expected,
            [
                (
                    0.0,
                    f"{setting} you returned 0. Each rank holds only part of the result, so the ranks must "
                    f"exchange data. {ring}",
                    "split-needs-no-communication",
                ),
                (
                    share * N if collective == "all_reduce" else None,
                    f"{setting} you returned (p-1)/p * N, half of the answer. A ring all-reduce is a "
                    "reduce-scatter followed by an all-gather, and each of the two moves (p-1)/p * N per "
                    "rank.",
                ),
                (
                    2 * share * N if collective == "all_gather" else None,
                    f"{setting} you returned 2(p-1)/p * N, the cost of an all-reduce. An all-gather is only "
                    "its second half: each rank forwards p - 1 chunks of N/p, (p-1)/p * N.",
                ),
                *[
                    (factor * N, f"{setting} you returned {label}. {ring}")
                    for factor, label in (
                        (p, "p * N"),
                        (p - 1, "(p-1) * N"),
                        (1, "N"),
                        (1 / p, "N / p"),
                        (2, "2N"),
                        (2 * (p - 1), "2(p-1) * N"),
                        (2 / p, "2N / p"),
                        (2 * p, "2p * N"),
                    )
                ],
            ],
        )
        raise WrongAnswer(f"{setting} you returned {got:g} elements per rank. {ring}")
    return ctx.passed("Correct: (p-1)/p * N per rank for an all-gather and 2(p-1)/p * N for an all-reduce.")


# --- symbolic parts (grader.checks.formulas grades them) ----------------------------------------

symbolic_part(
    "04_tensor_parallel.all_reduce_volume",
    SymbolicPart(
        variable="all_reduce_volume",
        question=(
            "the number of elements each of p ranks sends in a ring all-reduce of a B x d_out activation"
        ),
        symbols={"p": "number of ranks", "B": "batch size", "d_out": "output units"},
        answers=("2*(p - 1)/p*B*d_out",),
        known=(
            KnownAnswer(
                ("0",),
                "The partial outputs of a split layer still have to be added up across the "
                "ranks, so every rank sends data.",
                ("split-needs-no-communication",),
            ),
            KnownAnswer(
                ("(p - 1)/p*B*d_out",),
                "That counts only one of the two phases. A ring all-reduce is "
                "a reduce-scatter (each rank ends up owning the full sum of one 1/p chunk) followed by an "
                "all-gather (the summed chunks travel round the ring so every rank has all of them). "
                "Each phase sends (p - 1) chunks per rank.",
            ),
            KnownAnswer(
                ("2*(p - 1)*B*d_out", "(p - 1)*B*d_out"),
                "Each ring step sends one chunk, a 1/p "
                "share of the B x d_out activation, not the whole activation.",
            ),
        ),
        example={"p": 4, "B": 8, "d_out": 16},
        hint="Split the activation into p chunks and count the chunks each rank sends in the reduce-scatter "
        "and in the all-gather.",
        on_correct="Correct: (p - 1) chunks of B*d_out/p elements in each of the two phases.",
    ),
)
