"""Shared test helpers: a CheckContext for any part, grading an answer, judging a result, hostile values.

Test modules import the plain helpers (`make_ctx`, `assert_zero`, `assert_full_marks`,
`hostile_formulas`) with `from conftest import ...`; the fixtures need no import.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from grader import gradebook
from grader.checks import CheckContext, run_check
from grader.course import load_course
from grader.result import Status
from grader.seeding import rng_for

TEST_SECRET = "test-secret"


def gradebook_dump(course_dir) -> list[dict]:
    """The normalized contents of a course directory's default gradebook (see grader.gradebook.dump)."""
    course = load_course(course_dir / "course.yml")
    book = gradebook.open_gradebook(gradebook.default_db_url(course_dir), course.course_id)
    try:
        return gradebook.dump(book)
    finally:
        book.close()


@functools.lru_cache(maxsize=None)
def _course():
    """The repository's course, read once: Course is frozen, and parsing course.yml costs ~15 ms a call."""
    return load_course()


def make_ctx(assignment: str, part: str, seed: int | str = 0) -> CheckContext:
    """A context for `assignment.part` whose rng is that of student `student-{seed}`."""
    course_part = _course().assignment(assignment).part(part)
    rng = rng_for(TEST_SECRET, f"student-{seed}", f"{assignment}.{part}")
    return CheckContext(assignment, part, course_part.points, rng, course_part.task)


def assert_zero(result, *codes: str, text: str = ""):
    """A clear zero: failed or error, real feedback (no internal error), the given codes.

    `text` must appear in the feedback.
    """
    assert result.score == 0, result.feedback
    assert result.status in (Status.FAILED, Status.ERROR), result
    assert result.feedback.strip() and "internal error" not in result.feedback, result
    assert set(codes) <= set(result.misconceptions), (codes, result)
    assert text.lower() in result.feedback.lower(), result.feedback


def assert_full_marks(result):
    """Passed with every point and no misconception."""
    assert result.status == Status.PASSED and result.score == result.max_score > 0, result.feedback
    assert result.misconceptions == ()


@pytest.fixture
def ctx_for():
    """`ctx_for(assignment, part, seed=0)` -> CheckContext with a per-seed random generator."""
    return make_ctx


@pytest.fixture
def grade():
    """`grade(assignment, part, answer, seed=0)` -> PartResult from `run_check`."""

    def grade_answer(assignment: str, part: str, answer, seed: int | str = 0):
        return run_check(make_ctx(assignment, part, seed), answer)

    return grade_answer


class LyingNumber:
    """Claims to equal everything and converts to whatever a careless check asks for."""

    def __eq__(self, other):
        return True

    __hash__ = object.__hash__

    def __float__(self):
        return 1.5

    def __int__(self):
        return 4

    __index__ = __int__

    def __array__(self, dtype=None, copy=None):
        return np.ones(3, dtype=dtype)

    def __len__(self):
        return 3


class SubclassedArray(np.ndarray):
    """An ndarray subclass: arrives at checks as Unsupported."""


def _matrix():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.matrix([[1.0, 2.0]])


def _generator():
    yield from range(3)


HOSTILE_VALUES = {
    "None": lambda: None,
    "a string": lambda: "1.5",
    "a generator": _generator,
    "np.matrix": _matrix,
    "an ndarray subclass": lambda: np.ones(3).view(SubclassedArray),
    "a lying object": LyingNumber,
    "a sympy number": lambda: __import__("sympy").Rational(3, 2),
    "a sympy matrix": lambda: __import__("sympy").Matrix([[1, 2]]),
    "a plain object": object,
    "a string array": lambda: np.array(["1", "2"]),
    "a huge array": lambda: np.zeros(10_000_001, dtype=np.uint8),
}


def hostile_formulas(symbol: str) -> dict[str, str]:
    """Formula texts, written with the symbol `symbol`, that try to run code or exhaust the parser."""
    return {
        "import and system call": "__import__('os').system('echo hi')",
        "subclasses walk": "().__class__.__bases__[0].__subclasses__()",
        "tower of powers": "9**9**9",
        "huge exponent": f"{symbol}**10**10",
        "10,000 nested parentheses": "(" * 10_000 + symbol + ")" * 10_000,
        "100 kB string": f"{symbol}+" * 50_000 + symbol,
        "lambda": f"lambda: {symbol}",
        "f-string": f"f'{{{symbol}}}'",
    }


@pytest.fixture(params=sorted(HOSTILE_VALUES))
def hostile_value(request):
    """(label, factory): a factory that makes a fresh hostile answer value each call."""
    return request.param, HOSTILE_VALUES[request.param]
