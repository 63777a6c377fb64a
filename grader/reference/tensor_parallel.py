"""Reference solutions for assignment 04: splitting a dense layer across devices (tensor parallelism).

A dense layer Z = X @ W.T + b with W of shape (d_out, d_in) can be split two ways:

- column-parallel (Megatron's ColumnParallelLinear, PyTorch's ColwiseParallel): rank i owns a
  contiguous block of output units, i.e. rows of W and the matching entries of b. Each rank
  computes its own columns of Z; an all-gather concatenates them.
- row-parallel (RowParallelLinear, RowwiseParallel): rank i owns a contiguous block of input
  features, i.e. columns of W, and sees the matching columns of X. Each rank computes a partial
  product of the full output shape; an all-reduce sums them and the bias is added once.

Uneven sizes are split like numpy.array_split: the first blocks are one larger. Ranks are
simulated in one process; all arithmetic is NumPy float64.
"""

from __future__ import annotations

import numpy as np

from grader.reference.validation import float_array, positive_int

# Elements each rank sends in a ring collective, as a multiple of the full tensor's size N,
# for world size p: all-gather sends p-1 chunks of N/p; all-reduce is a reduce-scatter plus an all-gather.
RING_FACTORS = {
    "all_gather": lambda p: (p - 1) / p,
    "all_reduce": lambda p: 2 * (p - 1) / p,
}


def _block_bounds(size: int, n: int, what: str) -> list[tuple[int, int]]:
    """(start, stop) of n contiguous blocks covering range(size), sized like numpy.array_split."""
    n = positive_int(n, "n")
    if n > size:
        raise ValueError(f"cannot split {size} {what} across {n} ranks: every rank needs at least one")
    quotient, remainder = divmod(size, n)
    sizes = [quotient + 1] * remainder + [quotient] * (n - remainder)
    stops = np.cumsum(sizes).tolist()
    return [(stop - length, stop) for stop, length in zip(stops, sizes)]


def split_output_rows(W, b, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Split a layer by output units for column-parallel execution on n ranks.

    Inputs:
    - W: weights of shape (d_out, d_in); row j holds output unit j's weights.
    - b: biases of shape (d_out,).
    - n: number of ranks, a positive int with n <= d_out.

    Returns:
    - shards: a list of n pairs (W_i, b_i). Rank i owns the contiguous output units
      start_i..stop_i - 1: W_i = W[start_i:stop_i] of shape (d_i, d_in) and
      b_i = b[start_i:stop_i] of shape (d_i,). The sizes d_i follow numpy.array_split
      (the first d_out % n ranks get one unit more) and sum to d_out. Blocks are copies.
    """
    W = float_array(W, "W", (2,))
    b = float_array(b, "b", (1,))
    if b.shape[0] != W.shape[0]:
        raise ValueError(f"b has shape {b.shape} but W has shape {W.shape}: expected one bias per row of W")
    return [
        (W[start:stop].copy(), b[start:stop].copy())
        for start, stop in _block_bounds(W.shape[0], n, "output units (rows of W)")
    ]


def split_input_columns(W, n: int) -> list[np.ndarray]:
    """Split a layer's weights by input features for row-parallel execution on n ranks.

    Inputs:
    - W: weights of shape (d_out, d_in); column k holds every unit's weight for input feature k.
    - n: number of ranks, a positive int with n <= d_in.

    Returns:
    - shards: a list of n arrays; W_i = W[:, start_i:stop_i] of shape (d_out, d_i) holds the
      contiguous input features start_i..stop_i - 1, sized like numpy.array_split. The bias is
      not split: it is added once, after the partial products are summed. Blocks are copies.
    """
    W = float_array(W, "W", (2,))
    return [
        W[:, start:stop].copy()
        for start, stop in _block_bounds(W.shape[1], n, "input features (columns of W)")
    ]


def _shard_list(shards, what: str) -> list:
    if not isinstance(shards, (list, tuple)) or len(shards) == 0:
        raise ValueError(f"shards must be a non-empty list of {what}, got {type(shards).__name__}")
    return list(shards)


def column_parallel_forward(X, shards) -> np.ndarray:
    """The forward pass of a column-parallel layer: local products, then an all-gather.

    Inputs:
    - X: inputs of shape (B, d_in); every rank sees all of X.
    - shards: a list of n pairs (W_i, b_i) from split_output_rows, W_i of shape (d_i, d_in)
      and b_i of shape (d_i,).

    Returns:
    - Z: an array of shape (B, d_out) with d_out = sum of d_i. Rank i computes
      Z_i = X @ W_i.T + b_i of shape (B, d_i); the all-gather concatenates the Z_i along the
      last axis in rank order. Z equals the unsplit layer X @ W.T + b.
    """
    X = float_array(X, "X", (2,))
    outputs = []
    for rank, shard in enumerate(_shard_list(shards, "(W_i, b_i) pairs")):
        if not isinstance(shard, (list, tuple)) or len(shard) != 2:
            raise ValueError(f"shards[{rank}] must be a pair (W_i, b_i), got {type(shard).__name__}")
        W_i = float_array(shard[0], f"shards[{rank}][0] (W_{rank})", (2,))
        b_i = float_array(shard[1], f"shards[{rank}][1] (b_{rank})", (1,))
        if W_i.shape[1] != X.shape[1] or b_i.shape[0] != W_i.shape[0]:
            raise ValueError(
                f"rank {rank}: W_{rank} has shape {W_i.shape} and b_{rank} shape {b_i.shape}; "
                f"with X of shape {X.shape} expected shapes (d_{rank}, {X.shape[1]}) and (d_{rank},)"
            )
        outputs.append(X @ W_i.T + b_i)
    return np.concatenate(outputs, axis=-1)


def row_parallel_forward(X, shards, b) -> np.ndarray:
    """The forward pass of a row-parallel layer: partial products, an all-reduce, then the bias once.

    Inputs:
    - X: inputs of shape (B, d_in); rank i sees only its columns X[:, start_i:stop_i], the
      features matching its weight block (the blocks are taken in rank order).
    - shards: a list of n arrays from split_input_columns, W_i of shape (d_out, d_i) with
      sum of d_i = d_in.
    - b: biases of shape (d_out,), held by every rank but added only once.

    Returns:
    - Z: an array of shape (B, d_out). Rank i computes the partial product
      P_i = X[:, start_i:stop_i] @ W_i.T of shape (B, d_out); the all-reduce sums the P_i and
      b is added to the sum: Z = sum_i P_i + b, which equals the unsplit layer X @ W.T + b.
    """
    X = float_array(X, "X", (2,))
    b = float_array(b, "b", (1,))
    blocks = [
        float_array(W_i, f"shards[{rank}]", (2,))
        for rank, W_i in enumerate(_shard_list(shards, "weight blocks"))
    ]
    widths = [W_i.shape[1] for W_i in blocks]
    if sum(widths) != X.shape[1] or any(W_i.shape[0] != b.shape[0] for W_i in blocks):
        raise ValueError(
            f"weight blocks of shapes {[W_i.shape for W_i in blocks]} do not fit X of shape {X.shape} "
            f"and b of shape {b.shape}: expected shapes (d_out, d_i) with d_out = {b.shape[0]} "
            f"and the d_i summing to {X.shape[1]}"
        )
    stops = np.cumsum(widths)
    partials = [X[:, stop - width : stop] @ W_i.T for W_i, width, stop in zip(blocks, widths, stops)]
    return np.sum(partials, axis=0) + b


def column_row_block(X, W1, b1, W2, b2, n: int, activation=None) -> tuple[np.ndarray, int]:
    """Two dense layers split Megatron-style: column-parallel, then row-parallel, one all-reduce.

    The first layer is split by output units; its output stays sharded (no all-gather), because
    rank i's hidden units are exactly the input features of the second layer's column block i.
    Only the second layer's partial products are summed.

    Inputs:
    - X: inputs of shape (B, d_in).
    - W1, b1: first layer, shapes (d_hidden, d_in) and (d_hidden,).
    - W2, b2: second layer, shapes (d_out, d_hidden) and (d_out,).
    - n: number of ranks, a positive int with n <= d_hidden.
    - activation: None, or an elementwise function applied to each rank's hidden block
      (elementwise functions need no communication).

    Returns a tuple (Z, n_reductions):
    - Z: array of shape (B, d_out), equal to activation(X @ W1.T + b1) @ W2.T + b2.
    - n_reductions: the number of collectives performed, always 1 (the all-reduce of the second
      layer; with n = 1 it moves no data).
    """
    X = float_array(X, "X", (2,))
    W1 = float_array(W1, "W1", (2,))
    b1 = float_array(b1, "b1", (1,))
    W2 = float_array(W2, "W2", (2,))
    b2 = float_array(b2, "b2", (1,))
    if (
        W1.shape[1] != X.shape[1]
        or b1.shape[0] != W1.shape[0]
        or W2.shape[1] != W1.shape[0]
        or b2.shape[0] != W2.shape[0]
    ):
        raise ValueError(
            f"shapes do not chain: X {X.shape}, W1 {W1.shape}, b1 {b1.shape}, W2 {W2.shape}, b2 {b2.shape}; "
            f"expected X (B, d_in), W1 (d_hidden, d_in), b1 (d_hidden,), W2 (d_out, d_hidden), b2 (d_out,)"
        )
    partials = []
    for (W1_i, b1_i), W2_i in zip(split_output_rows(W1, b1, n), split_input_columns(W2, n)):
        hidden_i = X @ W1_i.T + b1_i
        if activation is not None:
            hidden_i = activation(hidden_i)
        partials.append(hidden_i @ W2_i.T)
    return np.sum(partials, axis=0) + b2, 1


def communication_elements(collective: str, batch: int, d_out: int, world_size: int) -> float:
    """Elements each rank sends in a ring collective over the full (B, d_out) output.

    With N = B * d_out elements and p = world_size ranks, the tensor travels in p chunks of N / p:
    - "all_gather" (column-parallel output): each rank forwards p - 1 chunks: (p - 1) / p * N.
    - "all_reduce" (row-parallel output): a reduce-scatter then an all-gather, each
      (p - 1) / p * N, in total 2 * (p - 1) / p * N.
    One rank sends nothing (0.0). Bytes are these counts times the bytes per element.

    Inputs:
    - collective: "all_gather" or "all_reduce".
    - batch, d_out, world_size: positive ints B, d_out and p.

    Returns:
    - the number of elements each rank sends, a float (N / p need not be whole).
    """
    if not isinstance(collective, str) or collective not in RING_FACTORS:
        known = ", ".join(repr(name) for name in RING_FACTORS)
        raise ValueError(f"unknown collective {collective!r}; known collectives: {known}")
    size = positive_int(batch, "batch") * positive_int(d_out, "d_out")
    return float(RING_FACTORS[collective](positive_int(world_size, "world_size")) * size)
