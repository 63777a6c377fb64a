"""What every function check does: call the student, compare with the reference, name the mistake.

- `call_student` calls a student function once and turns a raised error, a mutated input or an
  input returned as-is into a clear zero (`WrongAnswer`); `CallWording` lets a part word those
  three cases its own way, or let them through.
- `same`, `compare_array` and `first_difference` compare an answer with the reference in float64;
  `reject_float32` names a number that is right only to float32 precision.
- A wrong model is a tuple `(value, feedback, *codes)`: the value a known wrong formula gives on
  the same inputs, the feedback that explains it and its misconception codes. `known_mistake`
  finds the first one an answer matches; `reject_known_mistakes` raises it.
- `expect_counts` grades exact integer answers over many cases, naming the slip that explains them.
- `distinct_sizes` and `call_text` build inputs and the text that shows a call in feedback.
- `reject_unanswered` gives value and symbolic parts still holding the released None one wording.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from grader.checks.base import WrongAnswer
from grader.checks.values import as_array, as_int, close
from grader.result import Status
from grader.student import StudentRaised


def show_args(names, args) -> str:
    """A short description of call arguments: arrays by shape, everything else by value."""
    parts = []
    for name, arg in zip(names, args):
        if type(arg) is np.ndarray:
            parts.append(f"{name} of shape {arg.shape}")
        else:
            parts.append(f"{name}={arg!r}")
    return ", ".join(parts)


def call_text(name: str, args: tuple) -> str:
    """A call as it would be typed, e.g. "layer_parameters(4, 6, True)"."""
    return f"{name}({', '.join(map(repr, args))})"


@dataclass(frozen=True)
class CallWording:
    """How feedback words the three ways a call of student code can go wrong.

    Each is a str.format template, or None to let that case through: `raised=None` lets the
    error reach `run_check` (status error), `returned_input=None` accepts an input returned
    as-is. Fields: {function} (the student function's name), {call} (`show_args` of all
    arguments), {arrays} (`show_args` of the array arguments only), {reason} (the error),
    {inputs} (the mutated arguments' names), {input} (the returned argument's name).
    """

    raised: str | None = "Calling `{function}` with {call} failed: {reason}"
    mutated: str | None = (
        "`{function}` modified its input {inputs} in place (called with {call}). "
        "Compute a new array and leave the inputs unchanged."
    )
    returned_input: str | None = (
        "`{function}` returned its input {input} itself (called with {call}). Return a newly computed result."
    )


def call_student(answer, args: tuple, names: tuple[str, ...], wording: CallWording = CallWording()):
    """Call a student function once and return its decoded result.

    Inputs:
    - answer: a StudentFunction.
    - args: the arguments, as data (arrays, numbers, CallableSpec...).
    - names: one label per argument, used in feedback.
    - wording: how to word (or let through) errors, mutated inputs and returned inputs.

    NotImplementedError and timeouts always propagate so that `run_check` reports them its standard way.
    """

    def label(index: int) -> str:
        return names[index] if 0 <= index < len(names) else f"argument {index + 1}"

    def feedback(template: str, **fields) -> str:
        arrays = [(name, arg) for name, arg in zip(names, args) if type(arg) is np.ndarray]
        return template.format(
            function=answer.name,
            call=show_args(names, args),
            arrays=show_args(*zip(*arrays)) if arrays else "no arrays",
            **fields,
        )

    try:
        value = answer(*args)
    except StudentRaised as raised:
        if raised.not_implemented or wording.raised is None:
            raise
        raise WrongAnswer(feedback(wording.raised, reason=raised.reason), status=Status.ERROR) from None
    if answer.last_mutated and wording.mutated is not None:
        changed = ", ".join(label(i) for i in answer.last_mutated)
        raise WrongAnswer(feedback(wording.mutated, inputs=changed))
    if answer.last_returned_input and wording.returned_input is not None:
        raise WrongAnswer(feedback(wording.returned_input, input=label(answer.last_returned_input[0])))
    return value


def same(got, expected) -> bool:
    """Whether `got` equals `expected` within float64 tolerance.

    Either may be an array, a number, None, or a list of those.
    """
    if expected is None or got is None:
        return got is None and expected is None
    if isinstance(expected, list):
        return isinstance(got, list) and len(got) == len(expected) and all(map(same, got, expected))
    if isinstance(expected, np.ndarray):
        return isinstance(got, np.ndarray) and close(got, expected)
    return type(got) is float and math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-12)


def reject_float32(got: float, expected: float, setting: str) -> None:
    """Raise WrongAnswer when the number `got` misses `expected` only by float32 rounding.

    Such a number prints like the right one, so the feedback ("<setting> you returned ...") says what
    differs instead of showing two equal-looking numbers.
    """
    if not same(got, expected) and math.isclose(got, expected, rel_tol=1e-5):
        raise WrongAnswer(
            f"{setting} you returned {got!r}, right to only about 7 significant digits, as if computed "
            "in float32. Keep the computation in float64 (Python floats and NumPy's default dtype; "
            "torch tensors are float32 unless told otherwise)."
        )


def known_mistake(got, expected, models) -> tuple[str, tuple[str, ...]] | None:
    """(feedback, codes) of the first model that `got` matches and `expected` does not.

    Each model is (value, feedback, *codes).

    A model whose value is None does not apply to these inputs and is skipped.
    """
    for value, feedback, *codes in models:
        if value is not None and same(got, value) and not same(expected, value):
            return feedback, tuple(codes)
    return None


def reject_known_mistakes(got, expected, models, context: str = "") -> None:
    """Raise WrongAnswer (feedback prefixed by "`context`: ") for the first wrong model `got` matches."""
    match = known_mistake(got, expected, models)
    if match is not None:
        feedback, codes = match
        raise WrongAnswer(f"{context}: {feedback}" if context else feedback, *codes)


def first_differing_index(
    got: np.ndarray, expected: np.ndarray, rtol: float = 1e-7, atol: float = 1e-9
) -> tuple[int, ...] | None:
    """The first index (row-major) where two same-shaped arrays differ beyond tolerance; None if nowhere."""
    wrong = np.argwhere(~np.isclose(got, expected, rtol=rtol, atol=atol))
    return tuple(int(i) for i in wrong[0]) if wrong.size else None


def first_difference(got: np.ndarray, expected: np.ndarray, rtol: float = 1e-7, atol: float = 1e-9) -> str:
    """Where two same-shaped arrays first differ, for feedback: one entry, not the whole answer."""
    index = first_differing_index(got, expected, rtol, atol)
    if index is None:
        return ""
    where = index[0] if len(index) == 1 else index
    return (
        f"first difference at index {where}: you returned {got[index]:.10g}, expected {expected[index]:.10g}"
    )


def compare_array(got, expected: np.ndarray, what: str, context: str, models=()) -> None:
    """Raise WrongAnswer unless `got` reads as an array equal to `expected` (float64 tolerance).

    Inputs:
    - got: the student's decoded value (a number is read as a 0-d array).
    - expected: the reference array, any shape S.
    - what: the value's name in feedback ("the output", "W"...).
    - context: the inputs it was computed from, prefixed to every feedback.
    - models: wrong models (array, feedback, *codes), tried before the generic feedback.
    """
    if type(got) in (int, float):
        got = np.array(float(got))
    try:
        got = as_array(got, what)
    except WrongAnswer as wrong:
        raise WrongAnswer(f"{context}: {wrong.feedback}", *wrong.misconceptions) from None
    if got.shape == expected.shape and close(got, expected):
        return
    models = [(np.asarray(value, dtype=np.float64), feedback, *codes) for value, feedback, *codes in models]
    reject_known_mistakes(got, expected, models, context)
    if got.shape != expected.shape:
        raise WrongAnswer(f"{context}: {what} has shape {got.shape}; expected shape {expected.shape}.")
    if close(got, expected, rtol=1e-4, atol=1e-5):
        raise WrongAnswer(
            f"{context}: {what} agrees only to about float32 precision "
            f"({first_difference(got, expected)}). Keep the computation in float64."
        )
    raise WrongAnswer(
        f"{context}: {what} has the right shape but wrong values; {first_difference(got, expected)}."
    )


def expect_counts(answer, cases: list[tuple], names: tuple[str, ...], reference, models_for) -> None:
    """Call the student on every case and compare exact integer answers with `reference(*args)`.

    `models_for(*args)` gives the known slips for one case as {key: (value, feedback, *codes)}. A
    slip that explains every case (the answer being right where the slip does not apply) is preferred
    to one that only matches the first failing case, so formulas that coincide on one input are told apart.
    """
    answers = []
    for args in cases:
        call = call_text(answer.name, args)
        answers.append((call, args, as_int(call_student(answer, args, names), call)))
    failing = [(call, args, got) for call, args, got in answers if got != reference(*args)]
    if not failing:
        return
    call, args, got = failing[0]
    models = models_for(*args)
    explains_all = [
        key
        for key, (value, *_) in models.items()
        if got == value
        and all(
            other == reference(*a) or other == models_for(*a).get(key, (None,))[0] for _, a, other in answers
        )
    ]
    explains_this = [key for key, (value, *_) in models.items() if got == value]
    if explains_all or explains_this:
        _, feedback, *codes = models[(explains_all + explains_this)[0]]
        raise WrongAnswer(f"{call} returned {got}: {feedback}", *codes)
    raise WrongAnswer(f"{call} returned {got}, which is not the right count.")


def distinct_sizes(rng: np.random.Generator, count: int, low: int = 2, high: int = 97) -> list[int]:
    """`count` pairwise different sizes in [low, high), 7 and 73 likely among them, so that swapped axes
    always show up as wrong shapes."""
    pool = [size for size in (7, 73) if low <= size < high] + list(rng.integers(low, high, size=3 * count))
    sizes: list[int] = []
    for size in list(rng.permutation(pool)) + list(range(low, high)):
        if int(size) not in sizes:
            sizes.append(int(size))
    return sizes[:count]


def reject_unanswered(answer, variable: str, ctx, how: str = "Set it to your answer.") -> None:
    """A value part still holding the released `None`: a clear 'not answered yet' zero.

    `how` ends the feedback, saying what kind of value `variable` should be set to.
    """
    if answer is None:
        task = f"Task {ctx.task}" if ctx.task else "This task"
        raise WrongAnswer(f"{task} is not answered yet: `{variable}` is still None. {how}", "not-implemented")
