"""The symbolic-part checks: any equivalent form passes, named misconceptions are caught."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

from grader import symbolic
from grader.checks import formulas, run_check
from grader.checks.formulas import SYMBOLIC_PARTS
from grader.course import load_course
from grader.grading import grade_part
from grader.result import Status
from grader.student import local_value

from conftest import assert_zero as assert_clear_zero
from conftest import hostile_formulas, make_ctx

COURSE = load_course()


def grade(key: str, answer, seed: int = 0):
    """Grade `answer` (a Python value, passed through the codec as in real grading)."""
    return run_check(make_ctx(*key.split("."), seed=seed), local_value(answer))


def assert_full(result):
    assert result.status == Status.PASSED and result.score == result.max_score, result
    assert result.feedback.strip()


def assert_zero(result, *codes):
    """A clear zero that is a failure, never an error: symbolic answers are only ever parsed."""
    assert_clear_zero(result, *codes)
    assert result.status == Status.FAILED, result


def test_every_symbolic_part_of_the_course_is_described():
    symbolic_parts = {
        f"{a.id}.{p.id}": p for a in COURSE.assignments for p in a.parts if p.kind == "symbolic"
    }
    assert set(symbolic_parts) == set(SYMBOLIC_PARTS)
    for key, spec in SYMBOLIC_PARTS.items():
        assert spec.variable == symbolic_parts[key].name
        declaration = spec.declaration()
        for name in list(spec.symbols) + list(spec.matrices):
            assert name in declaration


@pytest.mark.parametrize("key", sorted(SYMBOLIC_PARTS))
def test_model_answers_get_full_marks(key):
    for text in SYMBOLIC_PARTS[key].answers:
        assert_full(grade(key, text))


EQUIVALENT_FORMS = {
    "02_parameters.params_formula": [
        "d_in*d_out + d_out",
        "(d_in+1)*d_out",
        "d_out + d_in*d_out",
        "d_out*(d_in + 1.0)",
        "(d_in*d_out**2 + d_out**2)/d_out",
    ],
    "02_parameters.doubling_ratio": [
        "(4*d**2 + 2*d)/(d**2 + d)",
        "((2*d)**2 + 2*d)/(d**2 + d)",
        "(4*d + 2)/(d + 1)",
        "4 - 2/(d + 1)",
    ],
    "03_gradients.grad_W_expr": ["G.T@X", "(X.T*G).T", "(X.T@G).T", "2*G.T*X/2", "G.T*X*B/B"],
    "03_gradients.grad_X_expr": ["G@W", "(W.T*G.T).T", "G*W + 0*G*W"],
    "03_gradients.grad_b_expr": ["G.T@ones", "(ones.T*G).T", "ones.T@G", "G.T*ones*(ones.T*ones)/B"],
    "04_tensor_parallel.all_reduce_volume": [
        "2*B*d_out*(p - 1)/p",
        "2*B*d_out - 2*B*d_out/p",
        "2*(1 - 1/p)*B*d_out",
    ],
    "05_matmul_benchmark.flops_formula": [
        "B*d_in*d_out*2",
        "2*(B*d_in)*d_out",
        "d_out*d_in*B + B*d_in*d_out",
    ],
}


@pytest.mark.parametrize(
    "key, text", [(key, text) for key, forms in EQUIVALENT_FORMS.items() for text in forms]
)
def test_equivalent_forms_get_full_marks(key, text):
    assert_full(grade(key, text))


def test_equivalent_forms_cover_every_part():
    assert set(EQUIVALENT_FORMS) == set(SYMBOLIC_PARTS)


def test_doubling_ratio_feedback_mentions_the_limit():
    result = grade("02_parameters.doubling_ratio", "2*(2*d+1)/(d+1)")
    assert_full(result)
    assert "4" in result.feedback and "grows" in result.feedback


MISCONCEPTIONS = [
    ("02_parameters.params_formula", "d_in*d_out", ["missing-bias"], 0.0),
    ("02_parameters.params_formula", "d_out*d_in", ["missing-bias"], 0.0),
    ("02_parameters.params_formula", "d_in*(d_out+1)", ["bias-per-input"], 0.0),
    ("02_parameters.params_formula", "d_out*d_in + d_in", ["bias-per-input"], 0.0),
    ("02_parameters.params_formula", "B*d_out*(d_in + 1)", ["batch-changes-weights"], 0.0),
    ("02_parameters.doubling_ratio", "2", ["width-doubling-doubles-params"], 0.0),
    ("02_parameters.doubling_ratio", "4/2", ["width-doubling-doubles-params"], 0.0),
    ("03_gradients.grad_W_expr", "X.T*G", ["grad-transposed"], 0.0),
    ("03_gradients.grad_W_expr", "X.T@G", ["grad-transposed"], 0.0),
    ("03_gradients.grad_W_expr", "G.T*W", ["grad-wrong-operand"], 0.0),
    ("03_gradients.grad_W_expr", "W*G", ["grad-wrong-operand"], 0.0),
    ("03_gradients.grad_W_expr", "W", ["grad-wrong-operand"], 0.0),
    ("03_gradients.grad_X_expr", "W.T*G.T", ["grad-transposed"], 0.0),
    ("03_gradients.grad_X_expr", "X*W", ["grad-wrong-operand"], 0.0),
    ("03_gradients.grad_X_expr", "X", ["grad-wrong-operand"], 0.0),
    ("03_gradients.grad_X_expr", "G*W*X.T*X/B", ["grad-wrong-operand"], 0.0),
    ("03_gradients.grad_b_expr", "G", ["bias-grad-not-summed"], 0.0),
    ("03_gradients.grad_b_expr", "G.T", ["bias-grad-not-summed"], 0.0),
    ("03_gradients.grad_b_expr", "G.T*ones/B", ["bias-grad-not-summed"], 0.0),
    ("03_gradients.grad_b_expr", "X.T*ones", [], 0.0),
    ("04_tensor_parallel.all_reduce_volume", "0", ["split-needs-no-communication"], 0.0),
    ("04_tensor_parallel.all_reduce_volume", "0*p*B", ["split-needs-no-communication"], 0.0),
    ("05_matmul_benchmark.flops_formula", "B*d_in*d_out", ["flops-missing-factor-2"], 0.0),
]


@pytest.mark.parametrize("key, text, codes, fraction", MISCONCEPTIONS)
def test_named_misconceptions_are_caught(key, text, codes, fraction):
    result = grade(key, text)
    assert_zero(result, *codes)


def test_every_known_wrong_model_is_recognised():
    for key, spec in SYMBOLIC_PARTS.items():
        for model in spec.known:
            for form in model.forms:
                result = grade(key, form)
                assert result.score == pytest.approx(model.fraction * result.max_score), (key, form, result)
                assert set(model.codes) <= set(result.misconceptions), (key, form, result)
                assert model.feedback == result.feedback


def test_limit_four_gets_half_marks_and_asks_for_the_exact_ratio():
    for text in ("4", "(2*d)**2/d**2", "4.0"):
        result = grade("02_parameters.doubling_ratio", text)
        assert result.status == Status.PARTIAL and result.score == pytest.approx(0.5 * result.max_score)
        assert "exact" in result.feedback and "large d" in result.feedback


def test_all_reduce_without_factor_two_explains_both_phases():
    result = grade("04_tensor_parallel.all_reduce_volume", "(p-1)/p*B*d_out")
    assert_zero(result)
    assert "reduce-scatter" in result.feedback and "all-gather" in result.feedback


def test_transposed_gradient_feedback_names_the_shapes():
    result = grade("03_gradients.grad_W_expr", "X.T*G")
    assert "d_in x d_out" in result.feedback and "d_out x d_in" in result.feedback
    assert "transpose" in result.feedback


def test_wrong_operand_feedback_names_the_mismatch():
    result = grade("03_gradients.grad_W_expr", "G.T*W")
    assert "G.T (d_out x B)" in result.feedback and "W (d_out x d_in)" in result.feedback
    assert "5x7 times 5x3" in result.feedback


@pytest.mark.parametrize(
    "key, text",
    [
        ("03_gradients.grad_W_expr", "X*G"),
        ("03_gradients.grad_W_expr", "G*X"),
        ("03_gradients.grad_X_expr", "G*W.T"),
        ("03_gradients.grad_b_expr", "ones*G"),
        ("03_gradients.grad_b_expr", "G*ones"),
    ],
)
def test_right_matrices_in_a_shape_mismatch_are_not_called_the_wrong_operand(key, text):
    result = grade(key, text)
    assert_zero(result)
    assert result.misconceptions == () and "do not match" in result.feedback, result


def test_mean_bias_gradient_has_its_own_feedback():
    summed, mean = grade("03_gradients.grad_b_expr", "G"), grade("03_gradients.grad_b_expr", "G.T*ones/B")
    assert summed.feedback != mean.feedback and "1/B" in mean.feedback


def test_unrecognised_wrong_answers_get_a_concrete_value():
    result = grade("02_parameters.params_formula", "d_in + d_out")
    assert_zero(result)
    assert "d_in=4, d_out=6" in result.feedback and "10" in result.feedback
    result = grade("03_gradients.grad_W_expr", "-G.T*X")
    assert_zero(result)
    assert "right shape" in result.feedback


def test_unanswered_part_is_reported_as_not_implemented():
    result = grade("03_gradients.grad_W_expr", None)
    assert_zero(result, "not-implemented")
    assert "dL_dW" in result.feedback


HOSTILE_ANSWERS = {
    **hostile_formulas("d_in"),
    "unicode": "d_in\u00d7d_out",
    "empty": "",
    "int": 12,
    "float": 2.0,
    "list": ["d_in", "d_out"],
    "dict": {"answer": "d_in"},
    "bytes-like list": [1, 2, 3],
    "sympy expression": sympy.Symbol("d_in") * sympy.Symbol("d_out"),
    "sympy matrix": sympy.Matrix([[1, 2]]),
    "ndarray": np.array([1.0, 2.0]),
    "generator": (i for i in range(3)),
    "object": object(),
    "function": len,
}


@pytest.mark.parametrize("key", sorted(SYMBOLIC_PARTS))
@pytest.mark.parametrize("label", sorted(HOSTILE_ANSWERS))
def test_hostile_answers_score_zero_with_a_reason(key, label):
    answer = HOSTILE_ANSWERS[label]
    if label == "generator":
        answer = (i for i in range(3))
    result = grade(key, answer)  # what refusing it costs: benchmarks/rejection_cost.py
    assert_zero(result)
    assert len(result.feedback) > 20


def test_grading_through_course_and_codec():
    assignment = COURSE.assignment("03_gradients")
    result = grade_part(
        assignment, assignment.part("grad_W_expr"), local_value("G.T*X"), "student-1", "secret"
    )
    assert_full(result)
    result = grade_part(
        assignment, assignment.part("grad_W_expr"), local_value(sympy.Symbol("G")), "s", "secret"
    )
    assert_zero(result)
    assert "string" in result.feedback


def test_answer_length_limit_matches_the_parser():
    assert formulas.MAX_ANSWER_LENGTH == symbolic.MAX_LENGTH
