"""The fixed vocabulary of misconception codes used in feedback.

Each code names one wrong mental model. `SEED_MISCONCEPTIONS` lists the ten from the
course chapter's "Common misconceptions" section, in the chapter's order.
"""

MISCONCEPTIONS: dict[str, str] = {
    # The ten misconceptions of the chapter, in its order.
    "layer-is-one-neuron": (
        "A dense layer is several output units returning a vector, not one neuron with more inputs."
    ),
    "hidden-unit-is-concept": (
        "Hidden units need not each stand for one interpretable concept; information can be spread over many."
    ),
    "batch-changes-weights": (
        "The batch size does not change the number of learned weights; the same W and b serve every row."
    ),
    "weight-rows-are-inputs": "Rows of a PyTorch weight matrix are output units; columns are input features.",
    "bias-per-input": "A dense layer has one bias per output unit, not one per input.",
    "wider-always-better": (
        "More width adds capacity and cost; whether it helps depends on data and training."
    ),
    "stacked-affine-is-nonlinear": (
        "Affine layers with nothing nonlinear between them compose into one affine layer."
    ),
    "params-determine-memory": (
        "Training memory also holds gradients, optimizer state and activations, not only parameters."
    ),
    "split-needs-no-communication": "A matrix split across devices still has to combine its partial results.",
    "all-layers-dense": (
        "Convolution, attention, embeddings and expert routing connect and share weights differently from a "
        "dense layer."
    ),
    # Technical slips that the checks recognise.
    "missing-bias": "The bias b must be added to every output.",
    "bias-added-per-shard": (
        "In a row-parallel (input-split) layer the bias is added once, after the partial sums are reduced."
    ),
    "grad-transposed": (
        "The gradient has the shape of its transpose; dL/dW must have W's shape (d_out, d_in)."
    ),
    "grad-wrong-operand": "The gradient multiplies the wrong operand: dL/dW uses X, dL/dX uses W.",
    "bias-grad-not-summed": (
        "The bias was broadcast over the batch, so its gradient sums G over the batch axis."
    ),
    "flops-missing-factor-2": "A multiply-add is two floating-point operations: 2*B*d_in*d_out.",
    "timing-includes-warmup": (
        "Warm-up calls (allocation, caching, compilation) must be excluded from the timed runs."
    ),
    "timing-without-sync": "Asynchronous devices need a synchronisation before the clock is read.",
    "width-doubling-doubles-params": (
        "Doubling a square layer's width about quadruples its weights, d*d -> 2d*2d."
    ),
    "not-implemented": "The task is still the released stub.",
}

SEED_MISCONCEPTIONS: tuple[str, ...] = tuple(list(MISCONCEPTIONS)[:10])


def describe(code: str) -> str:
    """The one-line explanation of a misconception code; KeyError for an unknown code."""
    return MISCONCEPTIONS[code]
