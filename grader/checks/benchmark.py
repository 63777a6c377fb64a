"""Checks for assignment 05: FLOPs, bytes, arithmetic intensity, timing and the roofline.

`time_op` is graded on a simulated device (`grader.fakes.FakeDevice`): the student's function
receives the device's fn, timer and sync, so every call and clock read is deterministic. The
expected median comes from replaying the same scenario with the reference `time_op` in the
grader's own process, and each known timing mistake (timed warm-up, no sync, mean instead of
median...) is replayed the same way to recognise it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from grader import fakes
from grader.checks.base import WrongAnswer, check
from grader.checks.common import CallWording, call_student, reject_float32, reject_known_mistakes, same
from grader.checks.formulas import KnownAnswer, SymbolicPart, symbolic_part
from grader.checks.values import as_float, describe
from grader.codec import CallableSpec
from grader.reference import benchmark as ref
from grader.student import StudentRaised

ASSIGNMENT = "05_matmul_benchmark"

# The chapter's example layer: B = 64, d_in = 1024, d_out = 4096.
EXAMPLE_LAYER = (64, 1024, 4096)


def layer_sizes(rng, count: int) -> list[tuple[int, int, int]]:
    """The chapter's example plus `count` random (B, d_in, d_out) with three different sizes each."""
    sizes = [EXAMPLE_LAYER]
    while len(sizes) < count + 1:
        batch, d_in, d_out = (
            int(rng.choice(choices))
            for choices in ((1, 7, 32, 73, 128), (7, 73, 512, 768), (3, 73, 2048, 3072))
        )
        if len({batch, d_in, d_out}) == 3:
            sizes.append((batch, d_in, d_out))
    return sizes


def layers_in_bytes(rng):
    """((B, d_in, d_out, bytes_per_element), the setting in words) for the example and four random layers."""
    for batch, d_in, d_out in layer_sizes(rng, 4):
        size = int(rng.choice([2, 4, 8]))
        yield (
            (batch, d_in, d_out, size),
            f"For B = {batch}, d_in = {d_in}, d_out = {d_out} and {size} bytes per element",
        )


# Errors in student code reach run_check (status error); no argument here is an array to mutate.
NUMBER_CALLS = CallWording(raised=None)
LAYER_ARGUMENTS = ("batch", "d_in", "d_out")
BYTES_ARGUMENTS = LAYER_ARGUMENTS + ("bytes_per_element",)


def expect_number(
    answer,
    args: tuple,
    names: tuple[str, ...],
    expected: float,
    what: str,
    inputs: str,
    mistakes,
    advice: str,
    digits: str = "g",
) -> None:
    """Grade one numeric answer: `answer(*args)` must equal `expected` within float64 tolerance.

    On a mismatch the feedback starts "`inputs` you returned <number>"; `mistakes` are the wrong
    models (value, rest of the feedback, *codes) tried first, and `advice` ends the generic feedback.
    """
    got = as_float(call_student(answer, args, names, NUMBER_CALLS), what)
    if same(got, expected):
        return
    reject_float32(got, expected, inputs)
    setting = f"{inputs} you returned {got:{digits}}"
    reject_known_mistakes(
        got, expected, [(value, setting + rest, *codes) for value, rest, *codes in mistakes]
    )
    raise WrongAnswer(setting + advice)


@check(ASSIGNMENT, "matmul_flops")
def check_matmul_flops(answer, ctx):
    for batch, d_in, d_out in layer_sizes(ctx.rng, 4):
        expected = float(ref.matmul_flops(batch, d_in, d_out))
        expect_number(
            answer,
            (batch, d_in, d_out),
            LAYER_ARGUMENTS,
            expected,
            "The FLOP count",
            f"For B = {batch}, d_in = {d_in}, d_out = {d_out}",
            [
                (
                    expected / 2,
                    ": one FLOP per multiply-add. Each multiply-add is two floating-point "
                    "operations, a multiply and an add.",
                    "flops-missing-factor-2",
                ),
                (
                    expected + batch * d_out,
                    ", which includes the bias additions. Count only the matrix "
                    "product X @ W.T; the bias adds just B*d_out more and is left out here.",
                ),
                (
                    expected / batch,
                    ", the count for one observation. Every one of the B rows of X goes "
                    "through the whole product, so the count grows with the batch.",
                ),
            ],
            ". Each of the B*d_out outputs is a dot product of length d_in: d_in multiplies and d_in "
            "additions.",
        )
    return ctx.passed("Correct: 2 * B * d_in * d_out.")


@check(ASSIGNMENT, "matmul_bytes")
def check_matmul_bytes(answer, ctx):
    for args, setting in layers_in_bytes(ctx.rng):
        batch, d_in, d_out, size = args
        expected = float(ref.matmul_bytes(*args))
        X, W, Z = batch * d_in, d_out * d_in, batch * d_out
        expect_number(
            answer,
            args,
            BYTES_ARGUMENTS,
            expected,
            "The byte count",
            setting,
            [
                (
                    (X + Z) * size,
                    ", leaving out the weights. The product must read all of W (d_out*d_in "
                    "elements) as well as X, and write Z.",
                ),
                (
                    (X + W) * size,
                    ", leaving out the output. Z (B*d_out elements) has to be written to memory.",
                ),
                ((W + Z) * size, ", leaving out the input. X (B*d_in elements) has to be read."),
                (W * size, ", only the weights. Count reading X and W and writing Z."),
                (expected / size, ", a number of elements. Multiply by bytes_per_element to get bytes."),
                (expected * 8, ", a number of bits. Return bytes: elements times bytes_per_element."),
                (
                    expected + d_out * size,
                    ", which includes the bias. The formula leaves the bias out: read X and W, write Z.",
                ),
                (expected + Z * size, ", counting Z twice. Z is only written, once."),
            ],
            ". Count reading X (B*d_in elements) and W (d_out*d_in) and writing Z (B*d_out), each once, "
            "times bytes_per_element.",
        )
    return ctx.passed("Correct: (B*d_in + d_out*d_in + B*d_out) * bytes_per_element.")


@check(ASSIGNMENT, "arithmetic_intensity")
def check_arithmetic_intensity(answer, ctx):
    for args, setting in layers_in_bytes(ctx.rng):
        batch, d_in, d_out, size = args
        flops, moved = ref.matmul_flops(batch, d_in, d_out), ref.matmul_bytes(*args)
        expected = flops / moved
        expect_number(
            answer,
            args,
            BYTES_ARGUMENTS,
            expected,
            "The arithmetic intensity",
            setting,
            [
                (
                    expected / 2,
                    ": the FLOP count is missing its factor 2 (a multiply-add is two operations).",
                    "flops-missing-factor-2",
                ),
                (moved / flops, ", bytes per FLOP. Arithmetic intensity is FLOPs divided by bytes."),
                (expected * size, ", FLOPs per element. Divide by bytes: elements times bytes_per_element."),
                (
                    flops / ((batch * d_in + batch * d_out) * size),
                    ", without the weights in the bytes. Reading W is part of the memory traffic.",
                ),
            ],
            "; the intensity is matmul_flops / matmul_bytes for the same sizes.",
            digits=".6g",
        )
    return ctx.passed("Correct: FLOPs per byte moved.")


@check(ASSIGNMENT, "achieved_flops")
def check_achieved_flops(answer, ctx):
    rng = ctx.rng
    for batch, d_in, d_out in layer_sizes(rng, 4):
        seconds = float(10 ** rng.uniform(-5, -1))
        flops = ref.matmul_flops(batch, d_in, d_out)
        expected = ref.achieved_flops(batch, d_in, d_out, seconds)
        expect_number(
            answer,
            (batch, d_in, d_out, seconds),
            (*LAYER_ARGUMENTS, "seconds"),
            expected,
            "The FLOP rate",
            f"For B = {batch}, d_in = {d_in}, d_out = {d_out} measured in {seconds:.4g} s",
            [
                (expected / 2, ": the FLOP count is missing its factor 2.", "flops-missing-factor-2"),
                (flops * seconds, ". A rate divides the work by the time: FLOPs / seconds."),
                (seconds / flops, ", seconds per FLOP. Return FLOPs / seconds."),
                (expected / 1e12, ", in TFLOP/s. Return plain FLOP/s; divide by 1e12 only when printing."),
                (expected / 1e9, ", in GFLOP/s. Return plain FLOP/s; divide by 1e9 only when printing."),
            ],
            "; the rate is matmul_flops(B, d_in, d_out) / seconds, in FLOP/s.",
            digits=".6g",
        )
    return ctx.passed("Correct: FLOPs divided by seconds.")


def roofline_cases(rng):
    """(intensity, peak_flops, bandwidth) cases; one sits on the ridge.

    Whole numbers keep the ridge point exact.
    """
    cases = []
    for _ in range(3):
        ridge = int(rng.choice([8, 13, 64, 156, 295]))
        bandwidth = float(int(rng.integers(5, 40)) * 10**11)
        peak = ridge * bandwidth
        cases += [
            (ridge * float(rng.uniform(0.05, 0.9)), peak, bandwidth),
            (ridge * float(rng.uniform(1.1, 30)), peak, bandwidth),
        ]
    cases.insert(int(rng.integers(2, len(cases))), (float(ridge), peak, bandwidth))
    return cases


@check(ASSIGNMENT, "roofline_bound")
def check_roofline_bound(answer, ctx):
    cases = roofline_cases(ctx.rng)
    answers = []
    for intensity, peak, bandwidth in cases:
        got = call_student(
            answer, (intensity, peak, bandwidth), ("intensity", "peak_flops", "bandwidth"), NUMBER_CALLS
        )
        if type(got) is not str or got not in ref.BOUNDS:
            hint = (
                " exactly, in lower case"
                if type(got) is str and got.strip().lower().startswith(ref.BOUNDS)
                else ""
            )
            raise WrongAnswer(
                f"`roofline_bound` should return the string 'memory' or 'compute'{hint}, but "
                f"returned {describe(got)}."
            )
        answers.append(got)
    expected = [ref.roofline_bound(*case) for case in cases]
    if answers == expected:
        return ctx.passed("Correct: memory-bound below the ridge point, compute-bound at or above it.")
    wrong = [i for i, (got, want) in enumerate(zip(answers, expected)) if got != want]
    if answers == [ref.BOUNDS[ref.BOUNDS.index(want) - 1] for want in expected]:
        raise WrongAnswer(
            "Every answer is the opposite one. Below the ridge point peak_flops / bandwidth the memory "
            "cannot deliver bytes fast enough (memory-bound); above it the arithmetic limits (compute-bound)."
        )
    intensity, peak, bandwidth = cases[wrong[0]]
    if len(wrong) == 1 and intensity * bandwidth == peak:
        return ctx.partial(
            0.5,
            f"Right in both regimes, but at intensity {intensity:g} FLOP/byte, exactly the ridge point "
            f"peak_flops / bandwidth, the answer should be 'compute': 'memory' only when the intensity is "
            f"strictly below the ridge point.",
        )
    raise WrongAnswer(
        f"For intensity {intensity:g} FLOP/byte on a device with peak {peak:g} FLOP/s and bandwidth "
        f"{bandwidth:g} bytes/s you returned '{answers[wrong[0]]}'. Compare the intensity with the ridge "
        f"point peak_flops / bandwidth (FLOP/byte): below it the operation is memory-bound."
    )


# ---- time_op: scenarios on the simulated device ----

WARMUP_SLOWDOWN = 100


@dataclass(frozen=True)
class Scenario:
    """One call of time_op on a fresh simulated device."""

    durations: tuple[float, ...]
    asynchronous: bool
    launch_overhead: float
    warmup: int
    repeat: int
    with_sync: bool
    about: str
    number: int = 1

    def arguments(self) -> list:
        """time_op's arguments (fn, warmup, repeat, timer, sync[, number]) as data for the student's process.

        `number` is passed only when it is not 1, as a sixth positional argument.
        """
        device = {
            "device_id": "device",
            "durations": list(self.durations),
            "asynchronous": self.asynchronous,
            "launch_overhead": self.launch_overhead,
        }
        sync = CallableSpec("fake_device_sync", device) if self.with_sync else None
        return [
            CallableSpec("fake_device_fn", device),
            self.warmup,
            self.repeat,
            CallableSpec("fake_device_timer", device),
            sync,
        ] + ([self.number] if self.number != 1 else [])

    def replay(self, timing) -> float:
        """Run a trusted timing function on a fresh copy of this scenario's device."""
        return float(timing(*fakes.materialise(self.arguments())))


def timing_model(
    fn,
    warmup,
    repeat,
    timer,
    sync,
    number=1,
    *,
    warm="run",
    sync_start=True,
    sync_end=True,
    summary=np.median,
    window=False,
    calls=None,
    divide=True,
) -> float:
    """time_op with one deliberate slip: warm "skip"/"time", a missing sync, another summary, one clock
    window, `calls` calls per window instead of `number`, or no division by `number`."""
    sync = sync or (lambda: None)
    per_window = number if calls is None else calls
    calls_timed = warmup + repeat if warm == "time" else repeat
    if warm == "run":
        for _ in range(warmup):
            fn()
    if window:
        sync()
        start = timer()
        for _ in range(calls_timed):
            fn()
        sync()
        return (timer() - start) / calls_timed
    durations = []
    for _ in range(calls_timed):
        if sync_start:
            sync()
        start = timer()
        for _ in range(per_window):
            fn()
        if sync_end:
            sync()
        durations.append((timer() - start) / (number if divide else 1))
    return float(summary(durations))


def scenarios(rng) -> list[Scenario]:
    """Five scenarios: slow warm-up, an outlier without sync, an asynchronous device, an even repeat,
    and microsecond kernels timed `number` calls per window."""

    def slow(count, base):
        return [float(d) for d in base * WARMUP_SLOWDOWN * rng.uniform(1, 1.5, size=count)]

    def rising(count, base):
        """Increasing durations at least 0.15 * base apart, so that neighbouring medians differ clearly."""
        return [float(d) for d in base * (1 + 0.25 * np.arange(count) + rng.uniform(0, 0.1, size=count))]

    def shuffled(count, base):
        return [float(d) for d in rng.permutation(rising(count, base))]

    made = []
    # warmup < (repeat - 1) / 2 keeps "no warm-up", "warm-up timed" and "slowest run" apart.
    base, repeat = 10 ** rng.uniform(-4, -2), int(rng.choice([7, 9, 11]))
    warmup = int(rng.integers(2, (repeat - 1) // 2))
    made.append(
        Scenario(
            tuple(slow(warmup, base) + rising(repeat + 6, base)[::-1]),
            False,
            float(rng.uniform(1e-6, 2e-5)),
            warmup,
            repeat,
            True,
            f"a synchronous simulated device whose first {warmup} calls are about {WARMUP_SLOWDOWN} times "
            f"slower (warm-up), with warmup={warmup} and repeat={repeat}",
        )
    )
    base, warmup, repeat = 10 ** rng.uniform(-4, -2), int(rng.integers(1, 4)), int(rng.choice([5, 7, 9]))
    timed = shuffled(repeat + 6, base)
    timed[int(rng.integers(0, repeat))] = float(50 * base)
    made.append(
        Scenario(
            tuple(slow(warmup, base) + timed),
            False,
            float(rng.uniform(1e-6, 2e-5)),
            warmup,
            repeat,
            False,
            f"a synchronous simulated device (sync=None) where one of the {repeat} timed runs is "
            f"50 times slower than the rest, with warmup={warmup}",
        )
    )
    base, warmup, repeat = 10 ** rng.uniform(-4, -2), int(rng.integers(1, 4)), int(rng.choice([3, 5, 7]))
    made.append(
        Scenario(
            tuple(slow(warmup, base) + rising(repeat + 6, base)),
            True,
            float(rng.uniform(1e-6, 2e-5)),
            warmup,
            repeat,
            True,
            f"an asynchronous simulated device (like a GPU: fn() only queues the work, sync() waits for "
            f"it), with warmup={warmup} and repeat={repeat}",
        )
    )
    base, warmup, repeat = 10 ** rng.uniform(-4, -2), int(rng.integers(1, 4)), int(rng.choice([4, 6, 8]))
    made.append(
        Scenario(
            tuple(slow(warmup, base) + shuffled(repeat + 6, base)),
            False,
            float(rng.uniform(1e-6, 2e-5)),
            warmup,
            repeat,
            True,
            f"a synchronous simulated device with an even number of runs, repeat={repeat}",
        )
    )
    base, warmup, repeat = 10 ** rng.uniform(-6, -5), int(rng.integers(1, 4)), int(rng.choice([3, 5, 7]))
    number = int(rng.choice([10, 20, 50]))
    made.append(
        Scenario(
            tuple(slow(warmup, base) + shuffled(repeat * number + 6, base)),
            True,
            float(rng.uniform(1e-6, 2e-5)),
            warmup,
            repeat,
            True,
            f"an asynchronous simulated device running microsecond kernels, timed with number={number} calls "
            f"per window (warmup={warmup}, repeat={repeat})",
            number,
        )
    )
    return made


def middle(durations, upper: bool) -> float:
    return float(sorted(durations)[len(durations) // 2 - (0 if upper else 1)])


def timing_mistakes(scenario: Scenario, expected: float):
    """The known wrong timing models, replayed on `scenario`, as (value, feedback, *codes)."""
    warm = (
        f"The first {scenario.warmup} calls of this device are slow, like a real first call that allocates "
        "memory or compiles a kernel: run fn exactly `warmup` times before the timed loop and leave them "
        "out of the timing."
    )
    no_sync = (
        "On this asynchronous device fn() returns as soon as the work is queued, so the clock must be read "
        "only after sync(): call sync() (when it is given) before reading the start clock and again before "
        "the end clock."
    )
    outlier = (
        "A single slow run (say, one interrupted by the operating system) pulls the mean up but hardly moves "
        "the median, so return the median of the per-run times."
    )
    mistakes = [
        (
            dict(sync_start=False, sync_end=False),
            "Your times are only the launch overhead. " + no_sync,
            "timing-without-sync",
        ),
        (
            dict(sync_end=False),
            "Your times are only the launch overhead: no sync() before the end clock. " + no_sync,
            "timing-without-sync",
        ),
        (
            dict(sync_start=False),
            "Your first timed run also counts the warm-up work that was still queued: no sync() "
            "before the start clock. " + no_sync,
            "timing-without-sync",
        ),
        (
            dict(warm="skip"),
            "Your timed runs include the slow warm-up calls: you did not run them first. " + warm,
            "timing-includes-warmup",
        ),
        (dict(warm="time"), "You timed the warm-up calls too. " + warm, "timing-includes-warmup"),
        (
            dict(warm="time", summary=np.mean),
            "You timed the warm-up calls too. " + warm,
            "timing-includes-warmup",
        ),
        (dict(summary=np.mean), "You returned the mean. " + outlier),
        (
            dict(window=True),
            "You timed all runs in one window and divided by repeat, which is the mean. "
            "Time each run separately. " + outlier,
        ),
        (dict(summary=np.min), "You returned the fastest run; return the median of the per-run times."),
        (dict(summary=np.max), "You returned the slowest run; return the median of the per-run times."),
        (dict(summary=np.sum), "You returned the total time of all runs; return the median time of one run."),
    ]
    yield from (
        (scenario.replay(partial(timing_model, **slip)), feedback, *codes)
        for slip, feedback, *codes in mistakes
    )
    if scenario.number != 1:
        per_window = (
            f"With number={scenario.number}, call fn {scenario.number} times between the two clock reads "
            f"(each window is sync, start, {scenario.number} calls, sync, end) and divide the window by "
            "number."
        )
        yield (
            scenario.replay(partial(timing_model, calls=1, divide=False)),
            "You called fn once per window. " + per_window,
        )
        yield (
            scenario.replay(partial(timing_model, divide=False)),
            "You returned the time of a whole window of calls, not of one call. " + per_window,
        )
    yield expected * 1e3, "Your result is in milliseconds; return seconds, as the timer gives them."
    yield expected * 1e6, "Your result is in microseconds; return seconds, as the timer gives them."
    yield -expected, "Your result is negative: a duration is end - start."
    for warmup, repeat in other_counts(scenario.warmup, scenario.repeat):
        yield (
            replace(scenario, warmup=warmup, repeat=repeat).replay(ref.time_op),
            f"Your result is what {warmup} warm-up calls and {repeat} timed runs give, but this call asked "
            f"for warmup={scenario.warmup} and repeat={scenario.repeat}: use the arguments, not fixed "
            "numbers.",
            *(("timing-includes-warmup",) if warmup < scenario.warmup else ()),
        )


def other_counts(warmup: int, repeat: int) -> list[tuple[int, int]]:
    """Wrong (warmup, repeat) pairs, likeliest first: the defaults, off by one, then a small grid."""
    likely = [
        (3, 10),
        (warmup - 1, repeat),
        (warmup + 1, repeat),
        (warmup, repeat - 1),
        (warmup, repeat + 1),
        (0, repeat),
        (0, warmup + repeat),
    ]
    grid = [(w, r) for w in range(warmup + 4) for r in range(1, repeat + 4)]
    return [
        pair
        for pair in dict.fromkeys(likely + grid)
        if pair != (warmup, repeat) and pair[0] >= 0 and pair[1] >= 1
    ]


@check(ASSIGNMENT, "time_op")
def check_time_op(answer, ctx):
    for scenario in scenarios(ctx.rng):
        expected = scenario.replay(ref.time_op)
        try:
            value = call_student(
                answer,
                tuple(scenario.arguments()),
                ("fn", "warmup", "repeat", "timer", "sync", "number"),
                NUMBER_CALLS,
            )
        except StudentRaised as raised:
            if raised.type_name == "TypeError" and "NoneType" in raised.message and not scenario.with_sync:
                raise WrongAnswer(
                    "With sync=None (a synchronous device such as the CPU) there is nothing to wait for: "
                    "call sync only when it is not None."
                ) from None
            if raised.type_name == "TypeError" and scenario.number != 1 and "argument" in raised.message:
                raise WrongAnswer(
                    f"Called with a sixth argument, number={scenario.number}, your time_op raised TypeError "
                    f"({raised.message}). Accept number=1 (calls of fn per timed window) as in the task."
                ) from None
            raise
        got = as_float(value, "The time")
        if same(got, expected):
            continue
        reject_float32(got, expected, f"On {scenario.about},")
        if scenario.repeat % 2 == 0:
            durations = [
                scenario.launch_overhead + d for d in scenario.durations[scenario.warmup :][: scenario.repeat]
            ]
            if any(same(got, middle(durations, upper)) for upper in (True, False)):
                return ctx.partial(
                    0.5,
                    f"Almost: on {scenario.about} you returned one of the two middle times. With an "
                    f"even number of runs the median is the mean of the two middle values.",
                )
        reject_known_mistakes(got, expected, timing_mistakes(scenario, expected))
        raise WrongAnswer(
            f"On {scenario.about}, your time_op returned {got:.6g} s; the median of the timed runs is "
            f"{expected:.6g} s. Read the clock with the `timer` argument (not time.perf_counter), run fn "
            f"`warmup` times untimed, time each of the `repeat` windows of `number` calls separately with "
            f"sync() (when given) before each clock read, and return the median per call in seconds."
        )
    return ctx.passed(
        "Correct: warm-up excluded, synchronised clock reads, windows of `number` calls, median per call."
    )


# --- symbolic parts (grader.checks.formulas grades them) ----------------------------------------

symbolic_part(
    "05_matmul_benchmark.flops_formula",
    SymbolicPart(
        variable="flops_formula",
        question=(
            "the floating-point operations of the product X @ W.T for X of shape B x d_in and W of shape "
            "d_out x d_in"
        ),
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
)
