"""The assignment-04 checks: full marks for the reference, zero with a code for each wrong model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grader.checks.tensor_parallel import forward_cases
from grader.reference import tensor_parallel as ref
from grader.student import LocalFunction

from conftest import assert_zero

A = "04_tensor_parallel"


def test_inputs_differ_between_students(ctx_for):
    first, again, other = (
        forward_cases(ctx_for(A, "row_parallel_forward", seed).rng, "columns") for seed in (1, 1, 2)
    )
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(first, again))
    assert not all(a[1].shape == b[1].shape and np.array_equal(a[1], b[1]) for a, b in zip(first, other))


def test_torch_tensors_are_accepted(grade):
    def column_parallel_in_torch(X, shards):
        return torch.from_numpy(ref.column_parallel_forward(X, shards))

    assert grade(A, "column_parallel_forward", LocalFunction(column_parallel_in_torch)).score == 2


# ------------------------------------------------------------------------------- wrong models


def rows_with_last_block_larger(W, n):
    size = W.shape[0] // n
    return [W[rank * size : (rank + 1) * size if rank < n - 1 else None] for rank in range(n)]


def columns_with_last_block_larger(W, n):
    return [block.T for block in rows_with_last_block_larger(W.T, n)]


def column_partials(X, shards):
    return [X @ W_i.T + b_i for W_i, b_i in shards]


def row_partials(X, shards):
    stops = np.cumsum([W_i.shape[1] for W_i in shards])
    return [X[:, stop - W_i.shape[1] : stop] @ W_i.T for W_i, stop in zip(shards, stops)]


def elements(collective, batch, d_out, p, factors):
    return factors[collective](p) * batch * d_out


WRONG_MODELS = {
    "split_output_rows": [
        (
            lambda W, b, n: list(zip(np.array_split(W, n, axis=1), np.array_split(b, n))),
            ("weight-rows-are-inputs",),
            "columns",
        ),
        (
            lambda W, b, n: [(W_i.T, b_i) for W_i, b_i in ref.split_output_rows(W, b, n)],
            ("weight-rows-are-inputs",),
            "transposed",
        ),
        (lambda W, b, n: [(W_i, b) for W_i, _ in ref.split_output_rows(W, b, n)], (), "whole bias"),
        (
            lambda W, b, n: [(W_i, None) for W_i, _ in ref.split_output_rows(W, b, n)],
            ("missing-bias",),
            "bias",
        ),
        (lambda W, b, n: [(W[rank::n], b[rank::n]) for rank in range(n)], (), "contiguous"),
        (
            lambda W, b, n: list(
                zip(rows_with_last_block_larger(W, n), rows_with_last_block_larger(b[:, None], n))
            ),
            (),
            "array_split",
        ),
        (lambda W, b, n: ref.split_output_rows(W, b, n)[:-1] if n > 1 else [], (), "shards"),
        (lambda W, b, n: [W_i for W_i, _ in ref.split_output_rows(W, b, n)], (), "pair"),
        (lambda W, b, n: dict(enumerate(ref.split_output_rows(W, b, n))), (), "list"),
    ],
    "split_input_columns": [
        (lambda W, n: np.array_split(W, n, axis=0), ("weight-rows-are-inputs",), "rows"),
        (
            lambda W, n: [W_i.T for W_i in ref.split_input_columns(W, n)],
            ("weight-rows-are-inputs",),
            "transposed",
        ),
        (lambda W, n: [W[:, rank::n] for rank in range(n)], (), "contiguous"),
        (columns_with_last_block_larger, (), "array_split"),
        (lambda W, n: np.stack([W] * n), (), "list"),
    ],
    "column_parallel_forward": [
        (
            lambda X, shards: (
                np.sum(column_partials(X, shards), axis=0)
                if len({W.shape for W, _ in shards}) == 1
                else ref.column_parallel_forward(X, shards)
            ),
            (),
            "concatenated along the last axis",
        ),
        (
            lambda X, shards: np.concatenate([X @ W_i.T for W_i, _ in shards], axis=-1),
            ("missing-bias",),
            "bias",
        ),
        (lambda X, shards: np.concatenate(column_partials(X, shards), axis=0), (), "batch axis"),
        (lambda X, shards: column_partials(X, shards)[0], ("split-needs-no-communication",), "rank 0"),
        (lambda X, shards: column_partials(X, shards), (), "list of"),
        (lambda X, shards: ref.column_parallel_forward(X, shards) + 1e-3, (), "differs"),
        (lambda X, shards: ref.column_parallel_forward(X, shards)[:, :-1], (), "shape"),
    ],
    "row_parallel_forward": [
        (
            lambda X, shards, b: np.sum([P + b for P in row_partials(X, shards)], axis=0),
            ("bias-added-per-shard",),
            "once",
        ),
        (
            lambda X, shards, b: np.concatenate(row_partials(X, shards), axis=-1) + np.tile(b, len(shards)),
            ("split-needs-no-communication",),
            "concatenated",
        ),
        (
            lambda X, shards, b: row_partials(X, shards)[0] + b,
            ("split-needs-no-communication",),
            "all-reduce",
        ),
        (lambda X, shards, b: row_partials(X, shards)[-1], ("split-needs-no-communication",), "alone"),
        (lambda X, shards, b: np.sum(row_partials(X, shards), axis=0), ("missing-bias",), "bias"),
        (lambda X, shards, b: np.mean(row_partials(X, shards), axis=0) + b, (), "averaged"),
    ],
    "communication_elements": [
        (lambda c, B, d, p: 0, ("split-needs-no-communication",), "exchange"),
        (lambda c, B, d, p: (p - 1) / p * B * d, (), "reduce-scatter"),
        (lambda c, B, d, p: 2 * (p - 1) / p * B * d, (), "second half"),
        (
            lambda c, B, d, p: elements(
                c, B, d, p, {"all_gather": lambda p: p, "all_reduce": lambda p: 2 * p}
            ),
            (),
            "chunks",
        ),
        (
            lambda c, B, d, p: elements(
                c, B, d, p, {"all_gather": lambda p: p - 1, "all_reduce": lambda p: 2 * (p - 1)}
            ),
            (),
            "chunks",
        ),
        (lambda c, B, d, p: ref.communication_elements(c, B, d, p) if p > 1 else B * d, (), "single rank"),
        (lambda c, B, d, p: round(ref.communication_elements(c, B, d, p) * 1.01), (), "elements per rank"),
        (lambda c, B, d, p: "many", (), "number"),
    ],
}


@pytest.mark.parametrize(
    "part, index", [(part, i) for part, models in WRONG_MODELS.items() for i in range(len(models))]
)
@pytest.mark.parametrize("seed", [0, 7])
def test_wrong_models_score_zero_with_their_code(grade, part, index, seed):
    function, codes, text = WRONG_MODELS[part][index]
    assert_zero(grade(A, part, LocalFunction(function), seed), *codes, text=text)


# ------------------------------------------------------------------------------- hostile answers


def test_functions_that_modify_their_input_score_zero(grade):
    def column_parallel_in_place(X, shards):
        Z = ref.column_parallel_forward(X, shards)
        X *= 2
        return Z

    assert_zero(grade(A, "column_parallel_forward", LocalFunction(column_parallel_in_place)), text="modified")

    def split_in_place(W, b, n):
        shards = ref.split_output_rows(W, b, n)
        b[:] = 0
        return shards

    assert_zero(grade(A, "split_output_rows", LocalFunction(split_in_place)), text="modified its input (b)")


def test_returning_the_input_itself_scores_zero(grade):
    assert_zero(
        grade(A, "column_parallel_forward", LocalFunction(lambda X, shards: X)), text="input array itself"
    )


def test_nan_outputs_never_pass(grade):
    def nan_forward(X, shards, b):
        return np.full((X.shape[0], b.shape[0]), np.nan)

    assert_zero(grade(A, "row_parallel_forward", LocalFunction(nan_forward)), text="NaN")


@pytest.mark.parametrize(
    "part, split",
    [
        (
            "split_output_rows",
            lambda W, b, n: [(W_i.astype(np.float32), b_i) for W_i, b_i in ref.split_output_rows(W, b, n)],
        ),
        (
            "split_output_rows",
            lambda W, b, n: [
                (W_i, torch.tensor(b_i, dtype=torch.float32)) for W_i, b_i in ref.split_output_rows(W, b, n)
            ],
        ),
        (
            "split_input_columns",
            lambda W, n: [torch.tensor(W_i, dtype=torch.float32) for W_i in ref.split_input_columns(W, n)],
        ),
    ],
)
def test_shards_rounded_to_float32_are_named_before_any_process_starts(grade, part, split):
    assert_zero(grade(A, part, LocalFunction(split, part)), text="as if converted to float32")


def test_a_float32_element_count_is_named_as_such(grade):
    def in_float32(*args):
        return np.float32(ref.communication_elements(*args))

    assert_zero(
        grade(A, "communication_elements", LocalFunction(in_float32)), text="as if computed in float32"
    )


# -------------------------------------------------------------------- rejecting too many ranks


def split_rows_without_limit(W, b, n):
    if n < 1:
        raise ValueError("n must be positive")
    return list(zip(np.array_split(np.asarray(W), n), np.array_split(np.asarray(b), n)))


def split_rows_with_wrong_error(W, b, n):
    if n > np.shape(W)[0]:
        raise IndexError("too many ranks")
    return ref.split_output_rows(W, b, n)


@pytest.mark.parametrize("split", [split_rows_without_limit, split_rows_with_wrong_error])
def test_a_split_that_accepts_more_ranks_than_rows_gets_half_marks(grade, split):
    result = grade(A, "split_output_rows", LocalFunction(split))
    assert result.score == pytest.approx(1.0), result.feedback
    assert "ValueError" in result.feedback and "output rows" in result.feedback


def test_the_reference_split_refuses_more_ranks_than_rows():
    with pytest.raises(ValueError, match="n"):
        ref.split_output_rows(np.zeros((3, 2)), np.zeros(3), 4)
