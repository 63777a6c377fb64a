"""Reference solutions for assignment 02: counting parameters, activations and training memory.

A dense layer from d_in inputs to d_out outputs stores a (d_out, d_in) weight matrix and, with
bias, one bias per output unit: d_out * d_in + d_out = d_out * (d_in + 1) numbers.
"""

from __future__ import annotations

from grader.reference.validation import positive_int

# Buffers an optimizer keeps per parameter, on top of the weights and their gradients.
OPTIMIZER_BUFFERS: dict[str, int] = {"sgd": 0, "momentum": 1, "adam": 2}


def layer_parameters(d_in: int, d_out: int, bias: bool = True) -> int:
    """The number of learned numbers in one dense layer.

    Inputs:
    - d_in: number of input features, a positive int.
    - d_out: number of output units, a positive int.
    - bias: whether the layer has a bias vector of shape (d_out,).

    Returns:
    - the count d_out * d_in (the weight matrix, shape (d_out, d_in)) plus d_out when bias is True.
    """
    d_in = positive_int(d_in, "d_in")
    d_out = positive_int(d_out, "d_out")
    if not isinstance(bias, bool):
        raise ValueError(f"bias must be True or False, got {type(bias).__name__} {bias!r}")
    return d_out * d_in + (d_out if bias else 0)


def count_parameters(widths, bias: bool = True) -> list[int]:
    """Parameter counts of the dense layers of a network given by its sequence of widths.

    Inputs:
    - widths: at least two positive ints (d_0, d_1, ..., d_L); layer i maps d_{i-1} -> d_i.
    - bias: whether every layer has a bias vector.

    Returns:
    - a list of L ints, entry i-1 being layer_parameters(d_{i-1}, d_i, bias);
      e.g. [10, 20, 5, 1] -> [220, 105, 6], in total 331.
    """
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__len__"):
        raise ValueError(f"widths must be a list of ints, got {type(widths).__name__}")
    if len(widths) < 2:
        raise ValueError(f"widths must hold at least two widths (input and output), got {list(widths)!r}")
    sizes = [positive_int(width, f"widths[{i}]") for i, width in enumerate(widths)]
    return [layer_parameters(d_in, d_out, bias) for d_in, d_out in zip(sizes[:-1], sizes[1:])]


def output_activations(batch: int, d_out: int) -> int:
    """The number of values a dense layer outputs for a batch.

    Inputs:
    - batch: number of observations B, a positive int.
    - d_out: number of output units, a positive int.

    Returns:
    - B * d_out, the size of the output Z of shape (B, d_out). It does not depend on d_in,
      unlike the parameter count.
    """
    return positive_int(batch, "batch") * positive_int(d_out, "d_out")


BATCH_CHOICES = ("activations", "parameters", "both", "neither")


def depends_on_batch(batch: int, d_in: int, d_out: int) -> str:
    """Which of a dense layer's two counts changes with the batch size: one of BATCH_CHOICES.

    Inputs:
    - batch: number of observations B, a positive int.
    - d_in, d_out: the layer's widths, positive ints.

    Returns:
    - "activations": output_activations(B, d_out) = B * d_out grows with B, while
      layer_parameters(d_in, d_out) has no B in it, so the answer is the same for every size.
    """
    counts = [output_activations(2 * batch, d_out) != output_activations(batch, d_out)]
    counts.append(layer_parameters(d_in, d_out) != layer_parameters(d_in, d_out))
    return {(True, False): "activations", (False, True): "parameters", (True, True): "both"}.get(
        tuple(counts), "neither"
    )


def training_memory_bytes(n_params: int, bytes_per_value: int = 4, optimizer: str = "adam") -> int:
    """Bytes held per parameter while training: weights, gradients and optimizer state.

    Inputs:
    - n_params: number of parameters, a positive int.
    - bytes_per_value: bytes per stored number (4 for float32, 2 for float16/bfloat16).
    - optimizer: "sgd" (no state), "momentum" (one buffer) or "adam" (two buffers, m and v).

    Returns:
    - n_params * bytes_per_value * (2 + buffers): one copy for the weights, one for their
      gradients and one per optimizer buffer. Activations saved for the backward pass are NOT
      included; they depend on the batch and usually dominate for large batches.
    """
    n_params = positive_int(n_params, "n_params")
    bytes_per_value = positive_int(bytes_per_value, "bytes_per_value")
    if not isinstance(optimizer, str) or optimizer not in OPTIMIZER_BUFFERS:
        known = ", ".join(repr(name) for name in OPTIMIZER_BUFFERS)
        raise ValueError(f"unknown optimizer {optimizer!r}; known optimizers: {known}")
    return n_params * bytes_per_value * (2 + OPTIMIZER_BUFFERS[optimizer])
