"""Find a graded formula in notebook text, in any equivalent written form.

Notebook text writes formulas in LaTeX (`2\\frac{p-1}{p} B\\, d_{out}`, `G^\\top X`), in code
(`2 * B * d_in * d_out`) or in prose (`d_out(d_in + 1)`). `formulas_in(text, names)` rewrites all
of these into the plain syntax of `grader.symbolic` and yields every run of tokens that uses only
the given names, numbers and operators (juxtaposition read as a product). `leaks(text, key)`
parses each candidate with the part's own declarations and returns those that sympy finds
equivalent to one of the part's accepted answers.
"""

from __future__ import annotations

import re

import sympy

from grader import symbolic
from grader.checks.formulas import SYMBOLIC_PARTS, _declared

_FRACTION = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_SUBSCRIPT = re.compile(r"_\{\s*(?:\\mathrm\{|\\text\{|\\rm\s*)?([A-Za-z0-9]+)\}?\s*\}")
_TRANSPOSE = re.compile(r"\^\s*\{?\s*(?:\\top|T|\\intercal|\\mathsf\{T\})\s*\}?|\u1d40|\u22a4")
_TOKEN = re.compile(r"\s*(\.T\b|\*\*|[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[-+*/@()])")
MAX_TOKENS = 25


def normalise(text: str) -> str:
    """LaTeX and typographic notation rewritten as Python-like formula text."""
    for symbol, plain in (
        ("$", " "),
        ("\u2212", "-"),
        ("\u00b7", "*"),
        ("\u00d7", "*"),
        ("\u00b2", "**2"),
        ("\u00b3", "**3"),
    ):
        text = text.replace(symbol, plain)
    text = _SUBSCRIPT.sub(r"_\1", text)
    text = _TRANSPOSE.sub(".T ", text)
    for _ in range(5):
        text = _FRACTION.sub(r"((\1)/(\2))", text)
    for command, plain in (
        (r"\left", ""),
        (r"\right", ""),
        (r"\cdot", "*"),
        (r"\times", "*"),
        (r"\,", " "),
        (r"\;", " "),
        (r"\!", ""),
        ("\\ ", " "),
    ):
        text = text.replace(command, plain)
    text = text.replace("^", "**").replace("{", "(").replace("}", ")")
    return text


def _tokens(text: str, names: set[str]):
    """Runs of formula tokens: names outside `names`, punctuation and words end a run."""
    run: list[str] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        token = match.group(1) if match else None
        is_name = token is not None and re.fullmatch(r"[A-Za-z_]\w*", token) is not None
        if token is None or (is_name and token not in names and token != ".T"):
            if run:
                yield run
            run = []
            position = match.end() if match else position + 1
            continue
        run.append(token)
        position = match.end()
    if run:
        yield run


def _operand_end(token: str) -> bool:
    return token == ")" or token == ".T" or re.fullmatch(r"\w+(\.\d+)?", token) is not None


def _operand_start(token: str) -> bool:
    return token == "(" or re.fullmatch(r"\w+(\.\d+)?", token) is not None


def _joined(tokens: list[str]) -> str:
    text = tokens[0]
    for before, after in zip(tokens, tokens[1:]):
        text += ("*" if _operand_end(before) and _operand_start(after) else "") + after
    return text


def formulas_in(text: str, names: set[str]):
    """Every candidate formula (a str) in `text` built from `names`, numbers and operators."""
    for run in _tokens(normalise(text), names):
        for start in range(len(run)):
            if run[start] in ("*", "/", "**", "@", ")", ".T", "+"):
                continue
            depth = 0
            for stop in range(start + 1, min(len(run), start + MAX_TOKENS) + 1):
                token = run[stop - 1]
                depth += token == "("
                depth -= token == ")"
                if depth < 0:
                    break
                if depth == 0 and _operand_end(token):
                    yield _joined(run[start:stop])


def leaks(text: str, key: str) -> list[str]:
    """The candidate formulas in `text` equivalent to an accepted answer of symbolic part `key`."""
    spec = SYMBOLIC_PARTS[key]
    symbols, matrices, answers, _, parse = _declared(key)
    names = set(spec.symbols) | set(spec.matrices)
    needed = [
        {str(s) for s in answer.free_symbols if str(s) in names} | _matrix_names(answer) for answer in answers
    ]
    equivalent = symbolic.matrix_equivalent if spec.is_matrix else symbolic.scalar_equivalent
    found, seen = [], set()
    for candidate in formulas_in(text, names):
        used = set(re.findall(r"[A-Za-z_]\w*", candidate)) - {"T"}
        if candidate in seen or not any(need <= used for need in needed):
            continue
        seen.add(candidate)
        try:
            expr = parse(candidate)
        except symbolic.SymbolicError:
            continue
        if any(equivalent(expr, answer) for answer in answers):
            found.append(candidate)
    return found


def _matrix_names(expr) -> set[str]:
    return {s.name for s in expr.free_symbols if isinstance(s, sympy.MatrixSymbol)}
