"""The tensor-parallel reference against direct float64 computation and a simulated ring."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from grader.reference import tensor_parallel as ref

SIZES = st.sampled_from([1, 2, 3, 5, 7, 12, 73])
WORLD_SIZES = st.sampled_from([1, 2, 3, 4, 7, 8])


@st.composite
def layers(draw, split_axis: int):
    """(X, W, b, n) with n <= the size of the split axis of W (0: rows, 1: columns)."""
    batch, d_in, d_out = draw(SIZES), draw(SIZES), draw(SIZES)
    n = draw(WORLD_SIZES.filter(lambda n: n <= (d_out, d_in)[split_axis]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return rng.normal(size=(batch, d_in)), rng.normal(size=(d_out, d_in)), rng.normal(size=d_out), n


@settings(max_examples=60, deadline=None)
@given(layers(split_axis=0))
def test_split_output_rows_gives_contiguous_array_split_blocks(layer):
    _, W, b, n = layer
    shards = ref.split_output_rows(W, b, n)
    assert len(shards) == n
    for (W_i, b_i), W_want, b_want in zip(shards, np.array_split(W, n), np.array_split(b, n)):
        assert W_i.dtype == np.float64 and np.array_equal(W_i, W_want) and np.array_equal(b_i, b_want)
    sizes = [W_i.shape[0] for W_i, _ in shards]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] - sizes[-1] <= 1


@settings(max_examples=60, deadline=None)
@given(layers(split_axis=1))
def test_split_input_columns_gives_contiguous_array_split_blocks(layer):
    _, W, _, n = layer
    shards = ref.split_input_columns(W, n)
    assert len(shards) == n
    assert all(np.array_equal(W_i, want) for W_i, want in zip(shards, np.array_split(W, n, axis=1)))
    assert np.array_equal(np.concatenate(shards, axis=1), W)


@settings(max_examples=60, deadline=None)
@given(layers(split_axis=0))
def test_column_parallel_forward_equals_the_unsplit_layer(layer):
    X, W, b, n = layer
    Z = ref.column_parallel_forward(X, ref.split_output_rows(W, b, n))
    assert Z.shape == (X.shape[0], W.shape[0])
    np.testing.assert_allclose(Z, X @ W.T + b, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(layers(split_axis=1))
def test_row_parallel_forward_equals_the_unsplit_layer(layer):
    X, W, b, n = layer
    Z = ref.row_parallel_forward(X, ref.split_input_columns(W, n), b)
    direct = np.einsum("bk,jk->bj", X, W) + b
    np.testing.assert_allclose(Z, direct, rtol=1e-10, atol=1e-12)


def test_row_parallel_adds_the_bias_exactly_once():
    X, W, b = np.zeros((2, 6)), np.zeros((3, 6)), np.array([1.0, -2.0, 0.5])
    for n in (1, 2, 3, 6):
        assert np.array_equal(
            ref.row_parallel_forward(X, ref.split_input_columns(W, n), b), np.tile(b, (2, 1))
        )


def test_uneven_split_sizes_follow_array_split():
    W, b = np.arange(73 * 2.0).reshape(73, 2), np.arange(73.0)
    assert [W_i.shape[0] for W_i, _ in ref.split_output_rows(W, b, 4)] == [19, 18, 18, 18]
    assert [W_i.shape[1] for W_i in ref.split_input_columns(W.T, 7)] == [11] * 3 + [10] * 4


def test_blocks_are_copies():
    W, b = np.ones((4, 3)), np.ones(4)
    W_0, b_0 = ref.split_output_rows(W, b, 2)[0]
    W_0[:] = 5.0
    b_0[:] = 5.0
    ref.split_input_columns(W, 3)[0][:] = 7.0
    assert np.all(W == 1.0) and np.all(b == 1.0)


@settings(max_examples=40, deadline=None)
@given(SIZES, SIZES, SIZES, SIZES, WORLD_SIZES, st.booleans(), st.integers(0, 2**32 - 1))
def test_column_then_row_block_equals_the_unsplit_block_with_one_reduction(
    batch, d_in, d_hidden, d_out, n, relu, seed
):
    n = min(n, d_hidden)
    rng = np.random.default_rng(seed)
    X, W1, b1 = rng.normal(size=(batch, d_in)), rng.normal(size=(d_hidden, d_in)), rng.normal(size=d_hidden)
    W2, b2 = rng.normal(size=(d_out, d_hidden)), rng.normal(size=d_out)
    activation = (lambda H: np.maximum(H, 0.0)) if relu else None
    Z, n_reductions = ref.column_row_block(X, W1, b1, W2, b2, n, activation)
    hidden = X @ W1.T + b1
    direct = (np.maximum(hidden, 0.0) if relu else hidden) @ W2.T + b2
    np.testing.assert_allclose(Z, direct, rtol=1e-10, atol=1e-10)
    assert n_reductions == 1


def test_column_then_row_block_rejects_layers_that_do_not_chain():
    with pytest.raises(ValueError, match="do not chain"):
        ref.column_row_block(np.ones((2, 3)), np.ones((4, 3)), np.ones(4), np.ones((2, 5)), np.ones(2), 2)


def ring_all_gather(chunks: list[np.ndarray]) -> tuple[list[list], list[int]]:
    """Ring all-gather of rank i's chunk i; returns each rank's gathered chunks and elements sent per rank."""
    p = len(chunks)
    held = [{rank: chunks[rank]} for rank in range(p)]
    sent = [0] * p
    for step in range(p - 1):
        messages = [(rank, (rank - step) % p) for rank in range(p)]
        for rank, index in messages:
            held[(rank + 1) % p][index] = held[rank][index]
            sent[rank] += held[rank][index].size
    return [[held[rank][index] for index in range(p)] for rank in range(p)], sent


def ring_all_reduce(tensors: list[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    """Ring all-reduce (reduce-scatter, then all-gather) of one tensor per rank.

    Returns the results and the number of elements each rank sent.
    """
    p = len(tensors)
    parts = [np.array_split(tensor.ravel(), p) for tensor in tensors]
    sent = [0] * p
    for step in range(p - 1):
        outgoing = [(rank, (rank - step) % p, parts[rank][(rank - step) % p].copy()) for rank in range(p)]
        for rank, index, chunk in outgoing:
            parts[(rank + 1) % p][index] = parts[(rank + 1) % p][index] + chunk
            sent[rank] += chunk.size
    reduced = [parts[rank][(rank + 1) % p] for rank in range(p)]
    gathered, sent_gather = ring_all_gather([reduced[(index - 1) % p] for index in range(p)])
    results = [np.concatenate(chunks).reshape(tensors[0].shape) for chunks in gathered]
    return results, [a + b for a, b in zip(sent, sent_gather)]


@pytest.mark.parametrize("p", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("batch, d_out", [(1, 7), (4, 6), (7, 73), (16, 12)])
def test_communication_formula_matches_a_simulated_ring(p, batch, d_out):
    rng = np.random.default_rng(p * 1000 + batch * d_out)
    partials = [rng.normal(size=(batch, d_out)) for _ in range(p)]
    results, sent = ring_all_reduce(partials)
    for result in results:
        np.testing.assert_allclose(result, np.sum(partials, axis=0), rtol=1e-12, atol=1e-12)
    assert np.mean(sent) == pytest.approx(
        ref.communication_elements("all_reduce", batch, d_out, p), rel=1e-12
    )

    full = rng.normal(size=batch * d_out)
    gathered, sent = ring_all_gather(np.array_split(full, p))
    assert all(np.array_equal(np.concatenate(chunks), full) for chunks in gathered)
    assert np.mean(sent) == pytest.approx(
        ref.communication_elements("all_gather", batch, d_out, p), rel=1e-12
    )
    if (batch * d_out) % p == 0:
        assert len(set(sent)) == 1


def test_communication_elements_values():
    assert ref.communication_elements("all_gather", 8, 1024, 4) == 6144.0
    assert ref.communication_elements("all_reduce", 8, 1024, 4) == 12288.0
    assert ref.communication_elements("all_reduce", 73, 7, 1) == 0.0
    assert ref.communication_elements("all_gather", 1, 7, 3) == pytest.approx(14 / 3)
    assert isinstance(ref.communication_elements("all_gather", 2, 2, 2), float)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: ref.communication_elements("broadcast", 2, 3, 4),
            "known collectives: 'all_gather', 'all_reduce'",
        ),
        (lambda: ref.communication_elements(["all_reduce"], 2, 3, 4), "unknown collective"),
        (lambda: ref.communication_elements("all_reduce", 0, 3, 4), "batch"),
        (lambda: ref.communication_elements("all_reduce", 2, 3, True), "world_size"),
        (
            lambda: ref.split_output_rows(np.ones((3, 2)), np.ones(3), 4),
            "cannot split 3 output units (rows of W) across 4 ranks",
        ),
        (lambda: ref.split_output_rows(np.ones((3, 2)), np.ones(2), 1), "one bias per row"),
        (lambda: ref.split_output_rows(np.ones((3, 2)), np.ones(3), 0), "n must be a positive integer"),
        (lambda: ref.split_output_rows(np.ones((3, 2)), np.ones(3), 1.5), "n must be a positive integer"),
        (lambda: ref.split_input_columns(np.ones(3), 1), "W must be 2-D"),
        (lambda: ref.split_input_columns(np.ones((3, 2)), 3), "cannot split 2 input features"),
        (lambda: ref.column_parallel_forward(np.ones((2, 3)), []), "non-empty list"),
        (lambda: ref.column_parallel_forward(np.ones((2, 3)), [np.ones((2, 3))]), "must be a pair"),
        (lambda: ref.column_parallel_forward(np.ones((2, 3)), [(np.ones((2, 4)), np.ones(2))]), "rank 0"),
        (lambda: ref.row_parallel_forward(np.ones((2, 3)), [np.ones((2, 2))], np.ones(2)), "do not fit"),
        (lambda: ref.row_parallel_forward(np.ones((2, 3)), [np.ones((2, 3))], np.full(2, np.nan)), "NaN"),
        (
            lambda: ref.column_row_block(
                np.ones((2, 3)), np.ones((4, 3)), np.ones(3), np.ones((2, 4)), np.ones(2), 2
            ),
            "b1 (3,)",
        ),
    ],
)
def test_bad_input_gets_a_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()
