"""Writes source/03_gradients/03_gradients.ipynb. Run: .venv/bin/python tools/notebooks/make_03.py"""

from authoring import SourceNotebook

nb = SourceNotebook("03_gradients")

nb.md(r"""
# Assignment 3 — Gradients of a dense layer

Training changes the numbers inside $Z = X W^\top + b$, never the rule itself. To change them in
the right direction, backpropagation needs the gradient of the loss with respect to **every** weight
and bias, and with respect to the layer's input so that the signal can continue to the layer before.
This assignment derives those three gradients, implements them, and — most importantly — checks
them numerically, the way every new layer should be checked.

Fill in every *Task* cell; the cell after it runs public tests, and hidden tests grade your answer
on fresh inputs.

| task | what | points |
| --- | --- | --- |
| 3.1 | $\partial L / \partial W$ as a matrix expression | 1 |
| 3.2 | $\partial L / \partial X$ as a matrix expression | 1 |
| 3.3 | $\partial L / \partial b$ as a matrix expression | 1 |
| 3.4 | `linear_backward` | 3 |
| 3.5 | `numerical_gradient` by central differences | 2 |
| 3.6 | `rel_error` | 1 |
| 3.7 | why the bias gradient sums over the batch (written) | 1 |
""")

nb.code(
    """
import numpy as np
import sympy
import torch
import matplotlib.pyplot as plt

np.set_printoptions(precision=5, suppress=True)
""",
    locked=True,
)

nb.md(r"""
## Level 1 — Intuition: who gets the blame?

After the forward pass the loss $L$ says how wrong the batch of predictions was. Backpropagation
hands each quantity its share of the blame: how much $L$ would change if that number were nudged.
The gradient arriving at the layer's output, $G = \partial L / \partial Z$, has one entry per
output value — one per observation and output unit.

A weight $W_{jk}$ connects input $k$ to unit $j$ and is used once for **every** observation in the
batch, so its blame collects one contribution per observation: unit $j$'s blame for that observation
times the value input $k$ had there. A bias $b_j$ is added to unit $j$ for every observation, so its
blame is simply the sum of unit $j$'s blame over the batch. An input $x_{ik}$ feeds every unit, so
its blame collects from all units, weighted by the weights that carried it.

## Level 2 — Mechanics: shapes decide almost everything

Every gradient has the shape of the thing it is a gradient of. With $X$ of shape $B \times d_{in}$,
$W$ of shape $d_{out} \times d_{in}$ and $G$ of shape $B \times d_{out}$:

| gradient | shape | built from |
| --- | --- | --- |
| $\partial L / \partial W$ | $d_{out} \times d_{in}$ | $G$ and $X$ |
| $\partial L / \partial X$ | $B \times d_{in}$ | $G$ and $W$ |
| $\partial L / \partial b$ | $d_{out}$ (a column, $d_{out} \times 1$, below) | $G$ alone |

Often only one product of the available matrices has the right shape — a useful check on any
derivation, though not a proof.

## Level 3 — Mathematics and code

Write $z_{ij} = \sum_k x_{ik} W_{jk} + b_j$. By the chain rule,

$$ \frac{\partial L}{\partial W_{jk}} = \sum_i G_{ij}\, x_{ik}, \qquad
   \frac{\partial L}{\partial x_{ik}} = \sum_j G_{ij}\, W_{jk}, \qquad
   \frac{\partial L}{\partial b_j} = \sum_i G_{ij}. $$

Your tasks 3.1–3.3 turn these sums into matrix expressions. Write them as **strings** using only
these matrix symbols:

| symbol | shape | meaning |
| --- | --- | --- |
| `X` | $B \times d_{in}$ | the layer's input batch |
| `W` | $d_{out} \times d_{in}$ | the weights |
| `G` | $B \times d_{out}$ | $\partial L / \partial Z$, the gradient arriving at the output |
| `ones` | $B \times 1$ | a column of ones |

In these strings `*` (or `@`) means the **matrix product** and `.T` the transpose, e.g. `"X.T*G"`.
A sum over the batch can be written as a product with `ones`. $\partial L / \partial b$ is expected
as a $d_{out} \times 1$ column.
""")

nb.answer(
    "grad_W_expr",
    '''
# Task 3.1: dL/dW as a matrix expression in X, W, G, ones (a string)
### BEGIN SOLUTION
dL_dW = "G.T*X"
### END SOLUTION
''',
)

nb.tests(
    "grad_W_expr",
    '''
assert dL_dW is not None, "Task 3.1: replace None with a matrix expression string"
assert isinstance(dL_dW, str), "write the expression as a string, e.g. \\"X.T*G\\""
''',
)

nb.answer(
    "grad_X_expr",
    '''
# Task 3.2: dL/dX as a matrix expression in X, W, G, ones (a string)
### BEGIN SOLUTION
dL_dX = "G*W"
### END SOLUTION
''',
)

nb.tests(
    "grad_X_expr",
    '''
assert dL_dX is not None, "Task 3.2: replace None with a matrix expression string"
assert isinstance(dL_dX, str), "write the expression as a string"
''',
)

nb.answer(
    "grad_b_expr",
    '''
# Task 3.3: dL/db as a d_out x 1 matrix expression in X, W, G, ones (a string)
### BEGIN SOLUTION
dL_db = "G.T*ones"
### END SOLUTION
''',
)

nb.tests(
    "grad_b_expr",
    '''
assert dL_db is not None, "Task 3.3: replace None with a matrix expression string"
assert isinstance(dL_db, str), "write the expression as a string"
''',
)

nb.md(r"""
You can check the **shapes** of your three expressions with sympy's matrix symbols (the values are
checked when your work is graded):
""")

nb.code(
    r"""
B, d_in, d_out = 7, 3, 5
symbols = {"X": sympy.MatrixSymbol("X", B, d_in), "W": sympy.MatrixSymbol("W", d_out, d_in),
           "G": sympy.MatrixSymbol("G", B, d_out), "ones": sympy.MatrixSymbol("ones", B, 1)}
for name, text, wanted in [("dL/dW", dL_dW, (d_out, d_in)), ("dL/dX", dL_dX, (B, d_in)), ("dL/db", dL_db, (d_out, 1))]:
    if text is None:
        print(f"{name}: not answered yet")
        continue
    try:
        shape = sympy.parse_expr(text, local_dict=symbols).shape
        print(f"{name} = {text}: shape {shape}, needs {wanted}:", "ok" if shape == wanted else "WRONG SHAPE")
    except Exception as error:
        print(f"{name} = {text}: cannot be read ({type(error).__name__}: {error})")
""",
    illustration=True,
)

nb.md(r"""
### Task 3.4 — the backward pass

Implement `linear_backward(G, X, W)` with NumPy matrix products — no loops. Given `G` of shape
`(B, d_out)`, `X` of shape `(B, d_in)` and `W` of shape `(d_out, d_in)`, return the tuple
`(dX, dW, db)` with shapes `(B, d_in)`, `(d_out, d_in)` and `(d_out,)`. The bias itself is not needed:
it does not appear in any of the three gradients.
""")

nb.answer(
    "linear_backward",
    '''
def linear_backward(G, X, W):
    """Backward pass of Z = X W^T + b, given the upstream gradient G = dL/dZ.

    Inputs:
    - G: upstream gradient, shape (B, d_out)
    - X: layer input, shape (B, d_in)
    - W: weights, shape (d_out, d_in)

    Returns a tuple (dX, dW, db):
    - dX: dL/dX, shape (B, d_in)
    - dW: dL/dW, shape (d_out, d_in)
    - db: dL/db, shape (d_out,)
    """
    ### BEGIN SOLUTION
    G, X, W = (np.asarray(a, dtype=np.float64) for a in (G, X, W))
    return G @ W, G.T @ X, G.sum(axis=0)
    ### END SOLUTION
''',
)

nb.tests(
    "linear_backward",
    '''
rng = np.random.default_rng(0)
X, W, G = rng.normal(size=(7, 3)), rng.normal(size=(5, 3)), rng.normal(size=(7, 5))
result = linear_backward(G, X, W)
assert isinstance(result, tuple) and len(result) == 3, "return the tuple (dX, dW, db)"
dX, dW, db = result
assert np.shape(dX) == X.shape, f"dX should have X's shape {X.shape}, got {np.shape(dX)}"
assert np.shape(dW) == W.shape, f"dW should have W's shape {W.shape}, got {np.shape(dW)}"
assert np.shape(db) == (5,), f"db should have b's shape (5,), got {np.shape(db)}"
# with L = sum(Z * G) the upstream gradient is exactly G; compare one weight with a finite difference
b = rng.normal(size=5)
loss = lambda W_: np.sum((X @ W_.T + b) * G)
W_plus, W_minus = W.copy(), W.copy()
W_plus[2, 1] += 1e-6
W_minus[2, 1] -= 1e-6
assert np.isclose(dW[2, 1], (loss(W_plus) - loss(W_minus)) / 2e-6, rtol=1e-5), "dW[2, 1] disagrees with a finite difference"
''',
)

nb.md(r"""
### Task 3.5 — numerical gradients

A derivation can be wrong in ways that shapes do not reveal. The reliable test is to compare
against a **numerical** gradient. For each entry $x_i$, nudge it both ways by a small $h$:

$$ \frac{\partial f}{\partial x_i} \approx \frac{f(x + h e_i) - f(x - h e_i)}{2h}. $$

The central difference has error $O(h^2)$, much smaller than the one-sided $O(h)$. Implement
`numerical_gradient(f, x, h=1e-5)` for an array `x` of any shape; `f` returns a float. Leave `x`
unchanged when you return.
""")

nb.answer(
    "numerical_gradient",
    '''
def numerical_gradient(f, x, h=1e-5):
    """Central-difference estimate of the gradient of a scalar function.

    Inputs:
    - f: function taking an array of x's shape and returning a float
    - x: array of any shape S, the point; it is left unchanged
    - h: float, the step added to and subtracted from one entry at a time

    Returns:
    - grad: float array of shape S with grad[i] = (f(x + h e_i) - f(x - h e_i)) / (2 h)
    """
    ### BEGIN SOLUTION
    point = np.array(x, dtype=np.float64, copy=True)
    grad = np.zeros_like(point)
    for index in np.ndindex(point.shape):
        original = point[index]
        point[index] = original + h
        f_plus = float(f(point))
        point[index] = original - h
        f_minus = float(f(point))
        point[index] = original
        grad[index] = (f_plus - f_minus) / (2 * h)
    return grad
    ### END SOLUTION
''',
)

nb.tests(
    "numerical_gradient",
    '''
x = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, -1.0]])
x_before = x.copy()
grad = numerical_gradient(lambda v: float(np.sum(v ** 3)), x)
assert np.shape(grad) == x.shape, f"the gradient should have x's shape {x.shape}, got {np.shape(grad)}"
assert np.allclose(grad, 3 * x ** 2, atol=1e-6), "the gradient of sum(x**3) is 3 x**2"
assert np.array_equal(x, x_before), "numerical_gradient must leave x unchanged"
''',
)

nb.md(r"""
### Task 3.6 — relative error

Absolute differences are meaningless without a scale: $10^{-6}$ is tiny for gradients of size 100
and huge for gradients of size $10^{-7}$. Implement `rel_error(a, b)`, the largest entrywise
relative difference

$$ \max_i \frac{|a_i - b_i|}{\max(|a_i| + |b_i|,\ \text{tiny})}, $$

where *tiny* (use `np.finfo(np.float64).tiny`) only avoids $0/0$ where both entries are zero. Return
a Python float. In float64 a correct gradient typically gives $10^{-7}$ or less; $10^{-2}$ means a bug.
""")

nb.answer(
    "rel_error",
    '''
def rel_error(a, b):
    """Largest entrywise relative difference between two arrays of the same shape.

    Inputs:
    - a, b: arrays (or numbers) of the same shape S

    Returns:
    - float: max over entries of |a - b| / max(|a| + |b|, tiny), 0.0 for empty arrays
    """
    ### BEGIN SOLUTION
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return 0.0
    scale = np.maximum(np.abs(a) + np.abs(b), np.finfo(np.float64).tiny)
    return float(np.max(np.abs(a - b) / scale))
    ### END SOLUTION
''',
)

nb.tests(
    "rel_error",
    '''
a = np.array([1.0, -2.0, 0.0])
assert isinstance(rel_error(a, a), float) and rel_error(a, a) == 0.0, "equal arrays have relative error 0.0"
assert rel_error(a, a * (1 + 1e-8)) < 1e-7, "a change of one part in 1e8 is a relative error of about 5e-9"
assert rel_error(np.array([1e-9]), np.array([2e-9])) > 0.3, "the error must be relative, not absolute"
assert abs(rel_error(np.array([3.0]), np.array([1.0])) - rel_error(np.array([1.0]), np.array([3.0]))) < 1e-15, \\
    "rel_error should be symmetric"
''',
)

nb.md(r"""
### Gradient checks: numerical and autograd

With all three pieces in place, check `linear_backward` twice: against central differences of a
loss, and against PyTorch's autograd, both in float64. The loss $L = \sum Z \odot R$ for a fixed
random $R$ has upstream gradient exactly $G = R$.
""")

nb.code(
    r"""
rng = np.random.default_rng(42)
B, d_in, d_out = 7, 4, 3
X, W, b, R = rng.normal(size=(B, d_in)), rng.normal(size=(d_out, d_in)), rng.normal(size=d_out), rng.normal(size=(B, d_out))

try:
    dX, dW, db = linear_backward(R, X, W)
    checks = {
        "dW": (dW, numerical_gradient(lambda W_: np.sum((X @ W_.T + b) * R), W)),
        "dX": (dX, numerical_gradient(lambda X_: np.sum((X_ @ W.T + b) * R), X)),
        "db": (db, numerical_gradient(lambda b_: np.sum((X @ W.T + b_) * R), b)),
    }
    X_t, W_t, b_t = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (X, W, b))
    (torch.nn.functional.linear(X_t, W_t, b_t) * torch.tensor(R)).sum().backward()
    autograd = {"dX": X_t.grad.numpy(), "dW": W_t.grad.numpy(), "db": b_t.grad.numpy()}
    for name, (analytic, numeric) in checks.items():
        print(f"{name}: rel_error vs numerical {rel_error(analytic, numeric):.1e}, vs autograd {rel_error(analytic, autograd[name]):.1e}")
except NotImplementedError as error:
    print(f"finish tasks 3.4-3.6 first ({error})")
""",
    illustration=True,
)

nb.md(r"""
How small should $h$ be? Too large and the truncation error $O(h^2)$ dominates; too small and
floating-point **rounding** dominates, because $f(x + h) - f(x - h)$ subtracts two nearly equal
numbers, with an error of about $\varepsilon |f| / h$ ($\varepsilon \approx 2.2 \times 10^{-16}$ in
float64). The sweep below shows the resulting V shape for the derivative of $\sin$ at $x = 1$, whose
exact value $\cos 1$ is known; the difference quotients are written out directly, so the cell runs
before you finish Task 3.5.
""")

nb.code(
    r"""
steps = np.logspace(-14, -1, 40)
x0 = 1.0
errors = np.abs((np.sin(x0 + steps) - np.sin(x0 - steps)) / (2 * steps) - np.cos(x0))
one_sided = np.abs((np.sin(x0 + steps) - np.sin(x0)) / steps - np.cos(x0))

fig, ax = plt.subplots(figsize=(7, 4))
ax.loglog(steps, np.maximum(errors, 1e-17), "o-", color="#1f4e79", label="central difference")
ax.loglog(steps, np.maximum(one_sided, 1e-17), "s--", color="#e07a3f", label="one-sided difference")
ax.axvline(1e-5, color="#888888", linewidth=1)
ax.text(1.3e-5, 1e-3, "h = 1e-5", color="#555555")
ax.set_xlabel("step h")
ax.set_ylabel("absolute error of the derivative")
ax.set_title("rounding error (left) versus truncation error (right)")
ax.legend(frameon=False)
fig.tight_layout()
plt.show()
""",
    illustration=True,
)

nb.md(r"""
### Task 3.7 — the bias gradient (exercise 10)

Explain why $\partial L / \partial b$ **sums** $G$ over the observations of the batch, rather than
keeping one row per observation or averaging. What would go wrong with a gradient of shape
$B \times d_{out}$?
""")

nb.manual(
    "bias_grad_sum",
    answer=r"""
The bias has one entry per output unit, shape $(d_{out},)$, and the forward pass broadcasts the
same $b_j$ into column $j$ of every row of $Z$: $z_{ij} = \ldots + b_j$ for every observation $i$.
By the chain rule a parameter used several times receives the sum of the gradients of all its uses,
so $\partial L / \partial b_j = \sum_i G_{ij}$. A $B \times d_{out}$ "gradient" would treat the bias as
$B$ separate parameters, which it is not, and it would not match the shape of $b$ for the update
$b \leftarrow b - \eta\, \partial L / \partial b$. Averaging is also wrong here: if the loss is a mean
over the batch, the $1/B$ is already inside $G$.
""",
    scheme=r"""
- 0.5 point: the same bias (one per output unit) is broadcast/added to every observation's row.
- 0.5 point: a parameter used several times gets the sum of the gradients of its uses (chain rule / multivariable), giving shape (d_out,) like b; not one gradient per observation, and no extra averaging.
""",
)

nb.md(r"""
## Level 4 — Research and systems

**Backward costs twice the forward.** The forward product $X W^\top$ takes about $2 B d_{in} d_{out}$
floating-point operations. The backward pass needs two products of the same size, $G W$ and
$G^\top X$, so training a dense layer costs roughly three times its forward pass — the origin of the
common "6 × parameters × tokens" estimate for training compute (2 for forward, 4 for backward).

**Autograd keeps what the backward pass needs.** $\partial L / \partial W = G^\top X$ needs the input $X$,
so frameworks store each layer's input during the forward pass. These saved activations are the
memory term of assignment 2 that grows with the batch; activation checkpointing discards and
recomputes them.

**Gradient checking belongs in every custom layer's tests.** Run it in float64 on small, awkward
sizes (e.g. 7 × 3 rather than 4 × 4, so that a transposed product fails to even run), use the
relative error, and check every input and parameter. In float32 the best relative error a central
difference can reach is only around $10^{-4}$ to $10^{-3}$, which can hide real bugs.

### Common misconceptions

- *The bias gradient has one row per observation.* It sums over the batch and has the bias's shape.
- *$\partial L / \partial W = X^\top G$.* That has shape $d_{in} \times d_{out}$; with PyTorch's
  $(d_{out}, d_{in})$ orientation the gradient is $G^\top X$.
- *A small absolute difference proves a gradient correct.* Use a relative error, and float64.

### Summary

For $Z = X W^\top + b$ with upstream gradient $G$: $\partial L / \partial W = G^\top X$,
$\partial L / \partial X = G W$ and $\partial L / \partial b = \sum_i G_{i,:}$ — each gradient has the
shape of its variable. Central differences with a relative error in float64 are the standard check,
and autograd agrees.
""")

print(nb.save())
