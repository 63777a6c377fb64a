"""grader.symbolic: safe parsing of formulas, bounded cost, and equivalence by evaluation."""

from __future__ import annotations

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from grader import symbolic
from grader.symbolic import ShapeMismatch, SymbolicError, parse_matrix, parse_scalar

from conftest import hostile_formulas

d_in, d_out, d, x = (sympy.Symbol(name, positive=True) for name in ("d_in", "d_out", "d", "x"))
SCALARS = {"d_in": d_in, "d_out": d_out, "d": d, "x": x}
B_, IN_, OUT_ = (sympy.Symbol(name, positive=True, integer=True) for name in ("B", "d_in", "d_out"))
SIZES = {"B": B_, "d_in": IN_, "d_out": OUT_}
MATRICES = {
    "X": sympy.MatrixSymbol("X", B_, IN_),
    "W": sympy.MatrixSymbol("W", OUT_, IN_),
    "G": sympy.MatrixSymbol("G", B_, OUT_),
    "ones": sympy.MatrixSymbol("ones", B_, 1),
}


def scalar(text: str):
    return parse_scalar(text, SCALARS)


def matrix(text: str):
    return parse_matrix(text, MATRICES, SIZES)


def rejected(text, parse=scalar) -> SymbolicError:
    """The refusal of `text`, with its reason (what it costs: benchmarks/rejection_cost.py)."""
    with pytest.raises(SymbolicError) as error:
        parse(text)
    assert error.value.message.strip()
    return error.value


@pytest.mark.parametrize(
    "text",
    [
        "d_out*(d_in + 1)",
        "d_in*d_out + d_out",
        "(d_in+1)*d_out",
        "d_out + d_out*d_in",
        "  d_out*(1 + d_in)  ",
        "d_out*(d_in + 1.0)",
        "(d_in**2*d_out + d_in*d_out)/d_in",
        "sqrt(d_out**2)*(d_in + 1)",
        "d_out*(d_in + 1)  # weights and biases",
        "+d_out*(d_in - (-1))",
        "2*d_out*(d_in + 1)/2",
    ],
)
def test_equivalent_scalar_forms_are_accepted(text):
    assert symbolic.scalar_equivalent(scalar(text), scalar("d_out*(d_in + 1)"))


@pytest.mark.parametrize(
    "text",
    [
        "d_in*d_out",
        "d_in*(d_out + 1)",
        "d_out*(d_in + 1) + 1",
        "d_out*(d_in + 1.000001)",
        "(d_in + 1)*(d_out + 1)",
    ],
)
def test_different_scalar_forms_are_not_equivalent(text):
    assert not symbolic.scalar_equivalent(scalar(text), scalar("d_out*(d_in + 1)"))


def test_functions_compare_numerically():
    assert symbolic.scalar_equivalent(scalar("log(d**2)"), scalar("2*log(d)"))
    assert symbolic.scalar_equivalent(scalar("exp(2*d)"), scalar("exp(d)**2"))
    assert not symbolic.scalar_equivalent(scalar("log(d)"), scalar("log(d + 1)"))


@settings(max_examples=40, deadline=None)
@given(st.integers(-20, 20), st.integers(-20, 20), st.integers(1, 20), st.integers(1, 5))
def test_expanded_and_factored_polynomials_agree(a, b, c, shift):
    factored = scalar(f"({a}*d_in + {b})*({c}*d_out + 1)")
    expanded = scalar(f"{a * c}*d_in*d_out + {a}*d_in + {b * c}*d_out + {b}")
    assert symbolic.scalar_equivalent(factored, expanded)
    assert symbolic.scalar_equivalent(expanded, factored)
    shifted = scalar(f"{a * c}*d_in*d_out + {a}*d_in + {b * c}*d_out + {b + shift}")
    assert not symbolic.scalar_equivalent(factored, shifted)


HOSTILE_TEXTS = {
    **hostile_formulas("x"),
    "class walk": "().__class__.__bases__",
    "huge power of a number": "2**10**10",
    "nested exponents": "((x**16)**16)**16",
    "f-string with call": "f'{__import__(\"os\").system(\"echo hi\")}'",
    "attribute": "x.real",
    "dunder attribute": "x.__class__",
    "unknown name": "y + 1",
    "builtin call": "eval('1')",
    "open call": "open('/etc/passwd')",
    "subscript": "x[0]",
    "comprehension": "[x for x in d]",
    "walrus": "(y := 1)",
    "comparison": "x < 1",
    "string": "'x'",
    "bytes": "b'x'",
    "huge integer": "1" * 400,
    "keyword call": "sqrt(x=1)",
    "starred call": "sqrt(*[x])",
    "nested function": "exp(exp(x))",
    "division by zero": "x/(d - d)",
    "tuple": "x, d",
    "deep unary chain": "-" * 450 + "x",
    "long sum": "+".join(["x"] * 240),
    "complex": "2j*x",
    "statement": "import os",
    "semicolon": "x; 1",
    "newline": "x\n+1",
    "unicode letter": "\u0445 + 1",
    "full-width name": "\uff58 + 1",
}


@pytest.mark.parametrize("label", sorted(HOSTILE_TEXTS))
def test_hostile_text_is_rejected(label):
    rejected(HOSTILE_TEXTS[label])


@pytest.mark.parametrize("label", sorted(HOSTILE_TEXTS))
def test_hostile_text_is_rejected_as_a_matrix(label):
    rejected(HOSTILE_TEXTS[label], matrix)


def test_nothing_is_executed(tmp_path):
    marker = tmp_path / "ran"
    for text in (
        f"__import__('os').system('touch {marker}')",
        f"open('{marker}', 'w')",
        f"f'{{__import__(\"os\").system(\"touch {marker}\")}}'",
    ):
        rejected(text)
    assert not marker.exists()


@pytest.mark.parametrize("value", [None, 3, 2.5, b"x", ["x"], ("x",), {"x": 1}, sympy.Symbol("x"), object()])
def test_non_strings_are_rejected(value):
    error = rejected(value)
    assert "string" in error.message or "None" in error.message


@pytest.mark.parametrize("text", ["", "   ", "\t"])
def test_empty_answers_are_rejected(text):
    assert "empty" in rejected(text).message


@pytest.mark.parametrize(
    "text, hint",
    [
        ("d_in \u00d7 d_out", "*"),
        ("d_in \u2212 1", "-"),
        ("d\u00b2", "**2"),
        ("d_in \u00b7 d_out", "*"),
    ],
)
def test_unicode_operators_get_a_hint(text, hint):
    error = rejected(text)
    assert hint in error.message
    assert error.column == next(i for i, c in enumerate(text) if ord(c) > 127) + 1


def test_errors_name_the_column():
    assert rejected("d_in + foo").column == 8
    assert "foo" in rejected("d_in + foo").message
    assert rejected("  d_in + foo").column == 10
    assert rejected("d_in ^ 2").column == 6
    assert "**" in rejected("d_in ^ 2").message
    assert "d_in" in rejected("D_in + 1").message


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("x.real", ".real"),
        ("foo(x)", "foo"),
        ("x[0]", "indexing"),
        ("lambda: x", "lambda"),
        ("f'{x}'", "f-string"),
        ("9**9**9", "exponent"),
        ("x**17", "exponent"),
        ("2**400", "exponent"),
        ("1" * 13, "larger"),
    ],
)
def test_messages_say_what_is_not_allowed(text, fragment):
    assert fragment in rejected(text).message


def test_bounds_are_inclusive_at_the_limit():
    assert scalar("x**16") == x**16
    assert scalar(str(symbolic.MAX_CONSTANT)) == symbolic.MAX_CONSTANT
    rejected(str(symbolic.MAX_CONSTANT + 1))
    rejected("x**17")
    assert scalar("(x**8)**8") == x**64
    rejected("(x**8)**8*x")
    assert scalar("2**-1") == sympy.Rational(1, 2)


def test_sizes_of_intermediate_numbers_are_bounded():
    error = rejected("(10**12)**16*(10**12)**16")
    assert "too large" in error.message
    for tiny in ("1e-320", "x*0.0000000001**16", "(10**12)**-16*(10**12)**-16"):
        assert "too small" in rejected(tiny).message, tiny


# Matrices.


def test_matrix_products_and_transposes():
    assert matrix("G.T*X").shape == (OUT_, IN_)
    assert symbolic.matrix_equivalent(matrix("G.T*X"), matrix("(X.T@G).T"))
    assert symbolic.matrix_equivalent(matrix("G.T*X"), matrix("2*G.T*X/2"))
    assert not symbolic.matrix_equivalent(matrix("G.T*X"), matrix("X.T*G"))
    assert symbolic.matrix_equivalent(matrix("X.T*G"), matrix("G.T*X").T)
    assert not symbolic.matrix_equivalent(matrix("G.T*X"), matrix("-G.T*X"))
    assert symbolic.matrix_shape(matrix("X.T*G")) == (3, 5)


def test_ones_is_a_column_of_ones():
    assert symbolic.matrix_equivalent(matrix("G.T*ones"), matrix("G.T*ones*ones.T*ones/B"))
    assert not symbolic.matrix_equivalent(matrix("G.T*ones"), matrix("G.T*ones/B"))


def test_example_sizes_are_distinct_primes():
    sizes = list(symbolic.EXAMPLE_SIZES.values())
    assert len(set(sizes)) == len(sizes) and 1 not in sizes
    assert all(all(n % k for k in range(2, n)) for n in sizes)


@pytest.mark.parametrize(
    "text, parts",
    [
        ("G.T*W", ["G.T (d_out x B)", "W (d_out x d_in)", "inner sizes B and d_out", "5x7 times 5x3"]),
        ("W*G", ["W (d_out x d_in)", "G (B x d_out)", "5x3 times 7x5"]),
        ("G*W.T", ["W.T (d_in x d_out)"]),
        ("X + W", ["adds", "shapes differ"]),
    ],
)
def test_shape_mismatch_names_the_shapes(text, parts):
    error = rejected(text, matrix)
    assert isinstance(error, ShapeMismatch)
    for part in parts:
        assert part in error.message, error.message
    assert error.column == text.index(next(c for c in text if c in "*+@")) + 1


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("G.sum(0)", "ones"),
        ("G.mean()", ".mean"),
        ("G + 1", "number and a matrix"),
        ("G**2", "powers"),
        ("1/G", "divide by the matrix"),
        ("B", "matrix expression"),
        ("sqrt(G)", "numbers"),
        ("G.T.shape", ".shape"),
        ("d_in@d_out", "matrices"),
    ],
)
def test_matrix_misuse_is_explained(text, fragment):
    assert fragment in rejected(text, matrix).message


def test_scalar_parser_rejects_matrix_names_and_vice_versa():
    rejected("G")
    with pytest.raises(SymbolicError):
        parse_matrix("d_in", MATRICES, SIZES)
