"""Checks for the symbolic parts: formulas typed as text and compared with sympy.

`SYMBOLIC_PARTS` states, for every symbolic part, the symbols (and matrix symbols with their
shapes) an answer may use, the accepted answers and the recognised wrong models, so that
notebooks and documentation can quote the same declarations the grader uses. Each assignment's
checks module declares its own parts with `symbolic_part(key, SymbolicPart(...))`.

A scalar answer is correct when it is equivalent to the expected formula (any algebraic
form); a matrix answer when it has the expected shape and agrees on random matrices. Wrong
answers are compared with known wrong models (missing bias, transposed gradient, ...) to
name the misconception. sympy is imported only when an answer is graded: it adds 0.35 s
(measured) to every process that imports grader.checks.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from grader.checks.base import WrongAnswer, check
from grader.checks.common import reject_unanswered
from grader.checks.values import as_text

MAX_ANSWER_LENGTH = 500  # the same bound as grader.symbolic.MAX_LENGTH


@dataclass(frozen=True)
class KnownAnswer:
    """Answers equivalent to any of `forms` get `fraction` of the marks, `feedback` and `codes`."""

    forms: tuple[str, ...]
    feedback: str
    codes: tuple[str, ...] = ()
    fraction: float = 0.0


@dataclass(frozen=True)
class SymbolicPart:
    """One symbolic part: what the answer may use and how it is judged.

    symbols: scalar name -> meaning. matrices: name -> (rows, cols, meaning), sizes written
    with the scalar symbols. answers: accepted forms, the first being the model answer.
    known: recognised wrong (or alternative) answers. example: a point (symbol -> number)
    at which feedback evaluates a wrong scalar answer. hint: what to reconsider when a wrong
    answer matches no known model. off_limits: names that are not symbols of this part but
    that a student may reach for, with (feedback, codes).
    """

    variable: str
    question: str
    symbols: dict[str, str]
    answers: tuple[str, ...]
    known: tuple[KnownAnswer, ...] = ()
    matrices: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    example: dict[str, int] = field(default_factory=dict)
    hint: str = ""
    on_correct: str = "Correct."
    limit_of: str | None = None
    off_limits: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    @property
    def is_matrix(self) -> bool:
        return bool(self.matrices)

    def declaration(self) -> str:
        """A sentence stating the names an answer may use (for notebooks and feedback)."""
        scalars = ", ".join(f"{name} ({meaning})" for name, meaning in self.symbols.items())
        if not self.is_matrix:
            return f"Use only the symbols {scalars}, with + - * / ** and parentheses."
        matrices = ", ".join(
            f"{name} ({rows} x {cols}, {meaning})" for name, (rows, cols, meaning) in self.matrices.items()
        )
        return (
            f"Use the matrices {matrices}; the sizes {', '.join(self.symbols)} may appear as numbers. "
            "Write matrix products with * or @ and transposes with .T."
        )


SYMBOLIC_PARTS: dict[str, SymbolicPart] = {}  # filled by symbolic_part() in each assignment's checks module


@functools.lru_cache(maxsize=None)
def _declared(key: str):
    """The sympy symbols, matrix symbols and parsed reference answers of one part (cached)."""
    import sympy  # sympy on first use (module docstring)
    from grader import symbolic

    spec = SYMBOLIC_PARTS[key]
    symbols = {name: sympy.Symbol(name, positive=True, integer=spec.is_matrix) for name in spec.symbols}

    def size(text):
        return sympy.Integer(int(text)) if text.isdigit() else symbols[text]

    matrices = {
        name: sympy.MatrixSymbol(name, size(rows), size(cols))
        for name, (rows, cols, _) in spec.matrices.items()
    }

    def parse(text):
        if spec.is_matrix:
            return symbolic.parse_matrix(text, matrices, symbols)
        return symbolic.parse_scalar(text, symbols)

    answers = tuple(parse(text) for text in spec.answers)
    known = tuple((model, tuple(parse(text) for text in model.forms)) for model in spec.known)
    return symbols, matrices, answers, known, parse


def _read_answer(key: str, answer, ctx):
    """The parsed answer, or WrongAnswer with what was wrong and what may be used."""
    from grader import symbolic  # sympy on first use (module docstring)

    spec = SYMBOLIC_PARTS[key]
    reject_unanswered(
        answer, spec.variable, ctx, f"Set it to a string holding the formula. {spec.declaration()}"
    )
    try:
        text = as_text(answer, f"`{spec.variable}`", max_length=MAX_ANSWER_LENGTH)
    except WrongAnswer as wrong:
        raise WrongAnswer(
            f"{wrong.feedback} Write the formula as text in quotes. {spec.declaration()}"
        ) from None
    parse = _declared(key)[-1]
    try:
        expr = parse(text)
    except symbolic.ShapeMismatch as error:
        named = set(re.findall(r"[A-Za-z_]\w*", text)) & set(spec.matrices)
        codes = ("grad-wrong-operand",) if _uses_other_matrices(key, named) else ()
        raise WrongAnswer(f"In `{spec.variable}`, {error.message}. {spec.hint}", *codes) from None
    except symbolic.SymbolicError as error:
        if error.unknown_name in spec.off_limits:
            feedback, codes = spec.off_limits[error.unknown_name]
            raise WrongAnswer(feedback, *codes) from None
        raise WrongAnswer(
            f"`{spec.variable}` could not be read: {error.message}. {spec.declaration()}"
        ) from None
    return text, expr


def _known_match(key: str, expr, equivalent):
    _, _, _, known, _ = _declared(key)
    for model, forms in known:
        if any(equivalent(expr, form) for form in forms):
            return model
    return None


def _number(value) -> str:
    """A short rendering of a value from `symbolic.evaluate_scalar`."""
    import sympy  # sympy on first use (module docstring)
    from grader import symbolic

    if isinstance(value, sympy.Integer):
        return f"it gives {int(value)}" if abs(value) < 10**15 else f"it gives about {float(value):.4g}"
    if isinstance(value, sympy.Rational):
        return f"it gives {float(value):.6g}"
    number = symbolic.real_value(value)
    return "it is not a finite real number" if number is None else f"it gives {number:.6g}"


@functools.lru_cache(maxsize=None)
def _limit(key: str):
    """The limit of the model answer as `limit_of` grows without bound."""
    import sympy  # sympy on first use (module docstring)

    symbols, _, answers, _, _ = _declared(key)
    return sympy.limit(answers[0], symbols[SYMBOLIC_PARTS[key].limit_of], sympy.oo)


def grade_scalar(key: str, answer, ctx):
    """Judge a scalar formula: equivalent to the expected one, a known wrong model, or wrong."""
    from grader import symbolic  # sympy on first use (module docstring)

    spec = SYMBOLIC_PARTS[key]
    text, expr = _read_answer(key, answer, ctx)
    symbols, _, answers, _, _ = _declared(key)
    if any(symbolic.scalar_equivalent(expr, expected) for expected in answers):
        if spec.limit_of:
            return ctx.passed(spec.on_correct.format(limit=_limit(key)))
        return ctx.passed(spec.on_correct)
    model = _known_match(key, expr, symbolic.scalar_equivalent)
    if model is not None:
        if model.fraction >= 1:
            return ctx.passed(model.feedback)
        raise WrongAnswer(model.feedback, *model.codes, fraction=model.fraction)
    point = {symbols[name]: value for name, value in spec.example.items()}
    at = ", ".join(f"{name}={value}" for name, value in spec.example.items())
    value = _number(symbolic.evaluate_scalar(expr, point))
    raise WrongAnswer(
        f"`{spec.variable}` = {text!r} is not equivalent to the expected formula: at {at} {value}. "
        f"{spec.hint}"
    )


def _matrix_names(expr) -> set[str]:
    import sympy  # sympy on first use (module docstring)

    return {symbol.name for symbol in expr.free_symbols if isinstance(symbol, sympy.MatrixSymbol)}


def _uses_other_matrices(key: str, used: set[str]) -> bool:
    """Whether an answer built from the matrices `used` differs in them from the model answers.

    Matrices of ones are left aside.
    """
    answers = _declared(key)[2]
    return used - {"ones"} != set().union(*map(_matrix_names, answers)) - {"ones"}


def grade_matrix(key: str, answer, ctx):
    """Judge a matrix expression by shape first, then by value on random matrices."""
    from grader import symbolic  # sympy on first use (module docstring)

    spec = SYMBOLIC_PARTS[key]
    text, expr = _read_answer(key, answer, ctx)
    _, _, answers, _, _ = _declared(key)
    if any(symbolic.matrix_equivalent(expr, expected) for expected in answers):
        return ctx.passed(spec.on_correct)
    model = _known_match(key, expr, symbolic.matrix_equivalent)
    if model is not None:
        raise WrongAnswer(model.feedback, *model.codes, fraction=model.fraction)
    expected = answers[0]
    shape = symbolic.format_shape(expr.shape)
    wanted = symbolic.format_shape(expected.shape)
    accepted_shapes = {tuple(a.shape) for a in answers}
    if tuple(expr.shape) not in accepted_shapes and tuple(expr.shape) == tuple(expected.T.shape):
        if symbolic.matrix_equivalent(expr, expected.T):
            detail = "is exactly the transpose of the gradient"
        else:
            detail = "has the transposed shape"
        raise WrongAnswer(
            f"`{spec.variable}` = {text!r} {detail}: its shape is {shape}, but the gradient must "
            f"have the shape of what it differentiates, {wanted}. {spec.hint}",
            "grad-transposed",
        )
    if tuple(expr.shape) in accepted_shapes:
        used = _matrix_names(expr)
        if _uses_other_matrices(key, used):
            raise WrongAnswer(
                f"`{spec.variable}` = {text!r} has the right shape, {shape}, but is built from "
                f"{', '.join(sorted(used)) or 'no matrices'}. {spec.hint}",
                "grad-wrong-operand",
            )
        raise WrongAnswer(
            f"`{spec.variable}` = {text!r} has the right shape and uses the right matrices, but its "
            "values differ from the gradient on random inputs: check signs, transposes and factors."
        )
    raise WrongAnswer(
        f"`{spec.variable}` = {text!r} has shape {shape}; the gradient must have shape {wanted}. {spec.hint}"
    )


def symbolic_part(key: str, spec: SymbolicPart) -> SymbolicPart:
    """Declare the symbolic part `key` ("assignment.part") and register its check; returns `spec`.

    An assignment's grader/checks/<module>.py calls this for each of its symbolic parts.
    """
    if key in SYMBOLIC_PARTS:
        raise ValueError(f"two declarations of the symbolic part {key}")
    SYMBOLIC_PARTS[key] = spec
    _register(key)
    return spec


def _register(key: str):
    assignment, part = key.split(".")
    grade = grade_matrix if SYMBOLIC_PARTS[key].is_matrix else grade_scalar

    def check_part(answer, ctx):
        return grade(key, answer, ctx)

    check_part.__name__ = f"check_{part}"
    check_part.__doc__ = f"Check {key}: {SYMBOLIC_PARTS[key].question}."
    check(assignment, part)(check_part)
