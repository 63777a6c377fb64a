"""The hidden-test helper that nbgrader's own autograde runs inside the notebook."""

from __future__ import annotations

import sys

import numpy as np

from grader.inline import assert_part, part_result


def split_without_refusal(W, b, n):
    """Right split of output rows; more ranks than rows are not refused (half marks)."""
    print("LEAK", np.shape(W), n)
    print("LEAK", file=sys.stderr)
    return [(W_i.copy(), b_i.copy()) for W_i, b_i in zip(np.array_split(W, n), np.array_split(b, n))]


def test_half_right_answer_gets_half_marks_and_its_prints_are_dropped(capsys):
    result = part_result("04_tensor_parallel.split_output_rows", split_without_refusal)
    assert (result.score, result.max_score) == (1.0, 2.0), result.feedback
    out, err = capsys.readouterr()
    assert "LEAK" not in out and err == ""


def test_assert_part_prints_one_line_and_nothing_on_stderr_outside_ipython(capsys):
    assert_part("04_tensor_parallel.split_output_rows", split_without_refusal)
    out, err = capsys.readouterr()
    assert out.startswith("split_output_rows: 1/2 (partial) ") and out.count("\n") == 1
    assert "LEAK" not in out and err == ""


def test_unreadable_value_scores_zero_without_raising(capsys):
    result = part_result("01_shapes.z2_by_hand", object())
    assert result.score == 0 and result.feedback
    assert capsys.readouterr().err == ""
