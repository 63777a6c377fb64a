"""The misconception quiz: ten true/false statements, one per misconception of the chapter.

Students answer with a dict `quiz = {1: True, 2: False, ...}`. Some statements state a
misconception (answer False) and some state the corrected fact (answer True), so that marking
everything False or everything True does not pass.
"""

from __future__ import annotations

from grader.misconceptions import SEED_MISCONCEPTIONS

# (statement, truth, misconception code it probes)
QUIZ: dict[int, tuple[str, bool, str]] = {
    1: ("A dense layer with 4 inputs and 6 outputs is one neuron that reads 4 inputs.",
        False, "layer-is-one-neuron"),
    2: ("After training, a useful hidden layer can spread one pattern across many units, so single units need not have a human-readable meaning.",
        True, "hidden-unit-is-concept"),
    3: ("Training with batches of 64 instead of 32 doubles the number of weights in each dense layer.",
        False, "batch-changes-weights"),
    4: ("In torch.nn.Linear(3, 5), the weight has 5 rows, one per output unit, and 3 columns, one per input feature.",
        True, "weight-rows-are-inputs"),
    5: ("A dense layer from 10 inputs to 4 outputs has 10 biases, one per input.",
        False, "bias-per-input"),
    6: ("Making a hidden layer wider always improves a model's test accuracy.",
        False, "wider-always-better"),
    7: ("Two linear layers applied one after the other, with no activation between them, compute an affine function of the input.",
        True, "stacked-affine-is-nonlinear"),
    8: ("Training Linear(784, 256) with Adam in float32 needs only the 200,960 parameters' worth of memory, about 0.8 MB.",
        False, "params-determine-memory"),
    9: ("If a weight matrix is split by output rows across 4 GPUs, the GPUs never need to exchange any values.",
        False, "split-needs-no-communication"),
    10: ("A convolutional layer reuses the same small filter at every position, so it has far fewer weights than a dense layer over the same input.",
         True, "all-layers-dense"),
}

assert tuple(code for _, _, code in QUIZ.values()) == SEED_MISCONCEPTIONS
