"""Checks for the symbolic parts: formulas typed as text and compared with sympy.

`SYMBOLIC_PARTS` states, for every symbolic part, the symbols (and matrix symbols with their
shapes) an answer may use, the accepted answers and the recognised wrong models, so that
notebooks and documentation can quote the same declarations the grader uses.

A scalar answer is correct when it is equivalent to the expected formula (any algebraic
form); a matrix answer when it has the expected shape and agrees on random matrices. Wrong
answers are compared with known wrong models (missing bias, transposed gradient, ...) to
name the misconception. sympy is imported only when an answer is graded.
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


_LAYER_MATRICES = {
    "X": ("B", "d_in", "the input batch"),
    "W": ("d_out", "d_in", "the weights"),
    "G": ("B", "d_out", "dL/dZ, the gradient arriving at the output Z = X W^T + b"),
    "ones": ("B", "1", "a column of ones"),
}
_LAYER_SIZES = {"B": "batch size", "d_in": "input features", "d_out": "output units"}

_NOT_SUMMED = (
    "Your dL/db keeps one row per observation. The same bias b is added to every row of Z, "
    "so each row's gradient contributes to it: dL/db adds G up over the batch and has one entry "
    "per output unit. A column of ones (B x 1) does that sum as a matrix product."
)
_MEAN = (
    "Your dL/db averages G over the batch (it divides by B). The bias is added to every row, so the "
    "rows' gradients add up: drop the 1/B. (If the loss itself is a mean, that 1/B is already inside G.)"
)


def _layer_gradient(
    of: str, answers: tuple[str, ...], hint: str, on_correct: str, known: tuple[KnownAnswer, ...] = ()
) -> SymbolicPart:
    """The symbolic part asking for dL/d`of` of the dense layer Z = X W^T + b, as a matrix expression."""
    return SymbolicPart(
        variable=f"dL_d{of}",
        question=f"dL/d{of} for Z = X W^T + b, as a matrix expression",
        symbols=_LAYER_SIZES,
        matrices=_LAYER_MATRICES,
        answers=answers,
        known=known,
        hint=hint,
        on_correct=on_correct,
    )


SYMBOLIC_PARTS: dict[str, SymbolicPart] = {
    "02_parameters.params_formula": SymbolicPart(
        variable="params_formula",
        question="the number of parameters of one dense layer from d_in inputs to d_out outputs, biases included",
        symbols={"d_in": "input features", "d_out": "output units"},
        answers=("d_out*(d_in + 1)",),
        known=(
            KnownAnswer(
                ("d_in*d_out",),
                "Your formula counts the weights only. Each output unit also has a bias, so add the biases.",
                ("missing-bias",),
            ),
            KnownAnswer(
                ("d_in*(d_out + 1)",),
                "Your formula gives the layer one bias per input. A dense layer "
                "has one bias per output unit (b has d_out entries).",
                ("bias-per-input",),
            ),
        ),
        example={"d_in": 4, "d_out": 6},
        hint="Count the entries of W (d_out x d_in) and of b, and add them.",
        on_correct="Correct: d_out*d_in weights plus one bias per output unit.",
        off_limits={
            "B": (
                "The batch size B does not appear: the same W and b are used for every row of "
                "the batch, so the parameter count does not depend on it.",
                ("batch-changes-weights",),
            )
        },
    ),
    "02_parameters.doubling_ratio": SymbolicPart(
        variable="doubling_ratio",
        question="P(2d)/P(d), where P(d) is the parameter count of a square d -> d dense layer with bias",
        symbols={"d": "the width of the square layer"},
        answers=("2*(2*d + 1)/(d + 1)",),
        known=(
            KnownAnswer(
                ("4",),
                "4 is where the ratio goes for large d, not the ratio itself. Write P(d) with "
                "its biases and give the exact ratio P(2d)/P(d) as a formula in d.",
                fraction=0.5,
            ),
            KnownAnswer(
                ("2",),
                "Doubling the width does not just double the parameters: the weight matrix "
                "grows in both directions, d*d -> 2d*2d.",
                ("width-doubling-doubles-params",),
            ),
            KnownAnswer(
                ("(d + 1)/(2*(2*d + 1))",),
                "Your ratio is upside down: the question asks for "
                "P(2d)/P(d), the wider layer's count divided by the narrower one's.",
            ),
        ),
        example={"d": 3},
        hint="Write P(d) = d*d + d for a square layer, substitute 2d, and divide.",
        on_correct=(
            "Correct. As d grows the ratio tends to {limit}: the d*d weights grow fourfold while the "
            "d biases only double."
        ),
        limit_of="d",
    ),
    "03_gradients.grad_W_expr": _layer_gradient(
        "W",
        answers=("G.T*X",),
        hint=(
            "W multiplies X in the forward pass, so dL/dW is built from G and X; it must have W's shape, "
            "d_out x d_in."
        ),
        on_correct="Correct: dL/dW = G^T X has shape d_out x d_in, the shape of W.",
    ),
    "03_gradients.grad_X_expr": _layer_gradient(
        "X",
        answers=("G*W",),
        hint=(
            "X is multiplied by W^T in the forward pass, so dL/dX is built from G and W; it must have "
            "X's shape, B x d_in."
        ),
        on_correct="Correct: dL/dX = G W has shape B x d_in, the shape of X.",
    ),
    "03_gradients.grad_b_expr": _layer_gradient(
        "b",
        answers=("G.T*ones", "ones.T*G"),
        known=(
            KnownAnswer(("G", "G.T"), _NOT_SUMMED, ("bias-grad-not-summed",)),
            KnownAnswer(("G.T*ones/B", "ones.T*G/B"), _MEAN, ("bias-grad-not-summed",)),
        ),
        hint="b is added to every row of Z, so dL/db is built from G alone, with one entry per output unit.",
        on_correct="Correct: the bias gradient adds G up over the batch, one entry per output unit.",
    ),
    "04_tensor_parallel.all_reduce_volume": SymbolicPart(
        variable="all_reduce_volume",
        question="the number of elements each of p ranks sends in a ring all-reduce of a B x d_out activation",
        symbols={"p": "number of ranks", "B": "batch size", "d_out": "output units"},
        answers=("2*(p - 1)/p*B*d_out",),
        known=(
            KnownAnswer(
                ("0",),
                "The partial outputs of a split layer still have to be added up across the "
                "ranks, so every rank sends data.",
                ("split-needs-no-communication",),
            ),
            KnownAnswer(
                ("(p - 1)/p*B*d_out",),
                "That counts only one of the two phases. A ring all-reduce is "
                "a reduce-scatter (each rank ends up owning the full sum of one 1/p chunk) followed by an "
                "all-gather (the summed chunks travel round the ring so every rank has all of them). "
                "Each phase sends (p - 1) chunks per rank.",
            ),
            KnownAnswer(
                ("2*(p - 1)*B*d_out", "(p - 1)*B*d_out"),
                "Each ring step sends one chunk, a 1/p "
                "share of the B x d_out activation, not the whole activation.",
            ),
        ),
        example={"p": 4, "B": 8, "d_out": 16},
        hint="Split the activation into p chunks and count the chunks each rank sends in the reduce-scatter "
        "and in the all-gather.",
        on_correct="Correct: (p - 1) chunks of B*d_out/p elements in each of the two phases.",
    ),
    "05_matmul_benchmark.flops_formula": SymbolicPart(
        variable="flops_formula",
        question="the floating-point operations of the product X @ W.T for X of shape B x d_in and W of shape "
        "d_out x d_in",
        symbols={"B": "batch size", "d_in": "input features", "d_out": "output units"},
        answers=("2*B*d_in*d_out",),
        known=(
            KnownAnswer(
                ("B*d_in*d_out",),
                "That counts multiply-adds. Each multiply-add is two floating-point "
                "operations, a multiplication and an addition.",
                ("flops-missing-factor-2",),
            ),
            KnownAnswer(
                ("B*d_out*(2*d_in - 1)",),
                "Correct as an exact count (d_in products and d_in - 1 sums "
                "per output). The usual convention counts two operations per multiply-add, "
                "2*B*d_in*d_out.",
                fraction=1.0,
            ),
            KnownAnswer(
                ("2*B*d_in*d_out + B*d_out",),
                "That adds the bias additions; the question asks for the matrix product X @ W.T only.",
                fraction=0.5,
            ),
        ),
        example={"B": 2, "d_in": 3, "d_out": 4},
        hint="Each of the B*d_out outputs is a dot product of length d_in; count its multiplications and "
        "additions.",
        on_correct="Correct: B*d_out dot products of length d_in, two operations per multiply-add.",
    ),
}


@functools.lru_cache(maxsize=None)
def _declared(key: str):
    """The sympy symbols, matrix symbols and parsed reference answers of one part (cached)."""
    import sympy
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
    from grader import symbolic

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
    import sympy
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
    import sympy

    symbols, _, answers, _, _ = _declared(key)
    return sympy.limit(answers[0], symbols[SYMBOLIC_PARTS[key].limit_of], sympy.oo)


def grade_scalar(key: str, answer, ctx):
    """Judge a scalar formula: equivalent to the expected one, a known wrong model, or wrong."""
    from grader import symbolic

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
    import sympy

    return {symbol.name for symbol in expr.free_symbols if isinstance(symbol, sympy.MatrixSymbol)}


def _uses_other_matrices(key: str, used: set[str]) -> bool:
    """Whether an answer built from the matrices `used` differs in them from the model answers (ones aside)."""
    answers = _declared(key)[2]
    return used - {"ones"} != set().union(*map(_matrix_names, answers)) - {"ones"}


def grade_matrix(key: str, answer, ctx):
    """Judge a matrix expression by shape first, then by value on random matrices."""
    from grader import symbolic

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


def _register(key: str):
    assignment, part = key.split(".")
    grade = grade_matrix if SYMBOLIC_PARTS[key].is_matrix else grade_scalar

    def check_part(answer, ctx):
        return grade(key, answer, ctx)

    check_part.__name__ = f"check_{part}"
    check_part.__doc__ = f"Check {key}: {SYMBOLIC_PARTS[key].question}."
    check(assignment, part)(check_part)


for _key in SYMBOLIC_PARTS:
    _register(_key)
