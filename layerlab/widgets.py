"""Interactive views of a dense layer for the notebooks.

`forward_pass_explorer(W, b, x)` returns a widget with one slider per input. For every output
unit it shows the per-input products W[j, k] * x[k], their sum, the bias, the pre-activation
z[j] and ReLU(z[j]), and it updates as the sliders move. Without a live front end (a notebook
rendered on a website, or run headless) the same widget displays as a static HTML/text table of
its current state.
"""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np

POSITIVE, NEGATIVE, NEUTRAL = "#e07a3f", "#1f4e79", "#f2f2f2"
CELL = "padding:3px 10px;border:1px solid #d0d0d0"  # every header and data cell: numbers never touch


def layer_state(W, b, x) -> dict:
    """Every intermediate quantity of h = ReLU(W x + b) for one observation.

    Inputs:
    - W: weights, shape (d_out, d_in)
    - b: biases, shape (d_out,)
    - x: one input, shape (d_in,)

    Returns a dict of float64 arrays: "products" (d_out, d_in) with W[j, k] * x[k], "sums"
    (d_out,) the row sums of the products, "z" (d_out,) = sums + b, and "h" (d_out,) = ReLU(z).
    """
    W, b, x = _checked(W, b, x)
    products = W * x[np.newaxis, :]
    sums = products.sum(axis=1)
    z = sums + b
    return {"products": products, "sums": sums, "z": z, "h": np.maximum(z, 0.0)}


def _checked(W, b, x):
    W, b, x = (np.array(value, dtype=np.float64) for value in (W, b, x))
    if W.ndim != 2:
        raise ValueError(f"W should be a matrix of shape (d_out, d_in), got shape {W.shape}")
    if x.shape != (W.shape[1],):
        raise ValueError(
            f"x should have shape ({W.shape[1]},) to match W's {W.shape[1]} columns, got {x.shape}"
        )
    if b.shape != (W.shape[0],):
        raise ValueError(f"b should have shape ({W.shape[0]},) to match W's {W.shape[0]} rows, got {b.shape}")
    if not all(np.all(np.isfinite(value)) for value in (W, b, x)):
        raise ValueError("W, b and x must contain only finite numbers")
    return W, b, x


def _number(value: float) -> str:
    return f"{value:+.3g}" if value != 0 else "0"


def state_text(state: dict) -> str:
    """A plain-text table of `layer_state(...)`: one row per output unit."""
    products = state["products"]
    d_in = products.shape[1]
    header = [f"W[j,{k + 1}]*x{k + 1}" for k in range(d_in)] + ["sum", "bias", "z", "ReLU(z)"]
    rows = []
    for j in range(products.shape[0]):
        bias = state["z"][j] - state["sums"][j]
        cells = [_number(v) for v in products[j]] + [
            _number(state["sums"][j]),
            _number(bias),
            _number(state["z"][j]),
            _number(state["h"][j]),
        ]
        rows.append([f"unit {j + 1}"] + cells)
    table = [[""] + header] + rows
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in table)


def _shade(value: float, scale: float) -> str:
    if value == 0 or scale == 0:
        return NEUTRAL
    colour = POSITIVE if value > 0 else NEGATIVE
    alpha = int(40 + 160 * min(abs(value) / scale, 1.0))
    return f"{colour}{alpha:02x}"


def state_html(state: dict, x=None) -> str:
    """An HTML table of `layer_state(...)`, products shaded by sign and size."""
    products = state["products"]
    scale = float(np.max(np.abs(products))) if products.size else 1.0
    d_in = products.shape[1]
    inputs = "" if x is None else ", ".join(f"x{k + 1} = {_number(v)}" for k, v in enumerate(x))
    head = "".join(f'<th style="{CELL}">W[j,{k + 1}]&middot;x{k + 1}</th>' for k in range(d_in))
    head += "".join(f'<th style="{CELL}">{name}</th>' for name in ("sum", "+ bias", "= z", "ReLU(z)"))
    body = []
    for j in range(products.shape[0]):
        bias = state["z"][j] - state["sums"][j]
        cells = "".join(
            f'<td style="{CELL};background:{_shade(v, scale)};text-align:right">{_number(v)}</td>'
            for v in products[j]
        )
        relu_style = "font-weight:bold" if state["h"][j] > 0 else "color:#888"
        cells += (
            f'<td style="{CELL};text-align:right">{_number(state["sums"][j])}</td>'
            f'<td style="{CELL};text-align:right">{_number(bias)}</td>'
            f'<td style="{CELL};text-align:right">{_number(state["z"][j])}</td>'
            f'<td style="{CELL};text-align:right;{relu_style}">{_number(state["h"][j])}</td>'
        )
        body.append(f'<tr><th style="{CELL}">unit {j + 1}</th>{cells}</tr>')
    caption = f"<caption>{html.escape(inputs)}</caption>" if inputs else ""
    return (
        f'<table style="border-collapse:collapse;font-family:monospace">{caption}'
        f'<tr><th style="{CELL}"></th>{head}</tr>' + "".join(body) + "</table>"
    )


class ForwardPassExplorer(widgets.VBox):
    """Sliders for the inputs of one dense layer plus a live table of its forward pass."""

    def __init__(self, W, b, x, limit: float, step: float):
        self.W, self.b, _ = _checked(W, b, x)
        self.sliders = [
            widgets.FloatSlider(
                value=float(value),
                min=-limit,
                max=limit,
                step=step,
                description=f"x{k + 1}",
                continuous_update=True,
            )
            for k, value in enumerate(np.asarray(x, dtype=np.float64))
        ]
        self.table = widgets.HTML()
        rows = [widgets.HBox(self.sliders[i : i + 4]) for i in range(0, len(self.sliders), 4)]
        super().__init__(rows + [self.table])
        for slider in self.sliders:
            slider.observe(self.refresh, names="value")
        self.refresh()

    def inputs(self) -> np.ndarray:
        """The current input vector, shape (d_in,)."""
        return np.array([slider.value for slider in self.sliders], dtype=np.float64)

    def state(self) -> dict:
        """`layer_state` at the current slider values."""
        return layer_state(self.W, self.b, self.inputs())

    def refresh(self, _change=None) -> None:
        self.table.value = state_html(self.state(), self.inputs())

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = state_text(self.state())
        bundle["text/html"] = state_html(self.state(), self.inputs())
        return bundle


def forward_pass_explorer(
    W, b, x, slider_range: float | None = None, step: float = 0.25
) -> ForwardPassExplorer:
    """A widget that shows one dense layer's forward pass as its inputs change.

    Inputs:
    - W: weights, shape (d_out, d_in), one row per output unit (PyTorch orientation)
    - b: biases, shape (d_out,)
    - x: starting input, shape (d_in,); each entry gets a slider
    - slider_range: sliders span [-slider_range, slider_range]; default max(5, 2 * max|x|); it
      must cover every entry of x
    - step: slider step, > 0

    Returns a `ForwardPassExplorer` (an ipywidgets VBox); `.state()` gives the current
    `layer_state`, and without a live front end it displays as an HTML/text table.
    """
    _, _, x = _checked(W, b, x)
    widest = float(np.max(np.abs(x), initial=0.0))
    limit = max(5.0, 2.0 * widest) if slider_range is None else float(slider_range)
    if not (np.isfinite(limit) and limit >= widest and limit > 0):
        raise ValueError(
            f"slider_range should be a positive number covering the starting x (max |x| = {widest:g}), "
            f"got {slider_range!r}"
        )
    if not (np.isfinite(step) and 0 < step <= limit):
        raise ValueError(
            f"step should be a positive number no larger than the slider range {limit:g}, got {step!r}"
        )
    return ForwardPassExplorer(W, b, x, limit, step)
