"""The shared check machinery, and the contract every function check keeps with it.

The contract tests run over every function part of the course: the reference gets full marks
for many students, hostile return values and stubs get a clear zero, and an exception in
student code never crashes grading.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader import reference
from grader.checks.base import WrongAnswer
from grader.checks.common import (
    CallWording,
    call_student,
    call_text,
    compare_array,
    distinct_sizes,
    first_difference,
    first_differing_index,
    known_mistake,
    reject_float32,
    same,
)
from grader.checks.values import as_int, describe
from grader.course import load_course
from grader.reference.validation import float_array, positive_int, positive_number, whole_number
from grader.result import Status
from grader.student import LocalFunction, StudentRaised, local_value

from conftest import assert_full_marks, assert_zero

COURSE = load_course()
REFERENCES = {assignment.id: reference.for_assignment(assignment) for assignment in COURSE.assignments}
DEFAULT_SEEDS = 15  # students per function part, unless an assignment needs more or fewer here:
SEEDS = {"01_shapes": 30, "02_parameters": 30, "03_gradients": 12}
FUNCTION_PARTS = [
    (assignment.id, part.id)
    for assignment in COURSE.assignments
    for part in assignment.parts
    if part.kind == "function"
]
ANSWER_PARTS = [
    (assignment.id, part)
    for assignment in COURSE.assignments
    for part in assignment.parts
    if part.kind in ("value", "symbolic")
]


def student(function, part: str) -> LocalFunction:
    return LocalFunction(function, part)


# ------------------------------------------------------------------------------------ contract


@pytest.mark.parametrize(
    "assignment, part, seed",
    [(a, p, seed) for a, p in FUNCTION_PARTS for seed in range(SEEDS.get(a, DEFAULT_SEEDS))],
)
def test_reference_gets_full_marks(grade, assignment, part, seed):
    assert_full_marks(grade(assignment, part, student(getattr(REFERENCES[assignment], part), part), seed))


@pytest.mark.parametrize("assignment, part", FUNCTION_PARTS)
def test_hostile_return_values_score_zero(grade, assignment, part, hostile_value):
    _, make = hostile_value
    assert_zero(grade(assignment, part, student(lambda *args: make(), part)))


@pytest.mark.parametrize("assignment, part", FUNCTION_PARTS)
def test_stubs_are_reported_as_not_implemented(grade, assignment, part):
    def stub(*args):
        raise NotImplementedError("fill in this function")

    result = grade(assignment, part, student(stub, part))
    assert_zero(result, "not-implemented", text="not implemented")
    assert result.status == Status.FAILED and result.misconceptions == ("not-implemented",)


@pytest.mark.parametrize("assignment, part", ANSWER_PARTS, ids=[part.id for _, part in ANSWER_PARTS])
def test_unanswered_values_are_reported_as_not_implemented(grade, assignment, part):
    result = grade(assignment, part.id, local_value(None))
    assert (
        result.status == Status.FAILED and result.score == 0 and result.misconceptions == ("not-implemented",)
    )
    assert result.feedback.startswith(
        f"Task {part.task} is not answered yet: `{part.name}` is still None."
    ), result.feedback


@pytest.mark.parametrize("assignment, part", FUNCTION_PARTS)
def test_exceptions_are_reported_without_crashing(grade, assignment, part):
    def broken(*args):
        raise ZeroDivisionError("shapes do not align")

    result = grade(assignment, part, student(broken, part))
    assert_zero(result, text="ZeroDivisionError: shapes do not align")
    assert result.status == Status.ERROR, result  # a student's exception: the same status everywhere


# --------------------------------------------------------------------------------- call_student


def wrong_feedback(call) -> str:
    with pytest.raises(WrongAnswer) as caught:
        call()
    return caught.value.feedback


def test_call_student_returns_the_decoded_value():
    X = np.arange(6.0).reshape(2, 3)
    got = call_student(student(lambda X, n: X * n, "scale"), (X, 2), ("X", "n"))
    assert type(got) is np.ndarray and np.array_equal(got, X * 2)


def test_call_student_words_errors_mutations_and_returned_inputs():
    X = np.ones((7, 3))

    def mutate(X, n):
        X += 1
        return X.sum()

    raised = wrong_feedback(lambda: call_student(student(lambda X, n: 1 / 0, "f"), (X, 73), ("X", "n")))
    assert (
        raised.startswith("Calling `f` with X of shape (7, 3), n=73 failed:")
        and "ZeroDivisionError" in raised
    )
    mutated = wrong_feedback(lambda: call_student(student(mutate, "f"), (X, 1), ("X", "n")))
    assert "`f` modified its input X in place" in mutated
    returned = wrong_feedback(lambda: call_student(student(lambda X, n: X, "f"), (X, 1), ("X", "n")))
    assert "`f` returned its input X itself" in returned


def test_call_wording_can_reword_or_let_cases_through():
    X = np.ones(7)
    wording = CallWording(raised=None, mutated="{function} changed {inputs} ({arrays})", returned_input=None)
    with pytest.raises(StudentRaised):
        call_student(student(lambda X: 1 / 0, "f"), (X,), ("X",), wording)
    returned = student(lambda X: X, "f")
    assert np.array_equal(call_student(returned, (X,), ("X",), wording), X)

    def mutate(X):
        X[0] = 5.0
        return 0.0

    assert (
        wrong_feedback(lambda: call_student(student(mutate, "f"), (X,), ("X",), wording))
        == "f changed X (X of shape (7,))"
    )


def test_call_student_lets_not_implemented_through_whatever_the_wording():
    def stub(X):
        raise NotImplementedError

    with pytest.raises(StudentRaised) as caught:
        call_student(student(stub, "f"), (np.ones(1),), ("X",))
    assert caught.value.not_implemented


def test_call_text_shows_a_call_as_typed():
    assert call_text("layer_parameters", (4, 6, True)) == "layer_parameters(4, 6, True)"
    assert call_text("find_mismatch", ((32, 10), 12)) == "find_mismatch((32, 10), 12)"


# ------------------------------------------------------------------------------ comparing answers


def test_same_compares_arrays_numbers_none_and_lists():
    a = np.array([1.0, 2.0])
    assert same(a + 1e-12, a) and not same(a + 1e-3, a) and not same([a], a)
    assert same(3.0, 3.0 + 1e-12) and not same(3, 3.0) and not same(None, 0.0) and same(None, None)
    assert same([a, None], [a.copy(), None]) and not same([a], [a, a])


def test_known_mistake_names_the_first_matching_model_that_differs_from_the_answer():
    expected = np.array([1.0, 2.0])
    models = [
        (None, "skipped"),
        (expected, "equal to the answer, never named"),
        (expected * 2, "doubled", "code-a"),
        (expected * 2, "second doubled"),
    ]
    assert known_mistake(expected * 2, expected, models) == ("doubled", ("code-a",))
    assert known_mistake(expected, expected, models) is None
    assert known_mistake(expected * 3, expected, models) is None


def test_first_difference_reports_one_entry_and_its_index():
    expected = np.zeros((3, 4))
    got = expected.copy()
    got[1, 2], got[2, 0] = 5.0, 7.0
    assert first_differing_index(got, expected) == (1, 2)
    assert first_differing_index(expected, expected) is None
    assert first_difference(got, expected) == "first difference at index (1, 2): you returned 5, expected 0"
    assert first_difference(np.array([0.0, 1.0]), np.zeros(2)).startswith("first difference at index 1:")


def test_compare_array_prefers_a_named_model_over_the_generic_feedback():
    expected = np.arange(7.0)
    compare_array(expected.tolist(), expected, "the output", "For x")
    named = wrong_feedback(
        lambda: compare_array(
            expected * 2, expected, "the output", "For x", [(expected * 2, "it is doubled.")]
        )
    )
    assert named == "For x: it is doubled."
    assert "shape (1, 7)" in wrong_feedback(
        lambda: compare_array(expected[None], expected, "the output", "For x")
    )
    assert "float32" in wrong_feedback(
        lambda: compare_array(expected + 1e-5, expected, "the output", "For x")
    )
    assert "NaN" in wrong_feedback(lambda: compare_array(expected * np.nan, expected, "the output", "For x"))


def test_a_scalar_model_is_compared_as_an_array():
    with pytest.raises(WrongAnswer) as caught:
        compare_array(
            6.0,
            np.array([1.0, 2.0]),
            "the output",
            "For x",
            [(np.float64(6.0), "summed.", "layer-is-one-neuron")],
        )
    assert caught.value.feedback == "For x: summed." and caught.value.misconceptions == (
        "layer-is-one-neuron",
    )


def test_reject_float32_names_only_float32_rounding():
    expected = 29.681240365
    reject_float32(expected, expected, "For x")
    reject_float32(expected * 2, expected, "For x")
    feedback = wrong_feedback(lambda: reject_float32(float(np.float32(expected)), expected, "For x"))
    assert feedback.startswith("For x you returned 29.6812") and "float32" in feedback


def test_describe_quotes_strings_so_empty_and_numeric_text_show():
    assert describe("") == "the string ''" and describe("1.5") == "the string '1.5'"
    assert describe("x" * 100) == f"the string {'x' * 60!r}..."


@pytest.mark.parametrize("value", [3e302, float(2**63), float("inf"), float("nan")])
def test_as_int_refuses_floats_beyond_the_exact_integers(value):
    assert "should be an integer" in wrong_feedback(lambda: as_int(value, "the count"))
    assert as_int(float(2**62), "the count") == 2**62


@pytest.mark.parametrize("seed", range(20))
def test_distinct_sizes_differ_pairwise_and_stay_in_range(seed):
    sizes = distinct_sizes(np.random.default_rng(seed), 5, low=2, high=9)
    assert len(sizes) == len(set(sizes)) == 5 and all(2 <= size < 9 for size in sizes)


# ------------------------------------------------------------------------- reference validation


@pytest.mark.parametrize("value", [True, 0, -3, 2.0, "4", None])
def test_positive_int_refuses_with_the_argument_name(value):
    with pytest.raises(ValueError, match="d_out must be a positive integer"):
        positive_int(value, "d_out")


def test_validators_accept_clean_values():
    assert positive_int(np.int64(73), "n") == 73 and whole_number(0, "size", minimum=0) == 0
    assert positive_number(np.float32(0.5), "seconds") == 0.5
    assert float_array([[1, 2]], "W", (2,)).dtype == np.float64


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: whole_number(-1, "input_shape[0]", minimum=0),
            r"input_shape\[0\] must be a non-negative int",
        ),
        (lambda: positive_number(float("inf"), "seconds"), "seconds must be a finite positive number"),
        (lambda: positive_number(True, "seconds"), "seconds must be a positive number"),
        (lambda: float_array(np.ones(3), "W", (2,)), "W must be 2-D"),
        (lambda: float_array([1.0, float("nan")], "b"), "b contains NaN"),
        (lambda: float_array([[1.0], [1.0, 2.0]], "X"), "X must be an array of real numbers"),
    ],
)
def test_validators_name_what_was_wrong(call, message):
    with pytest.raises(ValueError, match=message):
        call()
