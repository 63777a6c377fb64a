"""grader.student: student code is seen only through data, and its failures become StudentErrors."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from grader import codec
from grader.codec import CallableSpec, Unsupported
from grader.student import (
    LocalFunction,
    MissingFunction,
    NotDefined,
    StudentCrashed,
    StudentRaised,
    call_and_encode,
    decode_reply,
    local_value,
)


def test_arguments_arrive_as_writable_copies_and_results_come_back_as_data():
    seen = {}

    def student(X, shape, scale):
        seen["writable"] = X.flags.writeable
        seen["types"] = (type(X), type(shape), type(scale))
        return {"sum": X.sum() * scale, "shape": shape, "double": 2 * X}

    X = np.arange(6.0).reshape(2, 3)
    function = LocalFunction(student)
    result = function(X, (2, 3), 0.5)
    assert seen == {"writable": True, "types": (np.ndarray, tuple, float)}
    assert result["sum"] == 7.5 and type(result["sum"]) is float and result["shape"] == (2, 3)
    np.testing.assert_array_equal(result["double"], 2 * X)
    assert not result["double"].flags.writeable
    assert function.last_mutated == () and function.last_returned_input == ()
    assert function.calls == 1 and function.name == "student"


def test_mutated_inputs_are_reported_by_index():
    def student(a, b, c):
        c[0] += 1.0
        a.fill(0.0)
        return 1.0

    a, b, c = np.ones(3), np.ones(2), np.array([[1.0], [2.0]])
    function = LocalFunction(student)
    assert function(a, b, c) == 1.0
    assert function.last_mutated == (0, 2)
    assert a.tolist() == [1.0, 1.0, 1.0] and c.tolist() == [[1.0], [2.0]]  # the caller's arrays are untouched
    nan_input = LocalFunction(lambda x: float(np.nansum(x)))
    nan_input(np.array([np.nan, 1.0]))
    assert nan_input.last_mutated == ()


def test_state_is_reset_between_calls():
    def student(x, flag):
        if flag:
            x *= 2
            return x
        return x + 1

    function = LocalFunction(student)
    function(np.ones(2), True)
    assert function.last_mutated == (0,) and function.last_returned_input == (0,)
    function(np.ones(2), False)
    assert function.last_mutated == () and function.last_returned_input == ()


def test_returning_an_input_is_reported_but_an_equal_copy_is_not():
    returns_input = LocalFunction(lambda x, y: y)
    returns_input(np.ones(2), np.zeros(2))
    assert returns_input.last_returned_input == (1,)
    returns_copy = LocalFunction(lambda x: x.copy())
    returns_copy(np.ones(2))
    assert returns_copy.last_returned_input == ()


@pytest.mark.parametrize(
    "error, type_name",
    [
        (ValueError("bad shape"), "ValueError"),
        (SystemExit(2), "SystemExit"),
        (NotImplementedError("stub"), "NotImplementedError"),
        (ZeroDivisionError(), "ZeroDivisionError"),
    ],
)
def test_exceptions_become_student_raised(error, type_name):
    def student(x):
        raise error

    with pytest.raises(StudentRaised) as raised:
        LocalFunction(student)(np.ones(1))
    assert raised.value.type_name == type_name
    assert raised.value.not_implemented == (type_name == "NotImplementedError")
    assert type_name in raised.value.reason
    assert "student" in raised.value.where  # the student's own frame is shown


def test_sys_exit_in_student_code_does_not_exit():
    with pytest.raises(StudentRaised, match="SystemExit"):
        LocalFunction(lambda: sys.exit("bye"))()


def test_keyboard_interrupt_still_stops_grading():
    def student():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        LocalFunction(student)()


def test_an_exception_that_cannot_print_itself_is_still_reported():
    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    def student():
        raise Unprintable()

    with pytest.raises(StudentRaised) as raised:
        LocalFunction(student)()
    assert raised.value.type_name == "Unprintable" and "unprintable" in raised.value.message


def test_hostile_return_values_arrive_as_unsupported():
    class Lying:
        def __eq__(self, other):
            return True

    for value in [Lying(), (i for i in range(2)), np.ones(2).view(np.recarray)]:
        assert type(LocalFunction(lambda v=value: v)()) is Unsupported


def test_callable_specs_are_rebuilt_next_to_the_student_code():
    spec = CallableSpec("sine_loss", {"w": np.array([1.0, 2.0])})
    seen = {}

    def student(loss, x):
        seen["callable"] = callable(loss)
        return loss(x)

    value = LocalFunction(student)(spec, np.zeros(2))
    assert seen["callable"] and value == 0.0


def test_non_callables_and_missing_functions():
    with pytest.raises(NotDefined, match="not a function"):
        LocalFunction(42, "linear_forward")
    missing = MissingFunction("relu")
    with pytest.raises(NotDefined, match="does not define `relu`"):
        missing(np.ones(1))


@pytest.mark.parametrize(
    "reply",
    [
        b"garbage",
        codec.dumps([1, 2]),
        codec.dumps({"error": "text"}),
        codec.dumps({"value": 1})[:-1],
        codec.dumps({"value": 1, "mutated": 5}),
        codec.dumps({"value": 1, "returned_input": None}),
    ],
)
def test_unreadable_replies_are_crashes(reply):
    with pytest.raises(StudentCrashed):
        decode_reply(reply)


def test_reply_indices_must_be_ints():
    value, mutated, returned = decode_reply(
        codec.dumps({"value": 3, "mutated": [0, "x", 2.0], "returned_input": [1]})
    )
    assert (value, mutated, returned) == (3, (0,), (1,))


def test_call_and_encode_reads_only_its_own_format():
    reply = call_and_encode(lambda a, b: a + b, codec.dumps([1, 2]))
    assert decode_reply(reply) == (3, (), ())
    with pytest.raises(codec.DecodeError):
        call_and_encode(lambda: None, b"\x00" * 3)


def test_local_value_is_a_decoded_read_only_copy():
    original = {"W": np.ones((2, 2)), "n": np.int64(3)}
    value = local_value(original)
    assert value["n"] == 3 and type(value["n"]) is int
    assert not value["W"].flags.writeable and value["W"] is not original["W"]
    assert type(local_value(np.ones(1).view(np.recarray))) is Unsupported


def test_a_value_too_large_to_read_fails_as_it_would_from_a_student_process(monkeypatch):
    from grader.inline import part_result

    monkeypatch.setattr(codec, "roundtrip", lambda value: codec.loads(codec.dumps(value), max_bytes=200))
    with pytest.raises(StudentCrashed, match="could not be read: answer of .* exceeds the 200-byte limit"):
        local_value(np.zeros(100))
    result = part_result("01_shapes.z2_by_hand", np.zeros(100))
    assert (result.score, result.status) == (0.0, "failed")
    assert "could not be read" in result.feedback and "200-byte limit" in result.feedback
