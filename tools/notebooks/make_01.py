"""Writes source/01_shapes/01_shapes.ipynb. Run: .venv/bin/python tools/notebooks/make_01.py"""

from authoring import SourceNotebook

nb = SourceNotebook("01_shapes")

nb.md(r"""
# Assignment 1 — Shapes and the forward pass

One neuron turns an input vector into **one** number. A dense layer turns the same input into
**several** numbers at once: it runs many neurons side by side, each with its own weights and its
own bias, and collects their outputs into a new vector. This assignment follows that idea through
four levels — intuition, mechanics, mathematics and code, and research and systems — using one
small running example throughout.

**How to work.** Fill in every cell marked *Task*. The cell right after each task runs public
tests; they check the form of your answer without giving it away. When your notebook is graded,
hidden tests check each task on fresh, randomised inputs. Weights always use PyTorch's
orientation: `W` has one **row per output unit** and one **column per input**, so a batch is
computed as `Z = X @ W.T + b`.

| task | what | points |
| --- | --- | --- |
| 1.1 | shapes of `x`, `W`, `b`, `z` for one observation and a batch | 2 |
| 1.2 | one pre-activation of the running example, by hand | 1 |
| 1.3 | why one output becomes zero after ReLU (written) | 1 |
| 1.4 | `linear_forward` in NumPy, without a loop over units | 3 |
| 1.5 | `relu` | 1 |
| 1.6 | the same layer as a PyTorch `nn.Linear` | 2 |
| 1.7 | finding the axis that breaks a shape contract | 2 |
| 1.8 | collapsing two affine layers into one | 2 |
| 1.9 | the input that makes an output exactly zero | 1 |
""")

nb.code(
    """
import numpy as np
import torch
from torch import nn
import matplotlib.pyplot as plt

np.set_printoptions(precision=4, suppress=True)
""",
    locked=True,
)

nb.md(r"""
The running example: one observation with three features, and a layer with three output units.
""")

nb.code(
    """
x_run = np.array([2.0, 4.0, 1.0])                  # one observation, shape (3,)
W_run = np.array([[0.5, -1.0, 2.0],                # row j = weights of output unit j, shape (3, 3)
                  [-0.25, 0.5, 1.0],
                  [1.0, 0.25, -0.5]])
b_run = np.array([3.0, -1.0, -4.0])                # one bias per output unit, shape (3,)
""",
    locked=True,
)

nb.md(r"""
## Level 1 — Intuition: a layer asks several questions of the same input

Picture each output unit as a question about the input: *how much of this combination of features
is present?* Every unit reads **all** the inputs — that is why the layer is called *dense* or
*fully connected* — but each weighs them differently, and each adds its own offset (the bias).
The answers, side by side, form a new vector: a new *representation* of the same observation that
the next layer reads instead of the raw features.

In the diagram below every line is one weight of the running example. Orange lines are positive
weights, blue lines negative ones, and thicker lines are larger in size. Follow the three lines that
end at one output circle: that is one neuron. All nine lines together are the layer.
""")

nb.code(
    r"""
def draw_layer_diagram(W, input_names, output_names):
    d_out, d_in = W.shape
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    y_in = np.linspace(0.85, 0.15, d_in)
    y_out = np.linspace(0.85, 0.15, d_out)
    scale = np.abs(W).max()
    for j in range(d_out):
        for k in range(d_in):
            colour = "#e07a3f" if W[j, k] > 0 else "#1f4e79"
            ax.plot([0.2, 0.75], [y_in[k], y_out[j]], color=colour, alpha=0.75,
                    linewidth=0.8 + 4.0 * abs(W[j, k]) / scale, zorder=1)
    for y, name in zip(y_in, input_names):
        ax.scatter([0.2], [y], s=900, color="#2a9d8f", zorder=2)
        ax.text(0.2, y, name, ha="center", va="center", color="white", weight="bold", zorder=3)
    for y, name in zip(y_out, output_names):
        ax.scatter([0.75], [y], s=1100, color="#5b5b5b", zorder=2)
        ax.text(0.75, y, name, ha="center", va="center", color="white", weight="bold", zorder=3)
    ax.text(0.2, 1.0, "inputs (features)", ha="center")
    ax.text(0.75, 1.0, "output units", ha="center")
    ax.text(0.475, -0.02, "line = one weight W[j, k]; orange > 0, blue < 0, width ~ |W[j, k]|", ha="center", fontsize=9)
    ax.set_xlim(0, 0.95)
    ax.set_ylim(-0.08, 1.08)
    ax.axis("off")
    return fig


draw_layer_diagram(W_run, ["x1", "x2", "x3"], ["z1", "z2", "z3"])
plt.show()
""",
    illustration=True,
)

nb.md(r"""
Two words describe the size of a network. The **width** of a layer is its number of output units
(three here). The **depth** of a network is how many parameterised layers are applied one after
another. Width says how many questions one stage asks; depth says how many times questions are asked
about the answers of earlier questions. Neither is "better" on its own — they change the parameter
count, the cost, and the functions the network can represent.

## Level 2 — Mechanics: rows, columns and shapes

A layer from `d_in` inputs to `d_out` outputs stores one weight for every (output, input) pair,
arranged with **one row per output unit** and **one column per input feature**: `W` has shape
`(d_out, d_in)`. There is one bias per output unit. For one observation the input `x` and the
pre-activation `z` are vectors; for a batch of `B` observations they gain a leading batch axis,
while `W` and `b` do not change — every observation reuses the same parameters.

### Task 1.1 — shapes (exercises 1 and 2)

Write `layer_shapes(d_in, d_out, batch=None)`. With it you can answer exercises 1 and 2: the shapes
for a 4 → 6 layer, for one observation and for a batch of 32.
""")

nb.answer(
    "layer_shapes",
    '''
def layer_shapes(d_in, d_out, batch=None):
    """Shapes of the input, weights, bias and pre-activation of a dense layer.

    Inputs:
    - d_in: int, number of input features
    - d_out: int, number of output units
    - batch: int B, or None for a single observation (no batch axis)

    Returns a dict with keys "x", "W", "b", "z", each a tuple of ints:
    - x: (d_in,) for one observation, (B, d_in) for a batch
    - W: (d_out, d_in), one row per output unit
    - b: (d_out,)
    - z: (d_out,) for one observation, (B, d_out) for a batch
    """
    ### BEGIN SOLUTION
    leading = () if batch is None else (batch,)
    return {"x": leading + (d_in,), "W": (d_out, d_in), "b": (d_out,), "z": leading + (d_out,)}
    ### END SOLUTION
''',
)

nb.tests(
    "layer_shapes",
    '''
for args in [(4, 6), (4, 6, 32), (7, 1, 73)]:
    shapes = layer_shapes(*args)
    assert isinstance(shapes, dict) and set(shapes) == {"x", "W", "b", "z"}, \\
        f"layer_shapes{args} should return a dict with keys 'x', 'W', 'b', 'z'"
    for key, shape in shapes.items():
        assert isinstance(shape, tuple) and all(isinstance(n, int) for n in shape), \\
            f"layer_shapes{args}[{key!r}] should be a tuple of ints, got {shape!r}"
    # the shapes must fit together: z = x @ W.T + b
    z = np.zeros(shapes["x"]) @ np.zeros(shapes["W"]).T + np.zeros(shapes["b"])
    assert z.shape == shapes["z"], f"layer_shapes{args}: x @ W.T + b has shape {z.shape}, not z's {shapes['z']}"
assert len(layer_shapes(4, 6)["x"]) == 1, "one observation has no batch axis"
assert layer_shapes(4, 6, 32)["W"] == layer_shapes(4, 6)["W"], "the batch size must not change W"
print("4 -> 6, one observation:", layer_shapes(4, 6))
print("4 -> 6, batch of 32:    ", layer_shapes(4, 6, 32))
''',
)

nb.md(r"""
### Task 1.2 — one unit by hand (exercise 4)

Each output unit computes a weighted sum of the inputs plus its bias. Using the running example
(`x = (2, 4, 1)`, the second row of `W` is `(-0.25, 0.5, 1)` and the second bias is `-1`), work out
the **second** pre-activation `z_2` by hand and store it as a plain Python number. Write the
arithmetic out term by term — that is the point of the exercise — rather than calling a function.
""")

nb.answer(
    "z2_by_hand",
    '''
# Task 1.2: the second pre-activation z_2 of the running example, as a number
### BEGIN SOLUTION
z2_by_hand = (-0.25) * 2 + 0.5 * 4 + 1.0 * 1 + (-1.0)
### END SOLUTION
''',
)

nb.tests(
    "z2_by_hand",
    '''
assert z2_by_hand is not None, "Task 1.2: replace None with your value of z_2"
assert isinstance(z2_by_hand, (int, float)) and not isinstance(z2_by_hand, bool), \\
    f"z2_by_hand should be a plain number, got {type(z2_by_hand).__name__}"
''',
)

nb.md(r"""
The figure below shows all three units of the running example. On the left, every cell is one
product `W[j, k] * x[k]`: the row sums are the weighted sums before the bias. On the right, the
bias has been added (the pre-activation `z`) and ReLU has been applied. Look at the first unit:
the large negative contribution of `x2` is outweighed by the other two and the bias. Unit 2's
grey bar is the value you worked out in Task 1.2, so you can check your arithmetic here.
""")

nb.code(
    r"""
contributions = W_run * x_run[np.newaxis, :]          # (3, 3): W[j, k] * x[k]
z_run = contributions.sum(axis=1) + b_run
h_run = np.maximum(z_run, 0.0)

fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [1.1, 1]})
image = left.imshow(contributions, cmap="PuOr_r", vmin=-4, vmax=4)
for (j, k), value in np.ndenumerate(contributions):
    left.text(k, j, f"{value:+.2f}", ha="center", va="center", fontsize=10,
              color="white" if abs(value) > 2.5 else "black")
left.set_xticks(range(3), ["x1 = 2", "x2 = 4", "x3 = 1"])
left.set_yticks(range(3), ["unit 1", "unit 2", "unit 3"])
left.set_title("products W[j, k] * x[k]")
fig.colorbar(image, ax=left, shrink=0.8)

units = np.arange(3)
right.bar(units - 0.2, z_run, width=0.4, color="#8c8c8c", label="pre-activation z")
right.bar(units + 0.2, h_run, width=0.4, color="#e07a3f", label="ReLU(z)")
right.axhline(0, color="black", linewidth=0.8)
for unit in units:
    right.text(unit - 0.2, z_run[unit] + (0.1 if z_run[unit] >= 0 else -0.3), f"{z_run[unit]:+.1f}", ha="center")
right.set_ylim(-2.1, 2.6)
right.set_xticks(units, ["unit 1", "unit 2", "unit 3"])
right.set_title("add the bias, then apply ReLU")
right.legend(frameon=False, loc="lower left")
fig.tight_layout()
plt.show()
""",
    illustration=True,
)

nb.md(r"""
### Task 1.3 — a unit that says nothing (exercise 5)

After ReLU the layer's output for the running example is `(2, 1.5, 0)`. In two or three sentences,
explain **why the third output is 0**: what happens before ReLU, and what ReLU does with it. Refer
to the numbers.
""")

nb.manual(
    "relu_zero_reason",
    answer=r"""
The third unit's weighted sum is 1·2 + 0.25·4 − 0.5·1 = 2.5, and its bias −4 pulls the
pre-activation down to z₃ = −1.5. ReLU passes positive values unchanged and replaces every
negative value by 0, so h₃ = max(0, −1.5) = 0. The unit is "off" for this input: the bias sets a
threshold (2.5 would have to exceed 4) that this observation does not reach.
""",
    scheme=r"""
- 0.5 point: computes or quotes the third pre-activation, z₃ = 2.5 − 4 = −1.5 (weighted sum 2.5, bias −4).
- 0.5 point: states that ReLU maps negative values to 0 (h = max(0, z)), so the output is 0.
- No credit for "the weights are negative" alone: the weighted sum is positive; it is the bias that makes z₃ negative.
""",
)

nb.md(r"""
## Level 3 — Mathematics and code

For one observation $x \in \mathbb{R}^{d_{in}}$, weights $W \in \mathbb{R}^{d_{out} \times d_{in}}$
and bias $b \in \mathbb{R}^{d_{out}}$, the layer computes

$$ z = W x + b, \qquad z_j = \sum_{k=1}^{d_{in}} W_{jk}\, x_k + b_j, \qquad h = \mathrm{ReLU}(z). $$

The index $j$ picks a row of $W$ — an output unit — and $k$ runs over the inputs. For a batch,
the observations are stacked as the rows of $X \in \mathbb{R}^{B \times d_{in}}$ and

$$ Z = X W^\top + b \in \mathbb{R}^{B \times d_{out}}, $$

where $b$ is *broadcast*: the same $b_j$ is added to column $j$ of every row. Broadcasting does not
create a bias per observation, and the batch axis is carried through untouched: row $i$ of $Z$
depends only on row $i$ of $X$.

| object | shape | meaning |
| --- | --- | --- |
| $X$ | $B \times d_{in}$ | one observation per row |
| $W$ | $d_{out} \times d_{in}$ | one output unit per row |
| $b$ | $d_{out}$ | one bias per output unit |
| $Z$ | $B \times d_{out}$ | one pre-activation vector per row |
""")

nb.code(
    r"""
from matplotlib.patches import Rectangle


def draw_batch_shapes(B, d_in, d_out, unit=0.11):
    fig, ax = plt.subplots(figsize=(10, 3.2))
    blocks = [("X", B, d_in, "#2a9d8f"), ("W.T", d_in, d_out, "#1f4e79"),
              ("b", 1, d_out, "#e07a3f"), ("Z", B, d_out, "#5b5b5b")]
    symbols = ["@", "+", "="]
    x = 0.0
    for index, (name, rows, cols, colour) in enumerate(blocks):
        width, height = cols * unit, rows * unit
        ax.add_patch(Rectangle((x, -height / 2), width, height, facecolor=colour, alpha=0.85))
        ax.text(x + width / 2, height / 2 + 0.08, f"{name}\n({rows} x {cols})", ha="center", va="bottom")
        x += width + 0.35
        if index < len(symbols):
            ax.text(x - 0.175, 0, symbols[index], ha="center", va="center", fontsize=18)
    ax.text(x / 2, -B * unit / 2 - 0.25, "the batch axis B passes through; the layer maps the last axis d_in -> d_out",
            ha="center")
    ax.set_xlim(-0.1, x)
    ax.set_ylim(-B * unit / 2 - 0.4, B * unit / 2 + 0.45)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


draw_batch_shapes(B=8, d_in=4, d_out=6)
plt.show()
""",
    illustration=True,
)

nb.md(r"""
### Task 1.4 — the forward pass in NumPy (exercise 8)

Implement `linear_forward(X, W, b)` with a single matrix product and a broadcast bias — **no Python
loop over output units** (or over observations). It must accept one observation of shape `(d_in,)`
as well as a batch of shape `(B, d_in)`.
""")

nb.answer(
    "linear_forward",
    '''
def linear_forward(X, W, b):
    """Affine part of a dense layer: Z = X W^T + b, without a loop over units.

    Inputs:
    - X: inputs, shape (B, d_in), or one observation of shape (d_in,)
    - W: weights, shape (d_out, d_in), one row per output unit
    - b: biases, shape (d_out,)

    Returns:
    - Z: float array of shape (B, d_out), or (d_out,) for a 1-D X. No activation is applied.
    """
    ### BEGIN SOLUTION
    X, W, b = (np.asarray(a, dtype=np.float64) for a in (X, W, b))
    return X @ W.T + b
    ### END SOLUTION
''',
)

nb.tests(
    "linear_forward",
    '''
z = linear_forward(x_run, W_run, b_run)
assert isinstance(z, np.ndarray) and z.shape == (3,), f"one observation should give shape (3,), got {getattr(z, 'shape', z)}"
by_units = np.array([W_run[j] @ x_run + b_run[j] for j in range(3)])   # slow reference: one unit at a time
assert np.allclose(z, by_units), "linear_forward disagrees with the unit-by-unit sum for the running example"

rng = np.random.default_rng(0)
X, W, b = rng.normal(size=(7, 5)), rng.normal(size=(3, 5)), rng.normal(size=3)
Z = linear_forward(X, W, b)
assert Z.shape == (7, 3), f"a (7, 5) batch into a 5 -> 3 layer should give (7, 3), got {Z.shape}"
assert np.allclose(Z[2], linear_forward(X[2], W, b)), "row i of Z should be the output for row i of X alone"
''',
)

nb.md(r"""
### Task 1.5 — ReLU

Implement `relu(Z)` for an array of any shape, elementwise and without modifying its input.
""")

nb.answer(
    "relu",
    '''
def relu(Z):
    """Rectified linear unit, elementwise.

    Inputs:
    - Z: array of any shape S

    Returns:
    - H: new float array of shape S with H = max(Z, 0); Z itself is left unchanged.
    """
    ### BEGIN SOLUTION
    return np.maximum(np.asarray(Z, dtype=np.float64), 0.0)
    ### END SOLUTION
''',
)

nb.tests(
    "relu",
    '''
Z = np.array([[-1.5, 0.0, 2.0], [3.0, -0.25, 1e-9]])
Z_before = Z.copy()
H = relu(Z)
assert isinstance(H, np.ndarray) and H.shape == Z.shape, "relu should return an array of the same shape"
assert np.all(H >= 0), "relu output must be non-negative"
assert np.array_equal(H[Z > 0], Z[Z > 0]), "relu must leave positive entries unchanged"
assert np.array_equal(Z, Z_before), "relu must not modify its input"
print("running example after ReLU:", relu(linear_forward(x_run, W_run, b_run)))
''',
)

nb.md(r"""
### Task 1.6 — the same layer in PyTorch (exercise 9)

`torch.nn.Linear(in_features, out_features)` stores its weight with shape
`(out_features, in_features)` — the same orientation as our `W` — and its bias with shape
`(out_features,)`. Write `to_torch_linear(W, b)` that returns an `nn.Linear` holding copies of `W`
and `b`. Copy the values inside `torch.no_grad()`: a layer's parameters require gradients, and
autograd refuses to overwrite them in place while it is recording. Use `dtype=torch.float64` so that
the layer agrees with NumPy to the last digit.
""")

nb.answer(
    "to_torch_linear",
    '''
def to_torch_linear(W, b):
    """A torch.nn.Linear holding copies of W and b.

    Inputs:
    - W: weights, shape (d_out, d_in) (PyTorch's (out_features, in_features) orientation)
    - b: biases, shape (d_out,)

    Returns:
    - layer: nn.Linear(d_in, d_out) in float64 with layer.weight (d_out, d_in) equal to W and
      layer.bias (d_out,) equal to b.
    """
    ### BEGIN SOLUTION
    W = torch.as_tensor(np.asarray(W, dtype=np.float64))
    b = torch.as_tensor(np.asarray(b, dtype=np.float64))
    layer = nn.Linear(W.shape[1], W.shape[0], dtype=torch.float64)
    with torch.no_grad():
        layer.weight.copy_(W)
        layer.bias.copy_(b)
    return layer
    ### END SOLUTION
''',
)

nb.tests(
    "to_torch_linear",
    '''
layer = to_torch_linear(W_run, b_run)
assert isinstance(layer, nn.Linear), f"expected an nn.Linear, got {type(layer).__name__}"
assert (layer.in_features, layer.out_features) == (3, 3), \\
    f"the running example is a 3 -> 3 layer, got in_features={layer.in_features}, out_features={layer.out_features}"
rng = np.random.default_rng(1)
W, b = rng.normal(size=(2, 7)), rng.normal(size=2)
layer = to_torch_linear(W, b)
assert (layer.in_features, layer.out_features) == (7, 2), "W of shape (2, 7) is a 7 -> 2 layer"
X = rng.normal(size=(5, 7))
with torch.no_grad():
    torch_out = layer(torch.as_tensor(X, dtype=layer.weight.dtype)).double().numpy()
assert np.allclose(torch_out, linear_forward(X, W, b), rtol=1e-6, atol=1e-6), \\
    "the torch layer and linear_forward disagree on the same input"
''',
)

nb.code(
    r"""
# numerical agreement on the running example: NumPy and PyTorch, side by side
try:
    layer = to_torch_linear(W_run, b_run)
    with torch.no_grad():
        z_torch = layer(torch.as_tensor(x_run, dtype=layer.weight.dtype)).double().numpy()
    z_numpy = linear_forward(x_run, W_run, b_run)
    print("NumPy  :", z_numpy)
    print("PyTorch:", z_torch)
    print("largest difference:", np.abs(z_torch - z_numpy).max())
except NotImplementedError as error:
    print(f"finish the tasks first ({error})")
""",
    illustration=True,
)

nb.md(r"""
### Task 1.7 — a broken shape contract (exercise 15)

Layers compose only when adjacent widths match: a layer built with `in_features = d` reads the
**last** axis of its input as the features and insists that it has size `d`; every leading axis
(batch, sequence positions, ...) is carried through. A model receives a tensor of shape `(32, 10)`,
but its first layer was built with `in_features=12`. PyTorch reports this only when the first batch
arrives:
""")

nb.code(
    r"""
try:
    nn.Linear(12, 4)(torch.zeros(32, 10))
except RuntimeError as error:
    print("RuntimeError:", error)
""",
    illustration=True,
)

nb.md(r"""
Write `find_mismatch(input_shape, in_features)` that returns `None` when the shapes fit, and
otherwise the tuple `(axis, got, expected)`: the index of the offending axis (counted from the
front, so the feature axis of a 2-D input is `1`), the size found there, and the size the layer
expects.

Legitimate repairs depend on which side is wrong: if the data really have 10 features, build the
layer with `in_features=10` (or fix the previous layer's `out_features`); if the layer is right,
the data pipeline dropped or never computed two features. Padding with zeros or slicing the input
only to silence the error hides the bug.
""")

nb.answer(
    "find_mismatch",
    '''
def find_mismatch(input_shape, in_features):
    """Which axis of an input breaks a dense layer's shape contract, if any.

    Inputs:
    - input_shape: tuple of ints, the input's shape, e.g. (32, 10); the last axis holds the features
    - in_features: int, the layer's number of inputs

    Returns:
    - None when input_shape[-1] == in_features, otherwise a tuple (axis, got, expected) with
      axis = len(input_shape) - 1, got = input_shape[-1] and expected = in_features.
    """
    ### BEGIN SOLUTION
    axis = len(input_shape) - 1
    if input_shape[axis] == in_features:
        return None
    return (axis, input_shape[axis], in_features)
    ### END SOLUTION
''',
)

nb.tests(
    "find_mismatch",
    '''
assert find_mismatch((32, 12), 12) is None, "a (32, 12) input fits in_features=12"
assert find_mismatch((12,), 12) is None, "a single observation of 12 features fits in_features=12"
result = find_mismatch((32, 10), 12)
assert isinstance(result, tuple) and len(result) == 3, f"expected a tuple (axis, got, expected), got {result!r}"
axis, got, expected = result
assert (32, 10)[axis] == got and expected == 12, f"{result!r} does not describe the mismatch of (32, 10) vs 12"
assert find_mismatch((4, 9, 73), 7)[0] == 2, "for a 3-D input the features are on axis 2"
''',
)

nb.md(r"""
### Task 1.8 — two affine layers with nothing between them

In the running example a second layer follows the first. With ReLU in between, a $3 \to 1$
layer with weights $(0.6, -0.4, 1.2)$ and bias $-0.2$ turns $h = (2, 1.5, 0)$ into one score,
$s = 0.6 \cdot 2 - 0.4 \cdot 1.5 + 1.2 \cdot 0 - 0.2 = 0.4$. The two layers hold
$3 \cdot (3 + 1) + 1 \cdot (3 + 1) = 16$ parameters.

Why put an activation between layers at all? Because without one, two layers collapse into one.
If $h = W_1 x + b_1$ and $y = W_2 h + b_2$, then

$$ y = W_2 (W_1 x + b_1) + b_2 = (W_2 W_1)\, x + (W_2 b_1 + b_2), $$

a single affine layer: the stack costs the parameters of two layers but can only represent what one
layer can. Note that the biases do not prevent this — they combine too.

Write `collapse_affine(W1, b1, W2, b2)`: with `W1` of shape `(d_hidden, d_in)`, `b1` of shape
`(d_hidden,)`, `W2` of shape `(d_out, d_hidden)` and `b2` of shape `(d_out,)`, return the single layer
`(W, b)` equal to the two, with `W` of shape `(d_out, d_in)` and `b` of shape `(d_out,)`.
""")

nb.answer(
    "collapse_affine",
    '''
def collapse_affine(W1, b1, W2, b2):
    """The one affine layer equal to two affine layers applied in turn, with nothing between.

    Inputs:
    - W1: first layer's weights, shape (d_hidden, d_in)
    - b1: first layer's biases, shape (d_hidden,)
    - W2: second layer's weights, shape (d_out, d_hidden)
    - b2: second layer's biases, shape (d_out,)

    Returns a tuple (W, b):
    - W: shape (d_out, d_in)
    - b: shape (d_out,)
    such that W @ x + b == W2 @ (W1 @ x + b1) + b2 for every x of shape (d_in,).
    """
    ### BEGIN SOLUTION
    W1, b1, W2, b2 = (np.asarray(a, dtype=np.float64) for a in (W1, b1, W2, b2))
    return W2 @ W1, W2 @ b1 + b2
    ### END SOLUTION
''',
)

nb.tests(
    "collapse_affine",
    '''
rng = np.random.default_rng(2)
W1, b1 = rng.normal(size=(8, 4)), rng.normal(size=8)
W2, b2 = rng.normal(size=(2, 8)), rng.normal(size=2)
W, b = collapse_affine(W1, b1, W2, b2)
assert np.shape(W) == (2, 4) and np.shape(b) == (2,), f"expected shapes (2, 4) and (2,), got {np.shape(W)} and {np.shape(b)}"
X = rng.normal(size=(5, 4))
assert np.allclose(X @ W.T + b, (X @ W1.T + b1) @ W2.T + b2), "the collapsed layer differs from the two-layer stack"
''',
)

nb.code(
    r"""
# with a ReLU between the layers, no single affine layer reproduces the stack
rng = np.random.default_rng(3)
W1, b1, W2, b2 = rng.normal(size=(8, 4)), rng.normal(size=8), rng.normal(size=(2, 8)), rng.normal(size=2)
X = rng.normal(size=(5, 4))
try:
    W, b = collapse_affine(W1, b1, W2, b2)
    stack_with_relu = np.maximum(X @ W1.T + b1, 0.0) @ W2.T + b2
    print("largest gap between the ReLU stack and the collapsed layer:", np.abs(stack_with_relu - (X @ W.T + b)).max())
except NotImplementedError as error:
    print(f"finish the task first ({error})")
""",
    illustration=True,
)

nb.md(r"""
### Explore: the forward pass, interactively

Move the sliders to change the input. For each output unit the table shows every product
`W[j, k] * x[k]`, their sum, the bias, the pre-activation and its ReLU. Try to make the third unit
switch on: which input has to move, and in which direction? (Without a live kernel — for example
on a website — the widget shows a static table of its starting state.)
""")

nb.code(
    r"""
from layerlab.widgets import forward_pass_explorer

forward_pass_explorer(W_run, b_run, x_run)
""",
    illustration=True,
)

nb.md(r"""
### Task 1.9 — the input that silences an output

A second small layer has three inputs and two outputs:

$$ W = \begin{pmatrix} 2 & -1 & 0.5 \\ 0 & 1 & 1 \end{pmatrix}, \qquad b = (1, -2). $$

Keep $x_1 = 1$ and $x_3 = 2$ fixed. **Predict** from the weights which value of $x_2$ makes the first
output $y_1$ exactly 0, then check your prediction with the explorer below by moving the `x2` slider.
Store the value in `x2_zero`.
""")

nb.code(
    r"""
forward_pass_explorer(np.array([[2.0, -1.0, 0.5], [0.0, 1.0, 1.0]]), np.array([1.0, -2.0]), np.array([1.0, 0.0, 2.0]))
""",
    illustration=True,
)

nb.answer(
    "x2_for_zero_output",
    '''
# Task 1.9: the value of x2 that makes y1 exactly 0 (with x1 = 1, x3 = 2), as a number
### BEGIN SOLUTION
x2_zero = (2.0 * 1 + 0.5 * 2 + 1.0) / 1.0   # y1 = 2*x1 - x2 + 0.5*x3 + 1 = 0
### END SOLUTION
''',
)

nb.tests(
    "x2_for_zero_output",
    '''
assert x2_zero is not None, "Task 1.9: replace None with the value of x2"
assert isinstance(x2_zero, (int, float)) and not isinstance(x2_zero, bool), \\
    f"x2_zero should be a plain number, got {type(x2_zero).__name__}"
''',
)

nb.md(r"""
## Level 4 — Research and systems

**A dense layer is a matrix multiplication.** At scale nobody thinks of neurons: the layer is one
call to a matrix-multiplication kernel, `X @ W.T`, which costs about $2 B\, d_{in} d_{out}$
floating-point operations (one multiply and one add per weight per observation) while reading
$d_{in} d_{out}$ weights. Processing a batch reuses each weight $B$ times, which is why batching makes
accelerators efficient: one large product keeps the arithmetic units busy, whereas $B$ separate
matrix–vector products spend most of their time fetching the same weights again. Assignment 5
measures this.

**Shapes are the contract between layers.** A framework checks shapes only when data flow, so an
inconsistent stack builds happily and fails on the first batch (as in Task 1.7). Writing the shape
at every boundary — or pushing one dummy batch through and printing the shapes — catches the most
common bug in model code before training starts.

**Bias and activation are fused in practice.** The bias addition and the activation are cheap
elementwise operations; libraries fuse them into the matrix-multiplication kernel (an "epilogue")
so the intermediate `Z` need not travel to memory and back. The mathematics is unchanged; only the
execution plan differs.

**Units are not concepts.** It is tempting to name each hidden unit ("unit 2 detects long trips"),
but a layer is trained only to make the whole network's loss small, and trained networks often spread
one pattern over many units. Even the numbering of the units is arbitrary: reorder the rows of
$W_1$ and $b_1$, reorder the columns of the next layer's $W_2$ the same way, and the network computes
exactly the same function. Claims about what a single unit "means" need evidence, not intuition.

### Common misconceptions

- *A layer is one neuron with more inputs.* It has several output units and returns a vector.
- *Rows of a PyTorch weight matrix correspond to inputs.* Rows are output units, columns are inputs.
- *The bias has one value per input.* It has one value per output unit.
- *The batch size changes the number of weights.* The same `W` and `b` serve every observation.
- *Stacking affine layers makes a network nonlinear.* Without an activation between them they
  collapse into one affine layer (Task 1.8).

### Summary

A dense layer computes $Z = X W^\top + b$ with `W` of shape `(d_out, d_in)`; the batch axis passes
through, the bias broadcasts, and ReLU is a separate elementwise step. NumPy and PyTorch compute the
same numbers. Affine layers need a nonlinearity between them to be worth stacking.
""")

print(nb.save())
