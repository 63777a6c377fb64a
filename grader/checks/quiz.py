"""The misconception quiz: ten true/false statements, one per misconception of the chapter.

Students answer with a dict `quiz = {1: True, 2: False, ...}`. Some statements state a
misconception (answer False) and some state the corrected fact (answer True), so that marking
everything False or everything True does not pass.
"""

from __future__ import annotations

from grader.checks.base import WrongAnswer, check
from grader.checks.common import reject_unanswered
from grader.checks.values import describe
from grader.misconceptions import SEED_MISCONCEPTIONS, describe as misconception

# (statement, truth, misconception code it probes)
QUIZ: dict[int, tuple[str, bool, str]] = {
    1: (
        "A dense layer with 4 inputs and 6 outputs is one neuron that reads 4 inputs.",
        False,
        "layer-is-one-neuron",
    ),
    2: (
        "After training, a useful hidden layer can spread one pattern across many units, so single units "
        "need not have a human-readable meaning.",
        True,
        "hidden-unit-is-concept",
    ),
    3: (
        "Training with batches of 64 instead of 32 doubles the number of weights in each dense layer.",
        False,
        "batch-changes-weights",
    ),
    4: (
        "In torch.nn.Linear(3, 5), the weight has 5 rows, one per output unit, and 3 columns, one per input "
        "feature.",
        True,
        "weight-rows-are-inputs",
    ),
    5: ("A dense layer from 10 inputs to 4 outputs has 10 biases, one per input.", False, "bias-per-input"),
    6: ("Making a hidden layer wider always improves a model's test accuracy.", False, "wider-always-better"),
    7: (
        "Two linear layers applied one after the other, with no activation between them, compute an affine "
        "function of the input.",
        True,
        "stacked-affine-is-nonlinear",
    ),
    8: (
        "Training Linear(784, 256) with Adam in float32 needs only the 200,960 parameters' worth of memory, "
        "about 0.8 MB.",
        False,
        "params-determine-memory",
    ),
    9: (
        "If a weight matrix is split by output rows across 4 GPUs, the GPUs never need to exchange any "
        "values.",
        False,
        "split-needs-no-communication",
    ),
    10: (
        "A convolutional layer reuses the same small filter at every position, so it has far fewer weights "
        "than a dense layer over the same input.",
        True,
        "all-layers-dense",
    ),
}

assert tuple(code for _, _, code in QUIZ.values()) == SEED_MISCONCEPTIONS


def read_quiz(answer) -> dict[int, bool]:
    """The student's marks as {statement: bool}; WrongAnswer names the first problem with the data."""
    if type(answer) is not dict:
        raise WrongAnswer(
            f"`quiz` should be a dict like {{1: True, 2: False, ...}}, but is {describe(answer)}."
        )
    bad_keys = [key for key in answer if type(key) is not int]
    if bad_keys:
        key = bad_keys[0]
        hint = f" (write {key.strip()} without quotes)" if type(key) is str and key.strip().isdigit() else ""
        raise WrongAnswer(
            f"The keys of `quiz` should be the statement numbers 1 to {len(QUIZ)} as integers; "
            f"found the key {key!r}{hint}."
        )
    missing = sorted(set(QUIZ) - set(answer))
    extra = sorted(set(answer) - set(QUIZ))
    if missing:
        raise WrongAnswer(
            f"`quiz` has no answer for statement{'s' if len(missing) > 1 else ''} "
            f"{', '.join(map(str, missing))}; mark every statement 1 to {len(QUIZ)} True or False."
        )
    if extra:
        shown = ", ".join(map(str, extra[:5])) + (", ..." if len(extra) > 5 else "")
        raise WrongAnswer(
            f"`quiz` has keys that are not statement numbers: {shown}. Use only 1 to {len(QUIZ)}."
        )
    for number in sorted(answer):
        mark = answer[number]
        if type(mark) is bool:
            continue
        if type(mark) is str and mark.strip().lower() in ("true", "false"):
            raise WrongAnswer(
                f"Statement {number} is marked with the string {mark!r}; use the boolean "
                f"{mark.strip().capitalize()} without quotes."
            )
        if type(mark) is int and mark in (0, 1):
            raise WrongAnswer(f"Statement {number} is marked {mark}; use True or False, not 1 or 0.")
        raise WrongAnswer(f"Statement {number} should be marked True or False, but is {describe(mark)}.")
    return answer


@check("05_matmul_benchmark", "misconception_quiz")
def check_quiz(answer, ctx):
    """Score "right minus wrong": (correct - wrong) / 10 of the points, never below 0.

    Guessing then earns nothing on average, and a constant answer little (all False: (6 - 4) / 10);
    each wrong mark is explained in one sentence and reported with its misconception code.
    """
    reject_unanswered(
        answer, "quiz", ctx, "Set it to a dict like {1: True, 2: False, ...} with one entry per statement."
    )
    marks = read_quiz(answer)
    wrong = [number for number, (_, truth, _) in QUIZ.items() if marks[number] is not truth]
    if not wrong:
        return ctx.passed(f"All {len(QUIZ)} statements marked correctly.")
    correct = len(QUIZ) - len(wrong)
    fraction = max(0.0, (correct - len(wrong)) / len(QUIZ))
    lines = [
        f"{correct} of {len(QUIZ)} marked correctly; the quiz scores right minus wrong answers: "
        f"({correct} - {len(wrong)}) / {len(QUIZ)} of the points, never below zero."
    ]
    lines += [
        f"Statement {number} is {QUIZ[number][1]}: {misconception(QUIZ[number][2])}" for number in wrong
    ]
    return ctx.partial(fraction, "\n".join(lines), *(QUIZ[number][2] for number in wrong))
