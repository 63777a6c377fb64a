"""Checks for assignment 01: shapes and the forward pass of a dense layer.

Each function check calls the student's code on the chapter's running example and on random
inputs of awkward sizes drawn from `ctx.rng`, compares against `grader.reference.shapes`, and
names the wrong mental model when an answer matches one (the shared machinery is in
`grader.checks.common`).
"""

from __future__ import annotations

import numpy as np

from grader.checks.base import WrongAnswer, check
from grader.checks.common import (
    call_student,
    call_text,
    compare_array,
    distinct_sizes,
    first_difference,
    reject_unanswered,
    show_args,
)
from grader.checks.values import as_array, as_float, as_int, as_shape, close, describe
from grader.codec import LinearData, TensorData
from grader.reference import shapes as ref

RUNNING_X = np.array([2.0, 4.0, 1.0])
RUNNING_W = np.array([[0.5, -1.0, 2.0], [-0.25, 0.5, 1.0], [1.0, 0.25, -0.5]])
RUNNING_B = np.array([3.0, -1.0, -4.0])
RUNNING_X_BATCH = np.array([[2.0, 4.0, 1.0], [1.0, 0.0, 2.0]])
SEED_004_W = np.array([[2.0, -1.0, 0.5], [0.0, 1.0, 1.0]])
SEED_004_B = np.array([1.0, -2.0])


def _random_matrix(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.normal(0.0, 1.0, size=shape)


# --------------------------------------------------------------------------------- layer_shapes


def _layer_shape_cases(rng: np.random.Generator) -> list[tuple]:
    cases: list[tuple] = [(4, 6, None), (4, 6, 32)]
    for _ in range(2):
        d_in, d_out, batch = distinct_sizes(rng, 3)
        cases += [(d_in, d_out, None), (d_in, d_out, batch)]
    return cases + [(1, 73, 7), (73, 1, 1), (7, 7, 1), (1, 1, None)]


def _layer_shape_codes(shapes: dict, d_in: int, d_out: int, batch) -> list[str]:
    codes = []
    W, b, z = shapes["W"], shapes["b"], shapes["z"]
    expected = ref.layer_shapes(d_in, d_out, batch)
    if d_in != d_out and W == (d_in, d_out):
        codes.append("weight-rows-are-inputs")
    if d_in != d_out and b == (d_in,):
        codes.append("bias-per-input")
    if batch not in (None, d_in, d_out) and (
        W != expected["W"] and batch in W or b != expected["b"] and batch in b
    ):
        codes.append("batch-changes-weights")
    leading = () if batch is None else (batch,)
    single_output = {leading, leading + (1,)}
    if d_out > 1 and (z in single_output or W in {(d_in,), (1, d_in)} or b in {(), (1,)}):
        codes.append("layer-is-one-neuron")
    return codes


@check("01_shapes", "layer_shapes")
def check_layer_shapes(answer, ctx):
    for d_in, d_out, batch in _layer_shape_cases(ctx.rng):
        args = (d_in, d_out) if batch is None else (d_in, d_out, batch)
        call = call_text("layer_shapes", args)
        got = call_student(answer, args, ("d_in", "d_out", "batch"))
        if type(got) is not dict:
            raise WrongAnswer(
                f"{call} should return a dict with keys 'x', 'W', 'b', 'z', but returned {describe(got)}."
            )
        missing = [key for key in ("x", "W", "b", "z") if key not in got]
        if missing:
            raise WrongAnswer(
                f"{call} returned a dict without the key(s) {missing}; it needs 'x', 'W', 'b' and 'z'."
            )
        shapes = {key: as_shape(got[key], f"{call}[{key!r}]") for key in ("x", "W", "b", "z")}
        expected = ref.layer_shapes(*args)
        wrong = [key for key in ("x", "W", "b", "z") if shapes[key] != expected[key]]
        if wrong:
            details = "; ".join(f"{key} is {shapes[key]}, expected {expected[key]}" for key in wrong)
            hint = (
                ""
                if batch is None
                else " The batch adds a leading axis to x and z only; W and b are the "
                "same for every observation."
            )
            raise WrongAnswer(
                f"{call}: {details}. W has one row per output unit (d_out, d_in) and b one entry "
                f"per output unit (d_out,).{hint}",
                *_layer_shape_codes(shapes, d_in, d_out, batch),
            )
    return ctx.passed(
        "Correct: W is (d_out, d_in), b is (d_out,), and a batch only adds a leading axis to x and z."
    )


# ---------------------------------------------------------------------------------- z2_by_hand


def reject_slip(value: float, slips: dict[float, tuple], what: str) -> None:
    """Raise WrongAnswer naming the slip when `value` is one of the known wrong numbers.

    `slips` maps each wrong number to (feedback, codes).
    """
    for slip, (feedback, codes) in slips.items():
        if abs(value - slip) <= 1e-9:
            raise WrongAnswer(f"{what} is {value:g}: {feedback}", *codes)


Z2_SLIPS = {
    2.5: ("2.5 is the weighted sum before the bias; add the second unit's bias, -1.", ("missing-bias",)),
    -0.75: (
        "you combined the second column of W with x; each row of W is one output unit, "
        "so use row 2: (-0.25, 0.5, 1).",
        ("weight-rows-are-inputs",),
    ),
    0.25: (
        "you used the second column of W and left out the bias; use row 2 of W and add b2 = -1.",
        ("weight-rows-are-inputs", "missing-bias"),
    ),
    3.5: ("the bias of the second unit is -1, so it lowers the weighted sum 2.5.", ()),
    2.0: ("2 is the first unit's pre-activation; the question asks for the second unit.", ()),
    -1.5: ("-1.5 is the third unit's pre-activation; the question asks for the second unit.", ()),
}


@check("01_shapes", "z2_by_hand")
def check_z2_by_hand(answer, ctx):
    reject_unanswered(answer, "z2_by_hand", ctx)
    expected = float(ref.linear_forward(RUNNING_X, RUNNING_W, RUNNING_B)[1])
    vector = answer.array if type(answer) is TensorData else answer
    if type(vector) in (list, tuple) and len(vector) == 3 or type(vector) is np.ndarray and vector.size == 3:
        raise WrongAnswer(
            "z2_by_hand should be one number, the second pre-activation z_2, not the whole vector."
        )
    value = as_float(answer, "z2_by_hand")
    if abs(value - expected) <= 1e-9:
        return ctx.passed("Correct: z_2 = -0.25*2 + 0.5*4 + 1*1 - 1 = 1.5.")
    reject_slip(value, Z2_SLIPS, "z2_by_hand")
    raise WrongAnswer(
        f"z2_by_hand is {value:g}, which is not the second pre-activation. Take row 2 of W, "
        "multiply it entry by entry with x = (2, 4, 1), add the products and then the bias b_2."
    )


# ------------------------------------------------------------------------------ linear_forward


def _forward_models(X: np.ndarray, W: np.ndarray, b: np.ndarray) -> list[tuple]:
    models = []
    if W.shape[0] == W.shape[1]:
        models += [
            (
                X @ W + b,
                "it matches X @ W + b, which treats the rows of W as inputs. W has shape "
                "(d_out, d_in), one row per output unit, so the layer computes X @ W.T + b.",
                "weight-rows-are-inputs",
            ),
            (
                X @ W,
                "it matches X @ W with no bias: W is used the wrong way round (use W.T) and "
                "the bias b is missing.",
                "weight-rows-are-inputs",
                "missing-bias",
            ),
        ]
    affine = X @ W.T + b
    models += [
        (X @ W.T, "it matches X @ W.T without the bias; add b to every output.", "missing-bias"),
        (
            np.maximum(affine, 0),
            "it matches ReLU(X @ W.T + b). linear_forward is the affine part of "
            "the layer only; the activation is a separate step.",
        ),
    ]
    if W.shape[0] > 1:
        models.append(
            (
                affine.sum(axis=-1),
                "it returns one number per observation, as if the layer were a single "
                "neuron; a dense layer returns d_out values per observation.",
                "layer-is-one-neuron",
            )
        )
    return models


def _forward_cases(rng: np.random.Generator) -> list[tuple]:
    cases = [
        ("the running example x = (2, 4, 1)", RUNNING_X, RUNNING_W, RUNNING_B),
        ("a batch of two inputs with the running example's W and b", RUNNING_X_BATCH, RUNNING_W, RUNNING_B),
    ]
    batch, d_in, d_out = distinct_sizes(rng, 3)
    shapes = [(None, d_in, d_out), (batch, d_in, d_out), (73, 7, 1), (1, 1, 7), (7, 73, 5), (None, 73, 1)]
    for batch, d_in, d_out in shapes:
        x_shape = (d_in,) if batch is None else (batch, d_in)
        label = "a random input" if batch is None else "a random batch"
        cases.append(
            (
                label,
                _random_matrix(rng, *x_shape),
                _random_matrix(rng, d_out, d_in),
                _random_matrix(rng, d_out),
            )
        )
    return cases


@check("01_shapes", "linear_forward")
def check_linear_forward(answer, ctx):
    for label, X, W, b in _forward_cases(ctx.rng):
        got = call_student(answer, (X, W, b), ("X", "W", "b"))
        context = f"For {label} ({show_args(('X', 'W', 'b'), (X, W, b))})"
        compare_array(got, ref.linear_forward(X, W, b), "the output", context, _forward_models(X, W, b))
    return ctx.passed(
        "Correct: Z = X @ W.T + b for single inputs and batches, with the inputs left unchanged."
    )


# ------------------------------------------------------------------------------------------ relu


def _relu_cases(rng: np.random.Generator) -> list[np.ndarray]:
    cases = [ref.linear_forward(RUNNING_X, RUNNING_W, RUNNING_B)]
    for shape in [(73,), (7, 5), (1,), (1, 7), (2, 1, 7)]:
        Z = np.round(_random_matrix(rng, *shape), 3)
        Z.flat[rng.integers(Z.size)] = 0.0
        cases.append(Z)
    return cases


@check("01_shapes", "relu")
def check_relu(answer, ctx):
    for Z in _relu_cases(ctx.rng):
        got = call_student(answer, (Z,), ("Z",))
        models = [
            (np.abs(Z), "negative entries must become 0, not change sign."),
            (np.minimum(Z, 0), "it keeps the negative entries; ReLU keeps max(z, 0)."),
            (Z, "the negative entries are unchanged; ReLU replaces them with 0."),
            ((Z > 0).astype(float), "it returns 1 where z > 0 instead of z itself."),
        ]
        compare_array(got, ref.relu(Z), "relu(Z)", f"For Z of shape {Z.shape}", models)
    return ctx.passed("Correct: ReLU keeps positive entries and replaces the others with 0, for any shape.")


# ------------------------------------------------------------------------------- to_torch_linear


def _torch_cases(rng: np.random.Generator) -> list[tuple]:
    cases = [(RUNNING_W, RUNNING_B)]
    d_in, d_out = distinct_sizes(rng, 2)
    for d_out, d_in in [(d_out, d_in), (5, 73), (1, 7), (7, 1)]:
        cases.append((_random_matrix(rng, d_out, d_in), _random_matrix(rng, d_out)))
    return cases


def _float32_close(got: np.ndarray, expected: np.ndarray) -> bool:
    return close(got, expected, rtol=1e-6, atol=1e-6)


def _mismatch(got: np.ndarray, expected: np.ndarray) -> str:
    if got.shape != expected.shape:
        return f"has shape {got.shape}, expected {expected.shape}"
    return f"does not hold the given values ({first_difference(got, expected, rtol=1e-6, atol=1e-6)})"


def _check_torch_layer(layer, W: np.ndarray, b: np.ndarray, context: str) -> None:
    d_out, d_in = W.shape
    if type(layer) is not LinearData:
        hint = " Return the nn.Linear layer itself, not its weight." if type(layer) is TensorData else ""
        raise WrongAnswer(f"{context}: expected a torch.nn.Linear, but got {describe(layer)}.{hint}")
    features = (layer.in_features, layer.out_features)
    if features != (d_in, d_out):
        codes = ("weight-rows-are-inputs",) if features == (d_out, d_in) else ()
        raise WrongAnswer(
            f"{context}: the layer is nn.Linear({layer.in_features}, {layer.out_features}); "
            f"W of shape (d_out, d_in) = {W.shape} needs nn.Linear(in_features={d_in}, "
            f"out_features={d_out}).",
            *codes,
        )
    weight = as_array(layer.weight, "layer.weight")
    if not (weight.shape == W.shape and _float32_close(weight, W)):
        if weight.shape == W.T.shape and _float32_close(weight, W.T):
            raise WrongAnswer(
                f"{context}: layer.weight holds W transposed. PyTorch stores the weight as "
                "(out_features, in_features), the same orientation as W: copy W as it is.",
                "weight-rows-are-inputs",
            )
        raise WrongAnswer(
            f"{context}: layer.weight {_mismatch(weight, W)}. "
            "Copy W into layer.weight inside torch.no_grad()."
        )
    if layer.bias is None:
        raise WrongAnswer(
            f"{context}: the layer has no bias (bias=False); it needs one bias per output, copied from b.",
            "missing-bias",
        )
    bias = as_array(layer.bias, "layer.bias")
    if not (bias.shape == b.shape and _float32_close(bias, b)):
        if bias.shape == b.shape and not np.any(bias):
            raise WrongAnswer(f"{context}: layer.bias is all zeros; copy b into it.", "missing-bias")
        raise WrongAnswer(
            f"{context}: layer.bias {_mismatch(bias, b)}. Copy b into layer.bias inside torch.no_grad()."
        )


@check("01_shapes", "to_torch_linear")
def check_to_torch_linear(answer, ctx):
    for W, b in _torch_cases(ctx.rng):
        layer = call_student(answer, (W, b), ("W", "b"))
        _check_torch_layer(layer, W, b, f"For W of shape {W.shape} and b of shape {b.shape}")
    return ctx.passed(
        "Correct: nn.Linear(d_in, d_out) with weight (out_features, in_features) equal to W and bias equal "
        "to b."
    )


# -------------------------------------------------------------------------------- find_mismatch


def _mismatch_cases(rng: np.random.Generator) -> list[tuple]:
    batch, time, width, in_features = distinct_sizes(rng, 4)
    return [
        ((32, 10), 12),
        ((32, 12), 12),
        ((12, 10), 12),
        ((10, 12), 12),
        ((10,), 12),
        ((12,), 12),
        ((batch, time, width), in_features),
        ((batch, time, in_features), in_features),
        ((batch, width), in_features),
        ((1, 1), 1),
        ((in_features, 1), in_features),
        ((0, 7), 73),
    ]


def _read_mismatch(value, call: str):
    if value is None:
        return None
    if type(value) is bool:
        raise WrongAnswer(
            f"{call} returned {value}; return None when the shapes fit, otherwise the tuple "
            "(axis, got, expected)."
        )
    if type(value) not in (tuple, list) or len(value) != 3:
        raise WrongAnswer(
            f"{call} should return None or a tuple (axis, got, expected), but returned {describe(value)}."
        )
    return tuple(as_int(item, f"{call}[{i}]") for i, item in enumerate(value))


@check("01_shapes", "find_mismatch")
def check_find_mismatch(answer, ctx):
    for input_shape, in_features in _mismatch_cases(ctx.rng):
        call = call_text("find_mismatch", (input_shape, in_features))
        got = _read_mismatch(
            call_student(answer, (input_shape, in_features), ("input_shape", "in_features")), call
        )
        expected = ref.find_mismatch(input_shape, in_features)
        if got == expected:
            continue
        last = len(input_shape) - 1
        if expected is None:
            raise WrongAnswer(
                f"{call} returned {got}, but the last axis already has {in_features} features, "
                "so the layer accepts this input: return None. Only the last axis must match."
            )
        if got is None:
            raise WrongAnswer(
                f"{call} returned None, but the last axis has {input_shape[-1]} features and the "
                f"layer expects {in_features}. A layer reads the last axis; the leading axes "
                "(batch, positions) can be anything."
            )
        if got[0] == -1:
            raise WrongAnswer(
                f"{call} returned {got}: give the axis as a non-negative index, "
                f"here {last} (len(input_shape) - 1)."
            )
        if got[1:] == (in_features, input_shape[-1]):
            raise WrongAnswer(
                f"{call} returned {got}: the order is (axis, size found in the input, "
                "in_features the layer expects)."
            )
        raise WrongAnswer(
            f"{call} returned {got}, which does not describe the mismatch: the layer reads the "
            f"last axis (index {last}) of the input and compares its size with in_features."
        )
    return ctx.passed("Correct: only the last axis has to equal in_features; leading axes pass through.")


# ------------------------------------------------------------------------------ collapse_affine


def _collapse_cases(rng: np.random.Generator) -> list[tuple]:
    second_W, second_b = np.array([[0.6, -0.4, 1.2]]), np.array([-0.2])
    cases = [(RUNNING_W, RUNNING_B, second_W, second_b)]
    d_in, hidden, d_out = distinct_sizes(rng, 3)
    for d_in, hidden, d_out in [(d_in, hidden, d_out), (4, 8, 2), (73, 1, 7), (1, 7, 73), (7, 5, 1)]:
        cases.append(
            (
                _random_matrix(rng, hidden, d_in),
                _random_matrix(rng, hidden),
                _random_matrix(rng, d_out, hidden),
                _random_matrix(rng, d_out),
            )
        )
    return cases


def _collapse_models(W1, b1, W2, b2) -> tuple[list, list]:
    """Wrong models for the returned W and for the returned b."""
    weight_models = [
        (
            (W2 @ W1).T,
            "W is transposed: the collapsed layer maps d_in inputs to d_out outputs, "
            "so W = W2 @ W1 has shape (d_out, d_in).",
            "weight-rows-are-inputs",
        ),
        (
            W2 @ np.maximum(W1, 0),
            "W matches W2 @ ReLU(W1). There is no activation between the two "
            "layers, and without one the composition is just another affine map.",
            "stacked-affine-is-nonlinear",
        ),
    ]
    bias_models = [
        (
            b2,
            "b equals b2 alone: the first layer's bias passes through W2 too, so b = W2 @ b1 + b2.",
            "missing-bias",
        ),
        (
            W2 @ b1,
            "b equals W2 @ b1: the second layer's bias b2 is still added, b = W2 @ b1 + b2.",
            "missing-bias",
        ),
        (
            W2 @ np.maximum(b1, 0) + b2,
            "b matches W2 @ ReLU(b1) + b2. There is no activation between the layers, so b = W2 @ b1 + b2.",
            "stacked-affine-is-nonlinear",
        ),
    ]
    if b1.shape == b2.shape:
        bias_models.append((b1 + b2, "b equals b1 + b2, but b1 passes through W2 first: b = W2 @ b1 + b2."))
    return weight_models, bias_models


@check("01_shapes", "collapse_affine")
def check_collapse_affine(answer, ctx):
    names = ("W1", "b1", "W2", "b2")
    for W1, b1, W2, b2 in _collapse_cases(ctx.rng):
        args = (W1, b1, W2, b2)
        context = f"For {show_args(names, args)}"
        got = call_student(answer, args, names)
        if type(got) in (tuple, list) and len(got) == 4:
            raise WrongAnswer(
                f"{context}: collapse_affine returned {describe(got)}. Two affine layers with "
                "nothing between them always equal one affine layer: return (W, b) with "
                "W2 @ (W1 @ x + b1) + b2 == W @ x + b.",
                "stacked-affine-is-nonlinear",
            )
        if type(got) not in (tuple, list) or len(got) != 2:
            raise WrongAnswer(f"{context}: expected a tuple (W, b), but got {describe(got)}.")
        W_expected, b_expected = ref.collapse_affine(*args)
        weight_models, bias_models = _collapse_models(W1, b1, W2, b2)
        compare_array(got[0], W_expected, "W", context, weight_models)
        compare_array(got[1], b_expected, "b", context, bias_models)
    return ctx.passed(
        "Correct: W = W2 @ W1 and b = W2 @ b1 + b2; two stacked affine layers are one affine layer."
    )


# ---------------------------------------------------------------------------- x2_for_zero_output

X2_SLIPS = {
    3.0: (
        "x2 = 3 makes the weighted sum 0 but leaves out the bias b1 = 1; y1 = 2*1 - x2 + 0.5*2 + 1.",
        ("missing-bias",),
    ),
    -4.0: ("the weight of x2 in y1 is -1, so y1 = 4 - x2; check the sign.", ()),
    0.0: ("x2 = 0 makes y2 zero, not y1; y1 uses the first row of W, (2, -1, 0.5), and b1 = 1.", ()),
}


@check("01_shapes", "x2_for_zero_output")
def check_x2_for_zero_output(answer, ctx):
    reject_unanswered(answer, "x2_zero", ctx)
    value = as_float(answer, "x2_zero")
    x2 = 4.0
    y1 = ref.linear_forward(np.array([1.0, value, 2.0]), SEED_004_W, SEED_004_B)[0]
    if abs(value - x2) <= 1e-9 and abs(y1) <= 1e-9:
        return ctx.passed("Correct: y1 = 2*1 - x2 + 0.5*2 + 1 = 4 - x2 is zero at x2 = 4.")
    reject_slip(value, X2_SLIPS, "x2_zero")
    raise WrongAnswer(
        f"x2_zero is {value:g}, which gives y1 = {y1:g}, not 0. Write y1 from the first row of W "
        "and b1 with x1 = 1 and x3 = 2, then solve y1 = 0 for x2."
    )
