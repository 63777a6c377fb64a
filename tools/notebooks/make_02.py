"""Writes source/02_parameters/02_parameters.ipynb. Run: .venv/bin/python tools/notebooks/make_02.py"""

from authoring import SourceNotebook

nb = SourceNotebook("02_parameters")

nb.md(r"""
# Assignment 2 — Counting parameters, activations and memory

A dense layer's cost can be read off its shape before a single number is computed. This assignment
counts the **parameters** a layer learns, the **activations** it produces for a batch, and the
**memory** that training needs on top of the weights — and asks why the widths of a network, rather
than its depth alone, decide most of that cost.

Fill in every *Task* cell; the cell after it runs public tests, and hidden tests grade your answer
on fresh inputs. Symbolic answers are **strings** that are read by sympy, e.g. `"3*d + 1"`: use
`*` for multiplication, `**` for powers and only the symbols named in the task.

| task | what | points |
| --- | --- | --- |
| 2.1 | parameters of one layer | 2 |
| 2.2 | the same count as a formula in `d_in`, `d_out` | 1 |
| 2.3 | parameters of every layer of a network | 2 |
| 2.4 | output activations of a batch | 1 |
| 2.5 | what doubling a square layer's width does, as a formula | 2 |
| 2.6 | why the intermediate width dominates (written) | 1 |
| 2.7 | training memory: weights, gradients, optimizer state | 2 |
| 2.8 | width versus depth (written) | 2 |
""")

nb.code(
    """
import numpy as np
import sympy
import torch
from torch import nn
import matplotlib.pyplot as plt
""",
    locked=True,
)

nb.md(r"""
## Level 1 — Intuition: every connection is a number to learn

In a dense layer every input is connected to every output unit, and each connection carries its own
weight. Draw the layer as a grid with one row per output and one column per input: the grid *is* the
weight matrix, and its area is the number of weights. Add one bias per output unit and you have the
layer's **parameters** — every number that training adjusts.

Two consequences follow directly. Making a layer wider stretches the grid in one direction; making
*both* its input and output wider stretches it in two, so the area grows much faster. And the batch
size does not appear at all: a batch of 64 observations uses the very same grid 64 times. What the
batch does change is the number of **activations** — the outputs the layer produces, one vector per
observation.

## Level 2 — Mechanics: count rows, columns and biases

A layer from `d_in` inputs to `d_out` outputs holds a `(d_out, d_in)` weight matrix and a
`(d_out,)` bias. For a 4 → 6 layer that is a 6 × 4 grid of weights and 6 biases.

### Task 2.1 — parameters of one layer (exercise 3)

Write `layer_parameters(d_in, d_out, bias=True)` and use it for the 4 → 6 layer.
""")

nb.answer(
    "layer_parameters",
    '''
def layer_parameters(d_in, d_out, bias=True):
    """Number of learned numbers in one dense layer d_in -> d_out.

    Inputs:
    - d_in: int, number of input features
    - d_out: int, number of output units
    - bias: bool, whether the layer has a bias vector of shape (d_out,)

    Returns:
    - int: the entries of W, shape (d_out, d_in), plus those of b when bias is True
    """
    ### BEGIN SOLUTION
    return d_out * d_in + (d_out if bias else 0)
    ### END SOLUTION
''',
)

nb.tests(
    "layer_parameters",
    '''
for d_in, d_out in [(4, 6), (7, 3), (1, 73)]:
    for bias in (True, False):
        got = layer_parameters(d_in, d_out, bias)
        torch_count = sum(p.numel() for p in nn.Linear(d_in, d_out, bias=bias).parameters())
        assert isinstance(got, int) and not isinstance(got, bool), f"return an int, got {type(got).__name__}"
        assert got == torch_count, f"layer_parameters({d_in}, {d_out}, bias={bias}) disagrees with nn.Linear's own count"
print("4 -> 6 layer:", layer_parameters(4, 6), "parameters")
''',
)

nb.md(r"""
### Task 2.2 — the count as a formula

Give the parameter count of one layer with bias as a **string** in the symbols `d_in` and `d_out`.
""")

nb.answer(
    "params_formula",
    '''
# Task 2.2: parameters of one dense layer with bias, as a string in d_in and d_out
### BEGIN SOLUTION
params_formula = "d_out*(d_in + 1)"
### END SOLUTION
''',
)

nb.tests(
    "params_formula",
    '''
assert params_formula is not None, "Task 2.2: replace None with a formula string"
assert isinstance(params_formula, str), "write the formula as a string, e.g. \\"2*d_in + d_out\\""
d_in_symbol, d_out_symbol = sympy.symbols("d_in d_out")
expression = sympy.parse_expr(params_formula, local_dict={"d_in": d_in_symbol, "d_out": d_out_symbol})
assert expression.free_symbols <= {d_in_symbol, d_out_symbol}, \\
    f"use only d_in and d_out, found {sorted(map(str, expression.free_symbols))}"
''',
)

nb.md(r"""
### Task 2.3 — a whole network (exercises 7 and 16)

A network is described by its sequence of widths, e.g. `[10, 20, 5, 1]` for
10 → 20 → 5 → 1: three dense layers. Write `count_parameters(widths, bias=True)` returning the
parameter count of each layer, in order. Then use it for exercise 7 (10 → 20 → 5 → 1, per layer and
in total) and exercise 16 (512 → 2048 → 512).
""")

nb.answer(
    "count_parameters",
    '''
def count_parameters(widths, bias=True):
    """Parameter count of every dense layer of a network given by its widths.

    Inputs:
    - widths: list of L + 1 ints (d_0, d_1, ..., d_L); layer i maps d_{i-1} -> d_i
    - bias: bool, whether every layer has a bias

    Returns:
    - list of L ints, the parameters of layer 1, ..., layer L
    """
    ### BEGIN SOLUTION
    return [d_out * d_in + (d_out if bias else 0) for d_in, d_out in zip(widths[:-1], widths[1:])]
    ### END SOLUTION
''',
)

nb.tests(
    "count_parameters",
    '''
for widths in ([10, 20, 5, 1], [512, 2048, 512], [7, 1], [3, 73, 1, 7]):
    counts = count_parameters(widths)
    assert isinstance(counts, list) and len(counts) == len(widths) - 1, \\
        f"{widths} has {len(widths) - 1} layers; got {counts!r}"
    layers = [nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:])]
    assert counts == [sum(p.numel() for p in layer.parameters()) for layer in layers], \\
        f"count_parameters({widths}) disagrees with PyTorch's counts"
print("10 -> 20 -> 5 -> 1:", count_parameters([10, 20, 5, 1]), "total", sum(count_parameters([10, 20, 5, 1])))
print("512 -> 2048 -> 512:", count_parameters([512, 2048, 512]), "total", sum(count_parameters([512, 2048, 512])))
''',
)

nb.md(r"""
### Task 2.4 — activations of a batch (exercise 11)

For a batch of `B` observations the layer outputs a `(B, d_out)` array. Write
`output_activations(batch, d_out)`. For exercise 11 ($B = 64$, $d_{in} = 1024$, $d_{out} = 4096$),
compare the number of output activations with the layer's parameter count — which one depends on
the batch?
""")

nb.answer(
    "output_activations",
    '''
def output_activations(batch, d_out):
    """Number of values a dense layer outputs for a batch.

    Inputs:
    - batch: int B, number of observations
    - d_out: int, number of output units

    Returns:
    - int: the size of the output Z of shape (B, d_out)
    """
    ### BEGIN SOLUTION
    return batch * d_out
    ### END SOLUTION
''',
)

nb.tests(
    "output_activations",
    '''
for batch, d_in, d_out in [(64, 1024, 4096), (1, 7, 73), (7, 3, 1)]:
    got = output_activations(batch, d_out)
    with torch.no_grad():
        produced = nn.Linear(d_in, d_out)(torch.zeros(batch, d_in)).numel()
    assert isinstance(got, int) and got == produced, f"output_activations({batch}, {d_out}) disagrees with an actual layer"
print("B=64, 1024 -> 4096:", output_activations(64, 4096), "output values;", layer_parameters(1024, 4096), "parameters")
''',
)

nb.md(r"""
## Level 3 — Mathematics and code

Let $P(d_{in}, d_{out}) = d_{out}\, d_{in} + d_{out} = d_{out}(d_{in} + 1)$. For a network with widths
$d_0, d_1, \dots, d_L$ the total is $\sum_{i=1}^{L} d_i (d_{i-1} + 1)$: every term is a *product of
neighbouring widths*. For a batch of $B$ the layer outputs $A = B\, d_{out}$ values, independent of
$d_{in}$.

For a **square** layer ($d_{in} = d_{out} = d$), $P(d) = d^2 + d$ grows quadratically while the
output activations $B d$ grow linearly. The plot below shows both on logarithmic axes, where a power
law is a straight line whose slope is the exponent.
""")

nb.code(
    r"""
widths = 2 ** np.arange(5, 15)
batch = 64
square_parameters = widths ** 2 + widths
activations = batch * widths

fig, ax = plt.subplots(figsize=(7.5, 4.2))
ax.loglog(widths, square_parameters, "o-", color="#1f4e79", label="parameters of a square layer, $d^2 + d$")
ax.loglog(widths, activations, "s--", color="#e07a3f", label=f"output activations, $B d$ with $B = {batch}$")
ax.set_xscale("log", base=2)
ax.set_xlabel("width d")
ax.set_ylabel("count")
ax.set_title("quadratic versus linear growth")
for d, p in zip(widths[-1:], square_parameters[-1:]):
    ax.annotate(f"{p / 1e6:.0f} M parameters", (d, p), textcoords="offset points", xytext=(-120, -4))
ax.legend(frameon=False)
ax.grid(True, which="major", alpha=0.3)
fig.tight_layout()
plt.show()
""",
    illustration=True,
)

nb.md(r"""
### Task 2.5 — doubling the width (exercise 12)

Let $P(d)$ be the parameter count of a square $d \to d$ layer with bias. Give the exact ratio
$P(2d) / P(d)$ as a **string** in the symbol `d`, simplified or not. What does it approach for large
$d$, and why is it not exactly that number?
""")

nb.answer(
    "doubling_ratio",
    '''
# Task 2.5: P(2d) / P(d) for a square layer with bias, as a string in d
### BEGIN SOLUTION
doubling_ratio = "((2*d)**2 + 2*d) / (d**2 + d)"
### END SOLUTION
''',
)

nb.tests(
    "doubling_ratio",
    '''
assert doubling_ratio is not None, "Task 2.5: replace None with a formula string"
assert isinstance(doubling_ratio, str), "write the ratio as a string in d"
d_symbol = sympy.Symbol("d")
ratio = sympy.parse_expr(doubling_ratio, local_dict={"d": d_symbol})
assert ratio.free_symbols <= {d_symbol}, f"use only the symbol d, found {sorted(map(str, ratio.free_symbols))}"
print("P(2d)/P(d) simplifies to", sympy.simplify(ratio), "and tends to", sympy.limit(ratio, d_symbol, sympy.oo))
''',
)

nb.md(r"""
### Task 2.6 — where the parameters live (exercise 16)

Use your counts for the 512 → 2048 → 512 block. Explain in a few sentences why the **intermediate**
width (2048), rather than the input or the output width alone, decides most of the parameter cost.
""")

nb.manual(
    "intermediate_width",
    answer=r"""
The first layer has 2048·512 + 2048 = 1,050,624 parameters and the second 512·2048 + 512 = 1,049,088,
2,099,712 in total. Each weight matrix is a product of two neighbouring widths, and the intermediate
width 2048 is a factor of *both* matrices, while 512 appears in each only once. Doubling the hidden
width to 4096 doubles both layers (about 4.2 M), whereas the input and output widths each affect
only one of the two matrices. Biases (2048 + 512) are a negligible share.
""",
    scheme=r"""
- 0.5 point: correct counts for both layers including biases — 1,050,624 and 1,049,088, total 2,099,712 (1,048,576 weights per matrix plus 2,048 and 512 biases).
- 0.5 point: explains that the hidden width is a factor of both weight matrices (2048·512 and 512·2048), so changing it scales the whole block, while the input or the output width each enters only one matrix.
- No credit for "2048 is the largest number" without the link to both products.
""",
)

nb.md(r"""
### Task 2.7 — memory for training (seed: one `Linear(784, 256)`)

Inference needs the weights. Training also keeps one **gradient** per parameter and, depending on
the optimizer, extra **state** per parameter: plain SGD keeps none, SGD with momentum keeps one
buffer, and Adam keeps two (running averages of the gradient and of its square). Write
`training_memory_bytes(n_params, bytes_per_value=4, optimizer="adam")` for weights + gradients +
optimizer state (activations are not included). For `nn.Linear(784, 256)` in float32 with Adam this
is four copies of its 200,960 parameters.
""")

nb.answer(
    "training_memory_bytes",
    '''
def training_memory_bytes(n_params, bytes_per_value=4, optimizer="adam"):
    """Bytes held while training: weights, their gradients and the optimizer's state.

    Inputs:
    - n_params: int, number of parameters
    - bytes_per_value: int, bytes per stored number (4 for float32, 2 for float16)
    - optimizer: "sgd" (no state), "momentum" (1 buffer per parameter) or "adam" (2 buffers)

    Returns:
    - int: n_params * bytes_per_value * (2 + number of optimizer buffers); activations excluded
    """
    ### BEGIN SOLUTION
    buffers = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    return n_params * bytes_per_value * (2 + buffers)
    ### END SOLUTION
''',
)

nb.tests(
    "training_memory_bytes",
    '''
n = sum(p.numel() for p in nn.Linear(784, 256).parameters())
adam = training_memory_bytes(n)
assert isinstance(adam, int) and not isinstance(adam, bool), f"return an int, got {type(adam).__name__}"
assert training_memory_bytes(n, 4, "sgd") < training_memory_bytes(n, 4, "momentum") < adam, \\
    "more optimizer state must need more memory"
assert training_memory_bytes(n, 2, "adam") * 2 == adam, "half-precision values should halve the memory"
assert training_memory_bytes(7, 4, "sgd") > 7 * 4, "training keeps more than the weights themselves"
print(f"Linear(784, 256): {n:,} parameters, {adam:,} bytes with Adam in float32")
''',
)

nb.md(r"""
Adam's two buffers are real tensors of the parameters' shapes. After one optimisation step you can
count them directly:
""")

nb.code(
    r"""
layer = nn.Linear(784, 256)
optimizer = torch.optim.Adam(layer.parameters())
loss = layer(torch.randn(32, 784)).pow(2).mean()
loss.backward()
optimizer.step()

weights = sum(p.numel() for p in layer.parameters())
gradients = sum(p.grad.numel() for p in layer.parameters())
state = sum(t.numel() for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
print(f"weights {weights:,}  gradients {gradients:,}  Adam state {state:,}  -> {(weights + gradients + state) / weights:.0f}x the weights")
""",
    illustration=True,
)

nb.md(r"""
### Width versus depth (exercise 6)

The same input (64 features) and output (10 classes) can be connected in very different ways. The
table counts parameters with PyTorch for three designs (activations such as ReLU between the layers
have no parameters, so they are left out):
""")

nb.code(
    r"""
designs = {
    "narrow and deep: 32 -> 32 -> 32": [64, 32, 32, 32, 10],
    "wide and shallow: 512": [64, 512, 10],
    "bottleneck: 4": [64, 4, 10],
}
print(f"{'design':34s} {'layers':>6s} {'parameters':>10s}")
for name, widths in designs.items():
    model = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:])])
    print(f"{name:34s} {len(widths) - 1:6d} {sum(p.numel() for p in model.parameters()):10,d}")
""",
    illustration=True,
)

nb.md(r"""
### Task 2.8 — width and depth (exercise 6)

Describe the difference between a layer's **width** and a network's **depth**. Use the table: what
does each design spend its parameters on, and why is the parameter count alone not a measure of
what a network can do?
""")

nb.manual(
    "width_vs_depth",
    answer=r"""
Width is the number of output units of one layer — how many values one stage computes. Depth is the
number of parameterised layers applied one after another — how many times the representation is
transformed, each layer reading the previous layer's outputs. The wide design (38,410 parameters)
spends almost everything on one large hidden layer; the deep design (4,522) uses few parameters but
composes four transformations (with nonlinearities between them), which lets later layers build on
features of earlier ones. The bottleneck (310) shows that the count is not capability: squeezing
every observation through 4 numbers before a 10-class output limits what can be represented,
whatever the training. Depth and width trade capacity, cost and ease of optimisation differently;
neither is better in general.
""",
    scheme=r"""
- 0.5 point: width = number of units (outputs) of a layer.
- 0.5 point: depth = number of successive parameterised layers (composition of transformations).
- 0.5 point: uses the table — e.g. wide 38,410 vs deep 4,522 parameters, where the parameters go.
- 0.5 point: parameter count is not capability — e.g. the 4-unit bottleneck limits representation; or wider/deeper is not automatically better (data, training, optimisation).
""",
)

nb.md(r"""
## Level 4 — Research and systems

**Memory budgets, not parameter counts, decide what fits.** With Adam in float32 every parameter
costs 16 bytes before any activation is stored. Mixed-precision training typically keeps
half-precision weights and gradients plus a float32 master copy and two float32 Adam buffers — also
about 16 bytes per parameter — so a model with a billion parameters needs on the order of 16 GB
just for this state. Techniques such as sharding the optimizer state across devices (as in ZeRO-style
data parallelism) exist precisely because this term is so large.

**Activations grow with the batch.** The output of one layer is $B\, d_{out}$ values, and training
keeps the activations the backward pass needs for *every* layer. For large batches or long sequences
this term dominates, which is why activation checkpointing (recomputing activations instead of
storing them) trades compute for memory.

**Where the parameters are.** In Transformer blocks the feed-forward sublayer expands the model width
$d$ to an intermediate width of about $4d$ and back: two matrices of $4d^2$ weights each, so the
intermediate width sets most of the block's parameter count — the same effect as Task 2.6. For
$d = 768$ the expansion is `nn.Linear(768, 3072)` with $768 \cdot 3072 + 3072 = 2{,}362{,}368$
parameters, and the projection back adds $3072 \cdot 768 + 768 = 2{,}360{,}064$ more.

**Counting says how many numbers, initialisation says how large.** `nn.Linear` draws each initial
weight uniformly from $[-1/\sqrt{d_{in}},\ 1/\sqrt{d_{in}}]$, a standard deviation of
$1/\sqrt{3 d_{in}}$ — about $0.0208$ for $d_{in} = 768$. Shrinking the weights as the fan-in grows
keeps the pre-activations, which are sums of $d_{in}$ products, at a similar scale in wide and narrow
layers.

### Common misconceptions

- *The batch size changes the number of weights.* It changes the activations, not the parameters.
- *Doubling the width doubles the parameters.* For a square layer it roughly quadruples them.
- *Parameter count determines memory use.* Training also stores gradients, optimizer state and
  activations.
- *A wider or deeper network is always better.* Capacity is not the same as what training achieves.

### Summary

One dense layer has $d_{out}(d_{in} + 1)$ parameters and produces $B\, d_{out}$ output values. Network
totals are sums of products of neighbouring widths, so an intermediate width multiplies into two
layers. Training with Adam needs about four copies of the parameters before activations.
""")

print(nb.save())
