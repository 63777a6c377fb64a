"""The misconception quiz.

Right-minus-wrong scoring, one explained code per wrong mark, strict answer format.
"""

from __future__ import annotations

import numpy as np
import pytest

from grader.checks.quiz import QUIZ
from grader.misconceptions import SEED_MISCONCEPTIONS, describe
from grader.result import Status
from grader.student import local_value

A, PART = "05_matmul_benchmark", "misconception_quiz"
TRUTH = {number: truth for number, (_, truth, _) in QUIZ.items()}


def grade_quiz(grade, answer):
    return grade(A, PART, local_value(answer))


def test_all_correct_gets_full_marks(grade):
    result = grade_quiz(grade, TRUTH)
    assert result.status == Status.PASSED and result.score == result.max_score == 3
    assert result.misconceptions == ()


def test_numpy_booleans_count_as_booleans(grade):
    answer = {number: np.bool_(truth) for number, truth in TRUTH.items()}
    assert grade_quiz(grade, answer).score == 3


@pytest.mark.parametrize("wrong", [[4], [9], [1, 10], [2, 3, 5], list(range(1, 11))])
def test_each_wrong_mark_is_explained_with_its_code(grade, wrong):
    answer = {number: (not truth if number in wrong else truth) for number, truth in TRUTH.items()}
    result = grade_quiz(grade, answer)
    correct = 10 - len(wrong)
    assert result.score == pytest.approx(3 * max(0, correct - len(wrong)) / 10)
    assert result.misconceptions == tuple(QUIZ[number][2] for number in sorted(wrong))
    for number in wrong:
        assert f"Statement {number} is {TRUTH[number]}: {describe(QUIZ[number][2])}" in result.feedback
    assert result.feedback.count("\n") == len(wrong)


def test_every_misconception_of_the_chapter_is_probed():
    assert sorted(code for _, _, code in QUIZ.values()) == sorted(SEED_MISCONCEPTIONS)
    assert {True, False} == set(TRUTH.values())


@pytest.mark.parametrize("constant", [True, False])
def test_a_constant_answer_earns_little(grade, constant):
    result = grade_quiz(grade, {number: constant for number in QUIZ})
    assert result.score <= 0.6


@pytest.mark.parametrize(
    "answer, text",
    [
        (None, "not answered yet"),
        ([True] * 10, "should be a dict"),
        ("TFTFFFTFFT", "should be a dict"),
        ({str(number): truth for number, truth in TRUTH.items()}, "without quotes"),
        ({float(number): truth for number, truth in TRUTH.items()}, "as integers"),
        ({number: truth for number, truth in TRUTH.items() if number != 7}, "statement 7"),
        ({number: truth for number, truth in TRUTH.items() if number > 2}, "statements 1, 2"),
        ({**TRUTH, 11: True}, "not statement numbers: 11"),
        ({**TRUTH, 0: False}, "not statement numbers: 0"),
        ({**TRUTH, 3: "True"}, "the string 'True'"),
        ({**TRUTH, 3: "false "}, "boolean False"),
        ({**TRUTH, 5: 1}, "not 1 or 0"),
        ({**TRUTH, 5: None}, "statement 5 should be marked true or false"),
        ({**TRUTH, 6: [False]}, "statement 6"),
        ({number: truth for number, truth in enumerate(range(5000))}, "not statement numbers"),
    ],
)
def test_malformed_answers_score_zero_with_a_reason(grade, answer, text):
    result = grade_quiz(grade, answer)
    assert result.score == 0 and result.status == Status.FAILED
    assert text.lower() in result.feedback.lower(), result.feedback


def test_an_unanswered_quiz_is_not_implemented(grade):
    assert grade_quiz(grade, None).misconceptions == ("not-implemented",)


def test_hostile_values_score_zero(grade, hostile_value):
    _, make = hostile_value
    result = grade_quiz(grade, make())
    assert result.score == 0 and "internal error" not in result.feedback and result.feedback.strip()
