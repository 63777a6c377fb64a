"""The assignment-02 checks: exact counts, the seed's numbers, and the usual wrong formulas."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from grader.reference import parameters as ref
from grader.result import Status
from grader.student import LocalFunction, local_value

from conftest import assert_zero

A = "02_parameters"
FUNCTION_PARTS = ["layer_parameters", "count_parameters", "output_activations", "training_memory_bytes"]


def test_numpy_integers_and_integral_floats_are_accepted(grade):
    answer = LocalFunction(lambda d_in, d_out, bias=True: np.int64(ref.layer_parameters(d_in, d_out, bias)))
    assert grade(A, "layer_parameters", answer).status == Status.PASSED
    counts = LocalFunction(lambda widths, bias=True: np.array(ref.count_parameters(widths, bias)))
    assert grade(A, "count_parameters", counts).status == Status.PASSED
    as_float = LocalFunction(lambda batch, d_out: float(batch * d_out))
    assert grade(A, "output_activations", as_float).status == Status.PASSED


def layers_weights_only(d_in, d_out, bias=True):
    return d_in * d_out


def layers_bias_per_input(d_in, d_out, bias=True):
    return d_in * d_out + (d_in if bias else 0)


def layers_ignore_bias_flag(d_in, d_out, bias=True):
    return d_out * (d_in + 1)


def counts_weights_only(widths, bias=True):
    return [i * o for i, o in zip(widths[:-1], widths[1:])]


def counts_bias_per_input(widths, bias=True):
    return [i * o + (i if bias else 0) for i, o in zip(widths[:-1], widths[1:])]


def counts_total_only(widths, bias=True):
    return sum(ref.count_parameters(widths, bias))


def counts_one_per_width(widths, bias=True):
    return [0] + ref.count_parameters(widths, bias)


def counts_ignore_bias_flag(widths, bias=True):
    return ref.count_parameters(widths, True)


def activations_as_parameters(batch, d_out):
    return d_out * (batch + 1)


def activations_per_observation(batch, d_out):
    return d_out


def memory_weights_only(n_params, bytes_per_value=4, optimizer="adam"):
    return n_params * bytes_per_value


def memory_without_optimizer_state(n_params, bytes_per_value=4, optimizer="adam"):
    return 2 * n_params * bytes_per_value


def memory_always_adam(n_params, bytes_per_value=4, optimizer="adam"):
    return 4 * n_params * bytes_per_value


def memory_in_values(n_params, bytes_per_value=4, optimizer="adam"):
    return ref.training_memory_bytes(n_params, 1, optimizer)


def memory_without_defaults(n_params, bytes_per_value, optimizer):
    return ref.training_memory_bytes(n_params, bytes_per_value, optimizer)


WRONG_FUNCTIONS = [
    ("layer_parameters", layers_weights_only, ("missing-bias",), "bias"),
    ("layer_parameters", layers_bias_per_input, ("bias-per-input",), "per output unit"),
    ("layer_parameters", layers_ignore_bias_flag, (), "bias=False"),
    ("layer_parameters", lambda d_in, d_out, bias=True: d_in + d_out, (), "pair"),
    ("count_parameters", counts_weights_only, ("missing-bias",), ""),
    ("count_parameters", counts_bias_per_input, ("bias-per-input",), ""),
    ("count_parameters", counts_total_only, (), "one count per layer"),
    ("count_parameters", counts_one_per_width, (), "consecutive widths"),
    ("count_parameters", counts_ignore_bias_flag, (), "bias=False"),
    ("output_activations", activations_as_parameters, (), "parameter count"),
    ("output_activations", activations_per_observation, (), "one observation"),
    ("output_activations", lambda batch, d_out: 2 * batch * d_out, (), "two operations"),
    ("training_memory_bytes", memory_weights_only, ("params-determine-memory",), "gradient"),
    (
        "training_memory_bytes",
        memory_without_optimizer_state,
        ("params-determine-memory",),
        "optimizer state",
    ),
    ("training_memory_bytes", memory_always_adam, (), "buffer"),
    ("training_memory_bytes", memory_in_values, (), "bytes_per_value"),
    ("training_memory_bytes", memory_without_defaults, (), "missing"),
]


@pytest.mark.parametrize(
    "part, function, codes, text",
    WRONG_FUNCTIONS,
    ids=[f"{p}-{getattr(f, '__name__', 'fn')}-{i}" for i, (p, f, _, _) in enumerate(WRONG_FUNCTIONS)],
)
@pytest.mark.parametrize("seed", [0, 7])
def test_wrong_models_score_zero_with_their_code(grade, part, function, codes, text, seed):
    assert_zero(grade(A, part, LocalFunction(function, part), seed), *codes, text=text)


def test_seed_002_memory_case_is_checked_first(grade):
    result = grade(A, "training_memory_bytes", LocalFunction(memory_weights_only, "training_memory_bytes"))
    assert "training_memory_bytes(200960)" in result.feedback and "803840" in result.feedback


def test_a_count_that_is_off_names_the_layer(grade):
    def off_by_one(widths, bias=True):
        counts = ref.count_parameters(widths, bias)
        counts[1] += 1
        return counts

    assert_zero(grade(A, "count_parameters", LocalFunction(off_by_one)), text="layer 2 (20 -> 5)")


@pytest.mark.parametrize("part", FUNCTION_PARTS)
@pytest.mark.parametrize("value", [True, float("nan"), float("inf"), 2.5, -1, 2**70, [1, [2]], {"total": 1}])
def test_odd_numbers_score_zero(grade, part, value):
    assert_zero(grade(A, part, LocalFunction(lambda *args: value, part)))


@pytest.mark.parametrize("part", FUNCTION_PARTS)
def test_system_exit_is_contained(grade, part):
    assert_zero(grade(A, part, LocalFunction(lambda *args: sys.exit(), part)), text="SystemExit")


def test_a_huge_integral_float_is_refused_without_printing_all_its_digits(grade):
    result = grade("02_parameters", "layer_parameters", LocalFunction(lambda d_in, d_out, bias=True: 3e302))
    assert_zero(result, text="should be an integer, but is the float 3e+302")
    assert len(result.feedback) < 200


# ------------------------------------------------------------------------- depends_on_batch


@pytest.mark.parametrize("text", ["activations", " Activations ", "ACTIVATIONS"])
def test_the_activations_depend_on_the_batch(grade, text):
    result = grade(A, "depends_on_batch", local_value(text))
    assert result.score == result.max_score == 1, result.feedback


@pytest.mark.parametrize(
    "text,codes",
    [("parameters", ("batch-changes-weights",)), ("both", ("batch-changes-weights",)), ("neither", ())],
)
def test_wrong_choices_are_explained(grade, text, codes):
    assert_zero(grade(A, "depends_on_batch", local_value(text)), *codes)


@pytest.mark.parametrize(
    "value,text", [(None, "not answered yet"), (3, "should be a string"), ("weights", "one of")]
)
def test_unusable_choices_are_named(grade, value, text):
    assert_zero(grade(A, "depends_on_batch", local_value(value)), text=text)


@pytest.mark.parametrize("batch,d_in,d_out", [(1, 1, 1), (7, 73, 7), (73, 1, 7)])
def test_reference_choice_is_the_same_for_every_size(batch, d_in, d_out):
    assert ref.depends_on_batch(batch, d_in, d_out) == "activations"
