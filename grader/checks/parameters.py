"""Checks for assignment 02: counting parameters, output activations and training memory.

Counts are exact integers. Each check mixes the course's worked numbers with random sizes from
`ctx.rng`, and recognises the usual wrong formulas (no bias, a bias per input, weights only).
Feedback for random inputs names the input and the rule, never the expected count.
"""

from __future__ import annotations

import numpy as np

from grader.checks.base import WrongAnswer, check
from grader.checks.common import call_student, call_text, distinct_sizes, expect_counts, reject_unanswered
from grader.checks.formulas import KnownAnswer, SymbolicPart, symbolic_part
from grader.checks.values import as_int, as_text, describe
from grader.reference import parameters as ref


# ----------------------------------------------------------------------------- layer_parameters


def _layer_models(d_in: int, d_out: int, bias: bool = True) -> dict[str, tuple]:
    weights = d_in * d_out
    if not bias:
        return {
            "ignores-flag": (
                weights + d_out,
                "with bias=False the layer has no bias vector, only the d_out * d_in weights.",
            ),
            "bias-per-input": (
                weights + d_in,
                "with bias=False the layer has only the d_out * d_in weights.",
                "bias-per-input",
            ),
        }
    return {
        "weights-only": (
            weights,
            "that counts the weights only; each of the d_out output units also has a bias.",
            "missing-bias",
        ),
        "bias-per-input": (
            weights + d_in,
            "that adds one bias per input; a dense layer has one bias per output unit.",
            "bias-per-input",
        ),
        "extra-unit": (
            (d_in + 1) * (d_out + 1),
            "that counts an extra input and an extra output unit; the "
            "layer has d_out * d_in weights plus d_out biases.",
        ),
        "sum": (
            d_in + d_out,
            "a dense layer has one weight for every (output, input) pair: d_out * d_in "
            "weights, plus d_out biases.",
        ),
    }


@check("02_parameters", "layer_parameters")
def check_layer_parameters(answer, ctx):
    d_in, d_out = distinct_sizes(ctx.rng, 2)
    big_in, big_out = (int(n) for n in ctx.rng.integers(100, 5000, size=2))
    cases = [
        (4, 6),
        (3, 3),
        (768, 3072),
        (784, 256),
        (d_in, d_out),
        (big_in, big_out),
        (1, 73),
        (73, 1),
        (1, 1),
    ]
    calls = [
        args for d_in, d_out in cases for args in [(d_in, d_out), (d_in, d_out, True), (d_in, d_out, False)]
    ]
    expect_counts(answer, calls, ("d_in", "d_out", "bias"), ref.layer_parameters, _layer_models)
    return ctx.passed("Correct: d_out * d_in weights, plus d_out biases when the layer has a bias.")


# ----------------------------------------------------------------------------- count_parameters


def _widths_cases(rng: np.random.Generator) -> list[list[int]]:
    awkward = [1, 7, 73]
    long_widths = [
        int(w)
        for w in rng.choice(awkward + list(rng.integers(2, 300, size=10)), size=int(rng.integers(12, 30)))
    ]
    return [
        [10, 20, 5, 1],
        [512, 2048, 512],
        [3, 3, 1],
        [64, 32, 32, 32, 10],
        [64, 512, 10],
        [1024] * 9,
        [784, 256, 10],
        [int(n) for n in rng.integers(2, 5000, size=2)],
        [1, 1],
        [73, 1, 7],
        long_widths,
    ]


def _read_counts(value, call: str, layers: int) -> list[int]:
    if type(value) is np.ndarray and value.ndim == 1:
        value = value.tolist()
    if type(value) not in (list, tuple):
        hint = (
            " Return one count per layer as a list; the total is sum(...) of it."
            if type(value) in (int, float)
            else ""
        )
        raise WrongAnswer(
            f"{call} should return a list of {layers} ints, but returned {describe(value)}.{hint}"
        )
    if len(value) != layers:
        raise WrongAnswer(
            f"{call} returned {len(value)} counts; {layers + 1} widths describe {layers} dense "
            "layers, one between each pair of consecutive widths."
        )
    return [as_int(item, f"{call}[{i}]") for i, item in enumerate(value)]


@check("02_parameters", "count_parameters")
def check_count_parameters(answer, ctx):
    for index, widths in enumerate(_widths_cases(ctx.rng)):
        for args in [(widths,)] + ([(widths, False)] if index % 2 else []):
            call = call_text(answer.name, args)
            got = _read_counts(call_student(answer, args, ("widths", "bias")), call, len(widths) - 1)
            expected = ref.count_parameters(*args)
            if got == expected:
                continue
            pairs = list(zip(widths[:-1], widths[1:]))
            bias = len(args) == 1
            if bias and got == [i * o for i, o in pairs]:
                raise WrongAnswer(f"{call}: each layer's count leaves out its d_out biases.", "missing-bias")
            if bias and got == [i * o + i for i, o in pairs]:
                raise WrongAnswer(
                    f"{call}: each layer gets one bias per input; a dense layer has one bias "
                    "per output unit.",
                    "bias-per-input",
                )
            if not bias and got == [i * o + o for i, o in pairs]:
                raise WrongAnswer(f"{call}: with bias=False no layer has a bias vector.")
            layer = next(i for i, (g, e) in enumerate(zip(got, expected)) if g != e)
            raise WrongAnswer(
                f"{call}: the count for layer {layer + 1} ({pairs[layer][0]} -> {pairs[layer][1]}) "
                f"is {got[layer]}, which is not d_out * d_in" + (" + d_out." if bias else ".")
            )
    return ctx.passed(
        "Correct: one count per dense layer, d_out * (d_in + 1) each with bias; "
        "10 -> 20 -> 5 -> 1 has 331 parameters."
    )


# --------------------------------------------------------------------------- output_activations


def _activation_models(batch: int, d_out: int) -> dict[str, tuple]:
    return {
        "parameters": (
            d_out * (batch + 1),
            "that is the parameter count of a layer with `batch` inputs; "
            "output activations are the entries of Z, shape (B, d_out).",
        ),
        "flops": (
            2 * batch * d_out,
            "that counts two operations per output; activations are the B * d_out values of Z.",
        ),
        "one-row": (
            d_out,
            "that is one observation's outputs; a batch of B observations has B rows of d_out values.",
        ),
        "sum": (batch + d_out, "Z has shape (B, d_out), so it holds B * d_out values."),
    }


@check("02_parameters", "output_activations")
def check_output_activations(answer, ctx):
    batch, d_out = distinct_sizes(ctx.rng, 2)
    big_batch, big_out = (int(n) for n in ctx.rng.integers(100, 10000, size=2))
    cases = [(64, 4096), (128, 8192), (32, 6), (batch, d_out), (big_batch, big_out), (1, 73), (73, 1), (1, 1)]
    expect_counts(answer, cases, ("batch", "d_out"), ref.output_activations, _activation_models)
    return ctx.passed(
        "Correct: a layer outputs B * d_out values, e.g. 64 * 4096 = 262,144; d_in does not enter."
    )


# ---------------------------------------------------------------------------- depends_on_batch

BATCH_SLIPS = {
    "parameters": (
        "The parameters are the entries of W (d_out x d_in) and b (d_out): the batch size appears "
        "nowhere in them, because every observation reuses the same W and b. It is the output, of shape "
        "(B, d_out), that grows with the batch.",
        "batch-changes-weights",
    ),
    "both": (
        "Only one of the two changes. Every observation reuses the same W and b, so the parameter count "
        "has no B in it.",
        "batch-changes-weights",
    ),
    "neither": ("One of the two does change: the layer outputs one vector of d_out values per observation.",),
}


@check("02_parameters", "depends_on_batch")
def check_depends_on_batch(answer, ctx):
    choices = ", ".join(repr(choice) for choice in ref.BATCH_CHOICES)
    reject_unanswered(answer, "depends_on_batch", ctx, f"Set it to one of {choices}.")
    text = as_text(answer, "`depends_on_batch`", max_length=200).strip().lower()
    if text not in ref.BATCH_CHOICES:
        raise WrongAnswer(f"`depends_on_batch` should be one of {choices}, but is {answer!r}.")
    expected = ref.depends_on_batch(64, 1024, 4096)
    if text == expected:
        return ctx.passed(
            "Correct: the output has B * d_out values (262,144 for B = 64, 524,288 for B = 128), while "
            "the 4,198,400 parameters are the same for every batch."
        )
    feedback, *codes = BATCH_SLIPS[text]
    raise WrongAnswer(feedback, *codes)


# ------------------------------------------------------------------------ training_memory_bytes


def _memory_models(n_params: int, size: int = 4, optimizer: str = "adam") -> dict[str, tuple]:
    copies = 2 + ref.OPTIMIZER_BUFFERS[optimizer]
    one = n_params * size
    models = {
        "weights-only": (
            one,
            "that is the weights alone. Training also stores one gradient per parameter "
            "and the optimizer's state.",
            "params-determine-memory",
        )
    }
    if copies > 2:
        models["no-state"] = (
            2 * one,
            "that is weights and gradients; the optimizer state is missing "
            f"({optimizer} keeps {copies - 2} extra value(s) per parameter).",
            "params-determine-memory",
        )
        models["one-copy-short"] = (
            (copies - 1) * one,
            f"one of the {copies} per-parameter copies is missing: "
            f"weights, gradients and {copies - 2} {optimizer} buffer(s).",
            "params-determine-memory",
        )
    models["values"] = (n_params * copies, "that counts values, not bytes; multiply by bytes_per_value.")
    if optimizer != "adam":
        models["always-adam"] = (
            4 * one,
            f"{optimizer} keeps {copies - 2} buffer(s) per parameter, not Adam's two.",
        )
    return models


@check("02_parameters", "training_memory_bytes")
def check_training_memory_bytes(answer, ctx):
    n_random = int(ctx.rng.integers(10**6, 10**9))
    size = int(ctx.rng.choice([2, 4, 8]))
    cases = [
        (200_960,),
        (200_960, 4, "adam"),
        (2_362_368, 2, "adam"),
        (n_random, size, "sgd"),
        (n_random, size, "momentum"),
        (n_random, size, "adam"),
        (73, 4, "momentum"),
        (7, 8, "sgd"),
        (1, 2, "adam"),
        (8_396_800, 4),
    ]
    expect_counts(
        answer, cases, ("n_params", "bytes_per_value", "optimizer"), ref.training_memory_bytes, _memory_models
    )
    return ctx.passed(
        "Correct: weights + gradients + optimizer state, e.g. Linear(784, 256) under Adam in "
        "float32 takes 4 * 200,960 * 4 = 3,215,360 bytes before any activation."
    )


# --- symbolic parts (grader.checks.formulas grades them) ----------------------------------------

symbolic_part(
    "02_parameters.params_formula",
    SymbolicPart(
        variable="params_formula",
        question=(
            "the number of parameters of one dense layer from d_in inputs to d_out outputs, biases included"
        ),
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
)


symbolic_part(
    "02_parameters.doubling_ratio",
    SymbolicPart(
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
)
