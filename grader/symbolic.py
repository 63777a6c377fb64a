"""Reading symbolic answers safely: text -> sympy, without `eval` and with bounded cost.

Students type formulas as Python-like text, e.g. ``"d_out*(d_in + 1)"`` or ``"G.T*X"``.
The text is parsed with `ast` and only a small whitelist is turned into sympy objects:

- names: the declared symbols (and matrix symbols), plus `sqrt`, `log`, `exp` as calls;
- integer and decimal constants up to `MAX_CONSTANT` in size;
- unary ``+``/``-``; binary ``+ - * / **``; ``@`` (and ``*``) between matrices;
- parentheses, and the attribute ``.T`` (transpose) after a matrix.

Everything else (other calls or attributes, indexing, strings, lambdas, comprehensions,
comparisons...) raises `SymbolicError` naming what is not allowed and its column. Length,
node count, nesting, exponents, polynomial degree and the size of every intermediate number
are bounded, so hostile text such as ``9**9**9`` is rejected in microseconds, and every later
step (comparison by exact evaluation at random rational points) stays cheap.

Matrix answers are compared by evaluating both sides on random integer matrices whose sizes
are distinct primes (`EXAMPLE_SIZES`), so a transposed or swapped product cannot agree by
accident. A matrix symbol named ``ones`` always stands for a column of ones.
"""

from __future__ import annotations

import ast
import difflib
import math
import random
from dataclasses import dataclass

import numpy as np
import sympy

MAX_LENGTH = 500
MAX_NODES = 200
MAX_AST_DEPTH = 40
MAX_BRACKET_DEPTH = 20
MAX_CONSTANT = 10**12
MAX_EXPONENT = 16
MAX_DEGREE = 64
MAX_NUMBER_BITS = 320
MAX_CALL_NESTING = 1

FUNCTIONS = {"sqrt": sympy.sqrt, "log": sympy.log, "exp": sympy.exp}
EXAMPLE_SIZES = {"B": 7, "d_in": 3, "d_out": 5}
SPARE_PRIMES = (11, 13, 17, 19, 23, 29, 31, 37)
FILLED_MATRICES = {"ones": 1.0}

_UNICODE_HINTS = {
    "\u00d7": "write * for multiplication",
    "\u00b7": "write * for multiplication",
    "\u22c5": "write * for multiplication",
    "\u2212": "write - (the ASCII minus) for subtraction",
    "\u2013": "write - (the ASCII minus) for subtraction",
    "\u00f7": "write / for division",
    "\u00b2": "write **2 for a square",
    "\u00b3": "write **3 for a cube",
    "\u1d40": "write .T for a transpose",
    "\u22a4": "write .T for a transpose",
    "\u2211": "sums are written with a column of ones or as products",
}

_NODE_NAMES = {
    ast.Lambda: "a lambda",
    ast.JoinedStr: "an f-string",
    ast.FormattedValue: "an f-string",
    ast.Subscript: "indexing with [...]",
    ast.Compare: "a comparison",
    ast.BoolOp: "and/or",
    ast.IfExp: "an if-expression",
    ast.NamedExpr: "an assignment (:=)",
    ast.Tuple: "a tuple (a comma)",
    ast.List: "a list",
    ast.Dict: "a dict",
    ast.Set: "a set",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator",
    ast.Starred: "a starred expression",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.Slice: "a slice",
}

_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.MatMult: "@"}
_OPERATOR_HINTS = {
    ast.BitXor: "^ is not a power in Python; write ** (e.g. d**2)",
    ast.FloorDiv: "// is integer division; write / instead",
    ast.Mod: "% (remainder) is not allowed",
}


class SymbolicError(ValueError):
    """The answer text cannot be read as a formula; `message` says what and where."""

    def __init__(self, message: str, column: int | None = None, unknown_name: str | None = None):
        self.message, self.column, self.unknown_name = message, column, unknown_name
        super().__init__(message)


class ShapeMismatch(SymbolicError):
    """A matrix expression multiplies or adds matrices whose sizes do not fit."""


@dataclass
class _Value:
    expr: object
    shape: tuple | None = None
    degree: int = 0
    calls: int = 0

    @property
    def is_matrix(self) -> bool:
        return self.shape is not None


def _symbol_names(declared: dict) -> str:
    return ", ".join(sorted(declared)) or "none"


def _check_text(text) -> tuple[str, int]:
    """The stripped text and its offset, or SymbolicError for anything that is not plain short text."""
    if text is None:
        raise SymbolicError("the answer is None; write the formula as a string, e.g. \"2*d + 1\"")
    if type(text) is not str:
        raise SymbolicError(f"the answer should be a string, but is of type {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise SymbolicError(
            f"the answer is {len(text)} characters long; formulas here need far fewer than {MAX_LENGTH}"
        )
    stripped = text.strip()
    if not stripped:
        raise SymbolicError("the answer is empty; write the formula as a string, e.g. \"2*d + 1\"")
    offset = len(text) - len(text.lstrip())
    for index, character in enumerate(text):
        if not (" " <= character <= "~"):
            hint = _UNICODE_HINTS.get(character, "use plain ASCII letters, digits and + - * / ** ( ) only")
            shown = repr(character) if character.isprintable() else f"U+{ord(character):04X}"
            raise SymbolicError(
                f"the character {shown} at column {index + 1} is not allowed: {hint}", index + 1
            )
    depth = 0
    for index, character in enumerate(text):
        depth += character in "([{"
        depth -= character in ")]}"
        if depth > MAX_BRACKET_DEPTH:
            raise SymbolicError(
                f"brackets are nested more than {MAX_BRACKET_DEPTH} deep at column {index + 1}", index + 1
            )
    return stripped, offset


def _parse_tree(text: str) -> tuple[ast.expr, str, int]:
    stripped, offset = _check_text(text)
    try:
        tree = ast.parse(stripped, mode="eval")
    except SyntaxError as error:
        column = (error.offset or 1) + offset
        reason = (error.msg or "invalid syntax").split(" (")[0]
        raise SymbolicError(f"the formula is not valid syntax at column {column}: {reason}", column) from None
    except (ValueError, MemoryError, RecursionError, OverflowError):
        raise SymbolicError("the formula could not be read") from None
    nodes, stack = 0, [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise SymbolicError(f"the formula has more than {MAX_NODES} parts; write it more simply")
        if depth > MAX_AST_DEPTH:
            raise SymbolicError(
                f"the formula is nested more than {MAX_AST_DEPTH} levels deep; write it more simply"
            )
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree.body, stripped, offset


class _Converter:
    """Turns a whitelisted AST into sympy, tracking shape, degree and size as it goes."""

    def __init__(self, text: str, offset: int, symbols: dict, matrices: dict):
        self.text, self.offset = text, offset
        self.symbols, self.matrices = symbols, matrices

    def column(self, node) -> int:
        return getattr(node, "col_offset", 0) + self.offset + 1

    def fail(self, node, message: str, error=SymbolicError):
        column = self.column(node)
        raise error(f"{message} (at column {column})", column)

    def source(self, node) -> str:
        segment = ast.get_source_segment(self.text, node) or "?"
        return segment if len(segment) <= 40 else segment[:37] + "..."

    def convert(self, node) -> _Value:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            what = _NODE_NAMES.get(type(node), f"this kind of expression ({type(node).__name__})")
            self.fail(node, f"{what} is not allowed in a formula")
        return self.finish(node, method(node))

    def finish(self, node, value: _Value) -> _Value:
        expr = value.expr
        if expr.has(sympy.zoo, sympy.nan, sympy.oo, -sympy.oo):
            self.fail(node, f"{self.source(node)} divides by zero")
        if expr.has(sympy.I):
            self.fail(node, f"{self.source(node)} is not a real number")
        if (
            isinstance(expr, sympy.Rational)
            and max(expr.p.bit_length(), expr.q.bit_length()) > MAX_NUMBER_BITS
        ):
            self.too_many_digits(node, abs(expr.p) >= expr.q)
        if value.degree > MAX_DEGREE:
            self.fail(node, f"{self.source(node)} has degree above {MAX_DEGREE}; no answer here needs that")
        return value

    def too_many_digits(self, node, large: bool):
        self.fail(
            node,
            f"{self.source(node)} is a number too {'large' if large else 'small'} to be part of this formula",
        )

    def visit_Constant(self, node) -> _Value:
        value = node.value
        if type(value) is int:
            if abs(value) > MAX_CONSTANT:
                self.fail(node, f"the constant {self.source(node)} is larger than {MAX_CONSTANT:.0e}")
            return _Value(sympy.Integer(value))
        if type(value) is float:
            if not math.isfinite(value) or abs(value) > MAX_CONSTANT:
                self.fail(node, f"the constant {self.source(node)} is outside the allowed range")
            return _Value(sympy.Rational(repr(value)))
        what = {str: "text in quotes", bytes: "bytes", bool: "True/False", complex: "a complex number"}
        self.fail(node, f"{what.get(type(value), 'this constant')} is not allowed in a formula")

    def visit_Name(self, node) -> _Value:
        name = node.id
        if name in self.matrices:
            symbol = self.matrices[name]
            return _Value(symbol, tuple(symbol.shape))
        if name in self.symbols:
            return _Value(self.symbols[name], degree=1)
        if name in FUNCTIONS:
            self.fail(node, f"{name} is a function; call it like {name}(d)")
        known = sorted(self.symbols) + sorted(self.matrices)
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        column = self.column(node)
        raise SymbolicError(
            f"unknown name {name!r}: the names you can use are {_symbol_names(known)}{hint} "
            f"(at column {column})",
            column,
            unknown_name=name,
        )

    def visit_Attribute(self, node) -> _Value:
        if node.attr != "T" or not self.matrices:
            allowed = (
                "only .T (transpose) may follow a matrix"
                if self.matrices
                else "a formula for a number has no attributes"
            )
            if "ones" in self.matrices and node.attr in ("sum", "mean"):
                allowed += "; to sum over rows, multiply by the column `ones`"
            self.fail(node, f"the attribute .{node.attr} is not allowed: {allowed}")
        base = self.convert(node.value)
        if not base.is_matrix:
            self.fail(node, f".T transposes a matrix, but {self.source(node.value)} is a number")
        return _Value(base.expr.T, (base.shape[1], base.shape[0]))

    def visit_Call(self, node) -> _Value:
        name = node.func.id if type(node.func) is ast.Name else None
        if type(node.func) is ast.Attribute:
            self.visit_Attribute(node.func)
        if name not in FUNCTIONS:
            called = self.source(node.func)
            self.fail(
                node, f"calling {called}(...) is not allowed; the only functions are {', '.join(FUNCTIONS)}"
            )
        if node.keywords or len(node.args) != 1 or type(node.args[0]) is ast.Starred:
            self.fail(node, f"{name} takes exactly one argument, e.g. {name}(d)")
        argument = self.convert(node.args[0])
        if argument.is_matrix:
            self.fail(node, f"{name} applies to numbers, not to the matrix {self.source(node.args[0])}")
        if argument.calls >= MAX_CALL_NESTING:
            self.fail(node, "functions may not be nested inside each other here")
        return _Value(FUNCTIONS[name](argument.expr), degree=1, calls=argument.calls + 1)

    def visit_UnaryOp(self, node) -> _Value:
        operand = self.convert(node.operand)
        if type(node.op) is ast.USub:
            return _Value(-operand.expr, operand.shape, operand.degree, operand.calls)
        if type(node.op) is ast.UAdd:
            return operand
        self.fail(node, f"the operator {'not' if type(node.op) is ast.Not else '~'} is not allowed")

    def operator_column(self, node) -> int:
        start = node.left.end_col_offset or 0
        end = node.right.col_offset
        between = self.text[start:end]
        for index, character in enumerate(between):
            if character in "+-*/@^%<>&|":
                return start + index + self.offset + 1
        return self.column(node)

    def visit_BinOp(self, node) -> _Value:
        kind = type(node.op)
        if kind not in _OPERATORS:
            hint = _OPERATOR_HINTS.get(kind, "only + - * / ** and @ are allowed")
            column = self.operator_column(node)
            raise SymbolicError(f"{hint} (at column {column})", column)
        left, right = self.convert(node.left), self.convert(node.right)
        calls = max(left.calls, right.calls)
        if kind is ast.Pow:
            return self.power(node, left, right)
        if left.is_matrix or right.is_matrix:
            return self.matrix_operation(node, kind, left, right)
        if kind is ast.MatMult:
            self.fail(node, "@ multiplies matrices; use * for numbers")
        if kind in (ast.Add, ast.Sub):
            expr = left.expr + right.expr if kind is ast.Add else left.expr - right.expr
            return _Value(expr, degree=max(left.degree, right.degree), calls=calls)
        if kind is ast.Mult:
            return _Value(left.expr * right.expr, degree=left.degree + right.degree, calls=calls)
        if right.expr == 0:
            self.fail(node, f"{self.source(node)} divides by zero")
        return _Value(left.expr / right.expr, degree=left.degree + right.degree, calls=calls)

    def power(self, node, base: _Value, exponent: _Value) -> _Value:
        if base.is_matrix or exponent.is_matrix:
            self.fail(node, "powers of matrices are not allowed; write the products out")
        if not isinstance(exponent.expr, sympy.Rational):
            self.fail(
                node.right, f"exponents must be plain numbers such as 2 or 1/2, not {self.source(node.right)}"
            )
        power = exponent.expr
        if abs(power) > MAX_EXPONENT or power.q > MAX_EXPONENT:
            self.fail(
                node.right,
                f"the exponent {self.source(node.right)} is too large; "
                f"exponents are limited to {MAX_EXPONENT}",
            )
        if isinstance(base.expr, sympy.Rational):
            bits = max(base.expr.p.bit_length(), base.expr.q.bit_length())
            if abs(power) * bits > MAX_NUMBER_BITS:
                self.too_many_digits(node, (abs(base.expr.p) >= base.expr.q) == (power > 0))
        if base.expr == 0 and power < 0:
            self.fail(node, f"{self.source(node)} divides by zero")
        degree = base.degree * math.ceil(abs(power))
        return _Value(base.expr**power, degree=degree, calls=base.calls)

    def matrix_operation(self, node, kind, left: _Value, right: _Value) -> _Value:
        if kind in (ast.Add, ast.Sub):
            if not (left.is_matrix and right.is_matrix):
                self.fail(node, f"cannot add a number and a matrix in {self.source(node)}")
            if tuple(left.shape) != tuple(right.shape):
                column = self.operator_column(node)
                raise ShapeMismatch(
                    f"your expression adds {self.source(node.left)} ({format_shape(left.shape)}) and "
                    f"{self.source(node.right)} ({format_shape(right.shape)}): the shapes differ"
                    f"{_concrete_pair(left.shape, right.shape, 'and')} (at column {column})",
                    column,
                )
            expr = left.expr + right.expr if kind is ast.Add else left.expr - right.expr
            return _Value(expr, left.shape)
        if kind is ast.Div:
            if right.is_matrix:
                self.fail(node, f"cannot divide by the matrix {self.source(node.right)}")
            if right.expr == 0:
                self.fail(node, f"{self.source(node)} divides by zero")
            return _Value(sympy.MatMul(1 / right.expr, left.expr).doit(), left.shape)
        if not (left.is_matrix and right.is_matrix):
            matrix, scalar = (left, right) if left.is_matrix else (right, left)
            return _Value(sympy.MatMul(scalar.expr, matrix.expr).doit(), matrix.shape)
        if left.shape[1] != right.shape[0]:
            column = self.operator_column(node)
            raise ShapeMismatch(
                f"your expression multiplies {self.source(node.left)} ({format_shape(left.shape)}) by "
                f"{self.source(node.right)} ({format_shape(right.shape)}): inner sizes {left.shape[1]} and "
                f"{right.shape[0]} do not match{_concrete_pair(left.shape, right.shape, 'times')} (at "
                f"column {column})",
                column,
            )
        return _Value(sympy.MatMul(left.expr, right.expr).doit(), (left.shape[0], right.shape[1]))


def format_shape(shape) -> str:
    """'d_out x d_in' for a symbolic or concrete (rows, cols)."""
    return " x ".join(str(size) for size in shape)


def _concrete_pair(left, right, word: str) -> str:
    sizes = concrete_sizes(set(left) | set(right))
    if all(isinstance(size, sympy.Integer) for size in (*left, *right)):
        return ""
    named = ", ".join(
        f"{symbol}={value}" for symbol, value in sorted(sizes.items(), key=lambda item: str(item[0]))
    )

    def concrete(shape):
        return "x".join(str(int(sympy.sympify(size).xreplace(sizes))) for size in shape)

    return f" (with {named} that is {concrete(left)} {word} {concrete(right)})"


def _read(text, symbols: dict | None, matrices: dict | None) -> _Value:
    tree, stripped, offset = _parse_tree(text)
    converter = _Converter(stripped, offset, symbols or {}, matrices or {})
    try:
        return converter.convert(tree)
    except SymbolicError:
        raise
    except (RecursionError, MemoryError, OverflowError, ValueError, TypeError, ArithmeticError) as error:
        raise SymbolicError(f"the formula could not be evaluated ({type(error).__name__})") from None


def parse_scalar(text, symbols: dict[str, sympy.Symbol]) -> sympy.Expr:
    """Read a scalar formula such as "d_out*(d_in + 1)" over the declared `symbols`.

    Inputs:
    - text: the student's answer (anything; only a short ASCII str can succeed).
    - symbols: name -> sympy.Symbol that the formula may use.
    Returns a sympy expression; raises SymbolicError with a message for the student.
    """
    value = _read(text, symbols, None)
    if value.is_matrix:
        raise SymbolicError("expected a formula for a number, not a matrix")
    return value.expr


def parse_matrix(
    text, matrices: dict[str, sympy.MatrixSymbol], symbols: dict[str, sympy.Symbol] | None = None
) -> sympy.MatrixExpr:
    """Read a matrix expression such as "G.T*X" over the declared matrix symbols.

    Inputs:
    - text: the student's answer.
    - matrices: name -> sympy.MatrixSymbol with its (rows, cols) shape; `*` and `@` are
      matrix products, `.T` transposes.
    - symbols: optional name -> sympy.Symbol usable as scalar factors (e.g. the batch size B).
    Returns a sympy matrix expression; raises ShapeMismatch when sizes do not fit, or
    SymbolicError for anything else.
    """
    value = _read(text, symbols, matrices)
    if not value.is_matrix:
        raise SymbolicError("expected a matrix expression, but this is a number")
    return value.expr


# Comparing answers.


def concrete_sizes(sizes) -> dict:
    """Map each symbolic size to a distinct prime: EXAMPLE_SIZES by name, spare primes otherwise."""
    result, spare = {}, iter(SPARE_PRIMES)
    for size in sorted((s for s in sizes if isinstance(s, sympy.Symbol)), key=str):
        result[size] = EXAMPLE_SIZES.get(str(size)) or next(spare)
    return result


def matrix_shape(expr, sizes: dict | None = None) -> tuple[int, int]:
    """The concrete (rows, cols) of a matrix expression under `sizes` (default: concrete_sizes)."""
    sizes = sizes or concrete_sizes(expr.free_symbols | set(expr.shape))
    return tuple(int(sympy.sympify(size).xreplace(sizes)) for size in expr.shape)


def evaluate_matrix(expr, values: dict, scalars: dict) -> np.ndarray:
    """Evaluate a matrix expression numerically (float64).

    Inputs:
    - expr: a sympy matrix expression built from MatrixSymbols, products, sums and transposes.
    - values: MatrixSymbol -> ndarray of its concrete shape.
    - scalars: Symbol -> number for sizes and scalar symbols.
    Returns an ndarray of the expression's concrete shape.
    """
    if isinstance(expr, sympy.MatrixSymbol):
        return values[expr]
    if isinstance(expr, sympy.Transpose):
        return evaluate_matrix(expr.arg, values, scalars).T
    if isinstance(expr, sympy.MatAdd):
        return sum(evaluate_matrix(arg, values, scalars) for arg in expr.args)
    if isinstance(expr, sympy.MatMul):
        coefficient, product = 1.0, None
        for arg in expr.args:
            if getattr(arg, "is_Matrix", False):
                matrix = evaluate_matrix(arg, values, scalars)
                product = matrix if product is None else product @ matrix
            else:
                coefficient *= _scalar_value(arg, scalars)
        return coefficient * product
    if isinstance(expr, (sympy.ZeroMatrix, sympy.Identity, sympy.OneMatrix)):
        shape = tuple(int(sympy.sympify(size).xreplace(scalars)) for size in expr.shape)
        if isinstance(expr, sympy.Identity):
            return np.eye(shape[0])
        return np.full(shape, 0.0 if isinstance(expr, sympy.ZeroMatrix) else 1.0)
    raise SymbolicError(f"the expression contains {type(expr).__name__}, which cannot be evaluated here")


def _scalar_value(expr, scalars: dict) -> float:
    value = real_value(sympy.sympify(expr).xreplace(scalars))
    if value is None:
        raise SymbolicError("a scalar factor is not a finite real number")
    return value


def matrix_equivalent(a, b, sizes: dict | None = None, trials: int = 3, seed: int = 0) -> bool:
    """Whether two matrix expressions have the same shape and agree on random integer matrices.

    Sizes default to distinct primes (`concrete_sizes`); matrices named in FILLED_MATRICES are
    filled with their constant (``ones`` is a column of ones), every other one with random
    integers in [-9, 9]. Scalar symbols other than sizes take random positive values.
    """
    symbols = a.free_symbols | b.free_symbols
    sizes = dict(
        sizes
        or concrete_sizes(
            {s for m in symbols if isinstance(m, sympy.MatrixSymbol) for s in m.shape}
            | {s for s in symbols if isinstance(s, sympy.Symbol)}
        )
    )
    if matrix_shape(a, sizes) != matrix_shape(b, sizes):
        return False
    generator = np.random.default_rng(seed)
    matrices = sorted((m for m in symbols if isinstance(m, sympy.MatrixSymbol)), key=str)
    free_scalars = sorted((s for s in symbols if isinstance(s, sympy.Symbol) and s not in sizes), key=str)
    for _ in range(trials):
        values = {}
        for matrix in matrices:
            shape = matrix_shape(matrix, sizes)
            fill = FILLED_MATRICES.get(matrix.name)
            values[matrix] = (
                np.full(shape, fill)
                if fill is not None
                else generator.integers(-9, 10, size=shape).astype(np.float64)
            )
        scalars = dict(sizes)
        scalars.update(
            {
                s: sympy.Rational(int(generator.integers(1, 1000)), int(generator.integers(1, 50)))
                for s in free_scalars
            }
        )
        try:
            with np.errstate(all="ignore"):
                left, right = evaluate_matrix(a, values, scalars), evaluate_matrix(b, values, scalars)
        except SymbolicError:
            return False
        if (
            np.shape(left) != np.shape(right)
            or not (np.all(np.isfinite(left)) and np.all(np.isfinite(right)))
            or not np.allclose(left, right, rtol=1e-9, atol=1e-9)
        ):
            return False
    return True


def evaluate_scalar(expr, point: dict):
    """The value of a scalar expression at `point` (Symbol -> number): exact when rational."""
    value = sympy.sympify(expr).xreplace({symbol: sympy.Rational(number) for symbol, number in point.items()})
    return value if isinstance(value, sympy.Rational) else sympy.N(value, 30)


def _random_point(symbols, generator: random.Random) -> dict:
    return {
        symbol: sympy.Rational(generator.randint(1, 5000), generator.randint(1, 100)) for symbol in symbols
    }


def real_value(value) -> float | None:
    """A finite real float from a sympy number, or None (complex, infinite, overflowing)."""
    try:
        number = complex(sympy.N(value, 30))
    except (TypeError, ValueError, OverflowError):
        return None
    if number.imag != 0 or not math.isfinite(number.real):
        return None
    return number.real


def scalar_equivalent(a, b, trials: int = 8, seed: int = 0) -> bool:
    """Whether two scalar expressions are equal, judged at random positive rational points.

    Rational expressions are compared exactly at each point (for polynomials and ratios of
    them this is a proof with overwhelming probability); others to 25 significant digits.
    Points where either side is undefined are skipped; at least 3 valid points are needed.
    """
    a, b = sympy.sympify(a), sympy.sympify(b)
    if getattr(a, "is_Matrix", False) or getattr(b, "is_Matrix", False):
        return False
    symbols = sorted(a.free_symbols | b.free_symbols, key=str)
    generator = random.Random(seed)
    agreed = 0
    for _ in range(trials * 2):
        point = _random_point(symbols, generator)
        left, right = a.xreplace(point), b.xreplace(point)
        if isinstance(left, sympy.Rational) and isinstance(right, sympy.Rational):
            if left != right:
                return False
            agreed += 1
        else:
            left, right = real_value(left), real_value(right)
            if left is None or right is None:
                continue
            if abs(left - right) > 1e-10 * max(abs(left), abs(right)):
                return False
            agreed += 1
        if agreed >= trials:
            return True
    return agreed >= 3
