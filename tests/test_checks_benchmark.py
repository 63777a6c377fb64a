"""The assignment-05 function checks, with time_op graded on the simulated device."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

from grader import codec
from grader.checks.benchmark import roofline_cases, scenarios
from grader.reference import benchmark as ref
from grader.result import Status
from grader.student import LocalFunction

from conftest import assert_full_marks, assert_zero

A = "05_matmul_benchmark"


def test_integer_and_float_answers_are_both_accepted(grade):
    assert grade(A, "matmul_flops", LocalFunction(lambda B, i, o: float(2 * B * i * o))).score == 1
    assert (
        grade(
            A, "matmul_bytes", LocalFunction(lambda B, i, o, s: np.int64((B * i + o * i + B * o) * s))
        ).score
        == 1
    )


# ------------------------------------------------------------------------------- formulas

WRONG_FORMULAS = {
    "matmul_flops": [
        (lambda B, i, o: B * i * o, ("flops-missing-factor-2",), "two floating-point operations"),
        (lambda B, i, o: 2 * B * i * o + B * o, (), "bias"),
        (lambda B, i, o: 2 * i * o, (), "batch"),
        (lambda B, i, o: 2 * B * i * i, (), "dot product"),
    ],
    "matmul_bytes": [
        (lambda B, i, o, s: (B * i + B * o) * s, (), "weights"),
        (lambda B, i, o, s: (B * i + o * i) * s, (), "output"),
        (lambda B, i, o, s: B * i + o * i + B * o, (), "bytes_per_element"),
        (lambda B, i, o, s: 8 * s * (B * i + o * i + B * o), (), "bits"),
        (lambda B, i, o, s: (B * i + o * i + B * o + o) * s, (), "bias"),
        (lambda B, i, o, s: (B * i + o * i + 2 * B * o) * s, (), "twice"),
        (lambda B, i, o, s: o * i * s, (), "only the weights"),
    ],
    "arithmetic_intensity": [
        (
            lambda B, i, o, s: B * i * o / ref.matmul_bytes(B, i, o, s),
            ("flops-missing-factor-2",),
            "factor 2",
        ),
        (lambda B, i, o, s: ref.matmul_bytes(B, i, o, s) / ref.matmul_flops(B, i, o), (), "bytes per flop"),
        (lambda B, i, o, s: ref.matmul_flops(B, i, o) / (B * i + o * i + B * o), (), "per element"),
        (lambda B, i, o, s: ref.matmul_flops(B, i, o) / ((B * i + B * o) * s), (), "weights"),
    ],
    "achieved_flops": [
        (lambda B, i, o, t: B * i * o / t, ("flops-missing-factor-2",), "factor 2"),
        (lambda B, i, o, t: 2 * B * i * o * t, (), "divides"),
        (lambda B, i, o, t: 2 * B * i * o / t / 1e12, (), "TFLOP/s"),
        (lambda B, i, o, t: 2 * B * i * o / t / 1e9, (), "GFLOP/s"),
        (lambda B, i, o, t: t / (2 * B * i * o), (), "seconds per flop"),
    ],
    "roofline_bound": [
        (lambda ai, P, BW: "compute" if ai < P / BW else "memory", (), "opposite"),
        (lambda ai, P, BW: "memory" if ai < BW / P else "compute", (), "ridge point"),
        (lambda ai, P, BW: "memory", (), "ridge point"),
        (lambda ai, P, BW: "Memory" if ai < P / BW else "Compute", (), "lower case"),
        (lambda ai, P, BW: "memory-bound" if ai < P / BW else "compute-bound", (), "exactly"),
        (lambda ai, P, BW: ai < P / BW, (), "'memory' or 'compute'"),
    ],
}


@pytest.mark.parametrize(
    "part, index", [(part, i) for part, models in WRONG_FORMULAS.items() for i in range(len(models))]
)
@pytest.mark.parametrize("seed", [0, 3])
def test_wrong_formulas_score_zero_with_their_code(grade, part, index, seed):
    function, codes, text = WRONG_FORMULAS[part][index]
    assert_zero(grade(A, part, LocalFunction(function), seed), *codes, text=text)


@pytest.mark.parametrize("seed", range(5))
def test_roofline_off_by_one_at_the_ridge_point_gets_half(grade, seed):
    result = grade(
        A, "roofline_bound", LocalFunction(lambda ai, P, BW: "memory" if ai <= P / BW else "compute"), seed
    )
    assert result.status == Status.PARTIAL and result.score == 0.5 and "ridge point" in result.feedback


@pytest.mark.parametrize("seed", range(10))
def test_roofline_cases_cover_both_regimes_and_the_ridge(ctx_for, seed):
    cases = roofline_cases(ctx_for(A, "roofline_bound", seed).rng)
    answers = [ref.roofline_bound(*case) for case in cases]
    assert {"memory", "compute"} <= set(answers)
    assert sum(intensity * bandwidth == peak for intensity, peak, bandwidth in cases) == 1


# ------------------------------------------------------------------------------- time_op


def no_warmup(fn, warmup, repeat, timer, sync):
    return ref.time_op(fn, 0, repeat, timer, sync)


def warmup_timed(fn, warmup, repeat, timer, sync):
    return ref.time_op(fn, 0, warmup + repeat, timer, sync)


def never_sync(fn, warmup, repeat, timer, sync):
    return ref.time_op(fn, warmup, repeat, timer, None)


def timed_runs(summary=statistics.median, sync_before_start: bool = True, sync_before_end: bool = True):
    """A time_op that runs the warm-up, times each run separately (calling sync only where asked) and
    returns `summary` of the per-run times."""

    def timing(fn, warmup, repeat, timer, sync):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(repeat):
            if sync and sync_before_start:
                sync()
            start = timer()
            fn()
            if sync and sync_before_end:
                sync()
            times.append(timer() - start)
        return float(summary(times))

    return timing


def one_window(fn, warmup, repeat, timer, sync):
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    start = timer()
    for _ in range(repeat):
        fn()
    if sync:
        sync()
    return (timer() - start) / repeat


def calls_sync_always(fn, warmup, repeat, timer, sync, number=1):
    return ref.time_op(fn, warmup, repeat, timer, lambda: sync(), number)


def one_call_per_window(fn, warmup, repeat, timer, sync, number=1):
    return ref.time_op(fn, warmup, repeat, timer, sync)


def window_not_divided(fn, warmup, repeat, timer, sync, number=1):
    return ref.time_op(fn, warmup, repeat, timer, sync, number) * number


def without_number(fn, warmup=3, repeat=10, timer=time.perf_counter, sync=None):
    return ref.time_op(fn, warmup, repeat, timer, sync)


WRONG_TIMINGS = [
    (no_warmup, ("timing-includes-warmup",), "warm-up"),
    (warmup_timed, ("timing-includes-warmup",), "warm-up"),
    (never_sync, ("timing-without-sync",), "sync()"),
    (timed_runs(sync_before_start=False), ("timing-without-sync",), "start clock"),
    (timed_runs(sync_before_end=False), ("timing-without-sync",), "end clock"),
    (timed_runs(np.mean), (), "median"),
    (timed_runs(min), (), "fastest"),
    (timed_runs(max), (), "slowest"),
    (timed_runs(sum), (), "total"),
    (one_window, (), "median"),
    (timed_runs(lambda t: 1e3 * statistics.median(t)), (), "milliseconds"),
    (timed_runs(lambda t: -statistics.median(t)), (), "end - start"),
    (lambda fn, w, r, timer, sync: ref.time_op(fn, 3, 10, timer, sync), (), "use the arguments"),
    (lambda fn, w, r, timer, sync: ref.time_op(fn, w, r - 1, timer, sync), (), "use the arguments"),
    (lambda fn, w, r, timer, sync: ref.time_op(fn, w + 1, r, timer, sync), (), "use the arguments"),
    (calls_sync_always, (), "sync=None"),
    (lambda fn, w, r, timer, sync: ref.time_op(fn, w, r, time.perf_counter, sync), (), "`timer` argument"),
    (lambda fn, w, r, timer, sync: [ref.time_op(fn, w, r, timer, sync)] * r, (), "should be a number"),
]


@pytest.mark.parametrize(
    "function,text",
    [
        (one_call_per_window, "once per window"),
        (window_not_divided, "whole window"),
        (without_number, "sixth argument, number="),
    ],
)
@pytest.mark.parametrize("seed", range(4))
def test_windows_of_number_calls_are_graded(grade, function, text, seed):
    assert_zero(grade(A, "time_op", LocalFunction(function, "time_op"), seed), text=text)


def test_the_reference_time_op_gets_full_marks(grade):
    for seed in range(4):
        assert_full_marks(grade(A, "time_op", LocalFunction(ref.time_op, "time_op"), seed))


@pytest.mark.parametrize("index", range(len(WRONG_TIMINGS)))
@pytest.mark.parametrize("seed", range(6))
def test_wrong_timings_score_zero_with_their_code(grade, index, seed):
    function, codes, text = WRONG_TIMINGS[index]
    assert_zero(grade(A, "time_op", LocalFunction(function), seed), *codes, text=text)


@pytest.mark.parametrize("seed", range(6))
def test_one_middle_value_for_an_even_repeat_gets_half(grade, seed):
    result = grade(A, "time_op", LocalFunction(timed_runs(lambda t: sorted(t)[len(t) // 2])), seed)
    assert result.status == Status.PARTIAL and result.score == 1.5 and "two middle values" in result.feedback


@pytest.mark.parametrize("seed", range(30))
def test_scenarios_separate_the_right_median_from_each_targeted_mistake(ctx_for, seed):
    """Each of the warm-up, outlier, asynchronous and even-repeat scenarios exposes its mistakes.

    Each does so by a wide margin.
    """
    warm, outlier, asynchronous, even, windows = scenarios(ctx_for(A, "time_op", seed).rng)
    targeted = [
        (warm, no_warmup),
        (warm, warmup_timed),
        (outlier, timed_runs(np.mean)),
        (outlier, timed_runs(min)),
        (asynchronous, never_sync),
        (asynchronous, timed_runs(sync_before_start=False)),
        (asynchronous, timed_runs(sync_before_end=False)),
        (even, timed_runs(lambda t: sorted(t)[len(t) // 2])),
        (windows, one_call_per_window),
        (windows, window_not_divided),
    ]
    for scenario, mistake in targeted:
        right, wrong = scenario.replay(ref.time_op), scenario.replay(mistake)
        assert abs(wrong - right) > 1e-3 * right, (scenario.about, mistake)
    assert not outlier.with_sync and asynchronous.asynchronous and even.repeat % 2 == 0
    assert windows.number > 1 and windows.asynchronous and len(windows.arguments()) == 6


def test_time_op_arguments_are_data(ctx_for):
    scenario = scenarios(ctx_for(A, "time_op", 0).rng)[0]
    arguments = scenario.arguments()
    assert codec.roundtrip(arguments) == arguments


# ------------------------------------------------------------------------------- hostile answers


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, "536870912", [1.0]])
def test_non_numbers_and_non_finite_numbers_score_zero(grade, value):
    assert_zero(grade(A, "matmul_flops", LocalFunction(lambda *args: value)))


@pytest.mark.parametrize(
    "part, function",
    [
        ("arithmetic_intensity", lambda B, i, o, s: np.float32(ref.arithmetic_intensity(B, i, o, s))),
        ("achieved_flops", lambda B, i, o, t: np.float32(ref.achieved_flops(B, i, o, t))),
        ("time_op", lambda *args: np.float32(ref.time_op(*args))),
    ],
)
def test_numbers_right_only_to_float32_precision_are_named_as_such(grade, part, function):
    result = grade(A, part, LocalFunction(function, part))
    assert_zero(result, text="as if computed in float32")
    assert result.misconceptions == ()
