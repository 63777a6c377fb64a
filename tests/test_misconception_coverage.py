"""Every misconception code in the vocabulary is recognised: one wrong answer per code scores 0
on its part and carries that code. The quiz covers the chapter's conceptual ones."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_zero
from grader.checks.quiz import QUIZ
from grader.misconceptions import MISCONCEPTIONS
from grader.student import LocalFunction, local_value


def quiz_with_wrong(statement: int) -> dict[int, bool]:
    """The right answers except for `statement`."""
    answers = {number: truth for number, (_, truth, _) in QUIZ.items()}
    answers[statement] = not answers[statement]
    return answers


def quiz_case(code: str):
    number = next(n for n, (_, _, c) in QUIZ.items() if c == code)
    return "05_matmul_benchmark", "misconception_quiz", local_value(quiz_with_wrong(number))


def one_neuron_shapes(d_in, d_out, batch=None):
    return {"x": (d_in,) if batch is None else (batch, d_in), "W": (d_in,), "b": (), "z": ()}


def batch_in_weights(d_in, d_out, batch=None):
    lead = () if batch is None else (batch,)
    return {"x": lead + (d_in,), "W": lead + (d_out, d_in), "b": lead + (d_out,), "z": lead + (d_out,)}


def relu_between(W1, b1, W2, b2):
    return W2 @ np.maximum(W1, 0), W2 @ np.maximum(b1, 0) + b2


def only_first_partial(X, shards, b):
    return X[..., : shards[0].shape[1]] @ shards[0].T + b


def bias_on_every_shard(X, shards, b):
    columns = np.cumsum([0] + [W_i.shape[1] for W_i in shards])
    return sum(X[..., start:stop] @ W_i.T + b for W_i, start, stop in zip(shards, columns[:-1], columns[1:]))


def bias_grad_per_row(G, X, W):
    return G @ W, G.T @ X, G


def timed_with_warmup(fn, warmup=3, repeat=10, timer=None, sync=None):
    durations = []
    for _ in range(warmup + repeat):
        if sync:
            sync()
        start = timer()
        fn()
        if sync:
            sync()
        durations.append(timer() - start)
    return float(np.median(durations))


def timed_without_sync(fn, warmup=3, repeat=10, timer=None, sync=None):
    for _ in range(warmup):
        fn()
    durations = []
    for _ in range(repeat):
        start = timer()
        fn()
        durations.append(timer() - start)
    return float(np.median(durations))


def not_yet(*args):
    raise NotImplementedError("Task 1.4: compute Z = X @ W.T + b")


CASES = {
    "layer-is-one-neuron": ("01_shapes", "layer_shapes", LocalFunction(one_neuron_shapes)),
    "hidden-unit-is-concept": quiz_case("hidden-unit-is-concept"),
    "batch-changes-weights": ("01_shapes", "layer_shapes", LocalFunction(batch_in_weights)),
    "weight-rows-are-inputs": ("01_shapes", "linear_forward", LocalFunction(lambda X, W, b: X @ W + b)),
    "bias-per-input": (
        "02_parameters",
        "layer_parameters",
        LocalFunction(lambda d_in, d_out, bias=True: d_in * d_out + (d_in if bias else 0)),
    ),
    "wider-always-better": quiz_case("wider-always-better"),
    "stacked-affine-is-nonlinear": ("01_shapes", "collapse_affine", LocalFunction(relu_between)),
    "params-determine-memory": (
        "02_parameters",
        "training_memory_bytes",
        LocalFunction(lambda n, bytes_per_value=4, optimizer="adam": n * bytes_per_value),
    ),
    "split-needs-no-communication": (
        "04_tensor_parallel",
        "row_parallel_forward",
        LocalFunction(only_first_partial),
    ),
    "all-layers-dense": quiz_case("all-layers-dense"),
    "missing-bias": ("01_shapes", "linear_forward", LocalFunction(lambda X, W, b: X @ W.T)),
    "bias-added-per-shard": (
        "04_tensor_parallel",
        "row_parallel_forward",
        LocalFunction(bias_on_every_shard),
    ),
    "grad-transposed": ("03_gradients", "grad_W_expr", local_value("X.T*G")),
    "grad-wrong-operand": ("03_gradients", "grad_X_expr", local_value("G*X")),
    "bias-grad-not-summed": ("03_gradients", "linear_backward", LocalFunction(bias_grad_per_row)),
    "flops-missing-factor-2": (
        "05_matmul_benchmark",
        "matmul_flops",
        LocalFunction(lambda batch, d_in, d_out: batch * d_in * d_out),
    ),
    "timing-includes-warmup": ("05_matmul_benchmark", "time_op", LocalFunction(timed_with_warmup)),
    "timing-without-sync": ("05_matmul_benchmark", "time_op", LocalFunction(timed_without_sync)),
    "width-doubling-doubles-params": ("02_parameters", "doubling_ratio", local_value("2")),
    "not-implemented": ("01_shapes", "linear_forward", LocalFunction(not_yet)),
}


def test_every_code_in_the_vocabulary_has_a_case():
    assert set(CASES) == set(MISCONCEPTIONS)


@pytest.mark.parametrize("code", sorted(CASES))
@pytest.mark.parametrize("seed", [0, 7])
def test_a_wrong_answer_embodying_the_code_scores_zero_and_names_it(code, seed, grade):
    assignment, part, answer = CASES[code]
    result = grade(assignment, part, answer, seed)
    if part == "misconception_quiz":  # one wrong mark of ten scores (9 - 1) / 10, and is named
        assert result.score == pytest.approx(0.8 * result.max_score) and result.misconceptions == (code,), (
            result
        )
    else:
        assert_zero(result, code)
