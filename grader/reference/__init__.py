"""Reference solutions of every automatically graded task, in NumPy float64.

One submodule per topic; the checks compare student answers against these functions:

- `shapes`: layer shapes, the forward pass, ReLU, nn.Linear, collapsing affine layers (assignment 01)
- `parameters`: parameter, activation and training-memory counts (assignment 02)
- `gradients`: the backward pass of a dense layer and numerical gradients (assignment 03)
- `tensor_parallel`: splitting a dense layer across devices (assignment 04)
- `benchmark`: FLOPs, bytes, timing and the roofline (assignment 05)
- `validation`: the input validators they share (`positive_int`, `float_array`, ...)

Weights always use PyTorch's (out, in) orientation: Z = X @ W.T + b.
"""

from grader.reference import benchmark, gradients, parameters, shapes, tensor_parallel

__all__ = ["benchmark", "gradients", "parameters", "shapes", "tensor_parallel"]
