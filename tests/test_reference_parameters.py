"""The reference for assignment 02 reproduces every count in the course material."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.reference.parameters import (
    OPTIMIZER_BUFFERS,
    count_parameters,
    layer_parameters,
    output_activations,
    training_memory_bytes,
)
from grader.reference.shapes import layer_shapes


def torch_count(*widths: int) -> int:
    layers = [torch.nn.Linear(d_in, d_out) for d_in, d_out in zip(widths[:-1], widths[1:])]
    return sum(p.numel() for layer in layers for p in layer.parameters())


@pytest.mark.parametrize(
    "d_in, d_out, expected",
    [
        (4, 6, 30),
        (3, 3, 12),
        (3, 1, 4),
        (3, 2, 8),
        (512, 2048, 1_050_624),
        (768, 3072, 2_362_368),
        (784, 256, 200_960),
        (1024, 4096, 4_198_400),
        (1, 1, 2),
    ],
)
def test_layer_parameters_of_the_course(d_in, d_out, expected):
    assert layer_parameters(d_in, d_out) == expected
    assert layer_parameters(d_in, d_out, bias=False) == expected - d_out


@pytest.mark.parametrize(
    "widths, per_layer, total",
    [
        ([3, 3, 1], [12, 4], 16),
        ([4, 6], [30], 30),
        ([10, 20, 5, 1], [220, 105, 6], 331),
        ([512, 2048, 512], [1_050_624, 1_049_088], 2_099_712),
        ([64, 32, 32, 32, 10], [2080, 1056, 1056, 330], 4522),
        ([64, 512, 10], [33_280, 5130], 38_410),
        ([64, 4, 10], [260, 50], 310),
        ([3, 4, 3], [16, 15], 31),
        ([784, 256, 10], [200_960, 2570], 203_530),
    ],
)
def test_count_parameters_of_the_course(widths, per_layer, total):
    counts = count_parameters(widths)
    assert counts == per_layer and sum(counts) == total
    assert all(type(count) is int for count in counts)


def test_eight_layers_of_1024_hold_8_396_800_parameters():
    assert sum(count_parameters([1024] * 9)) == 8_396_800


def test_robot_arm_layer_holds_16_parameters():
    assert layer_parameters(3, 4) == 16


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([1, 2, 7, 13, 73]), min_size=2, max_size=6), st.booleans())
def test_count_parameters_matches_torch(widths, bias):
    layers = [torch.nn.Linear(d_in, d_out, bias=bias) for d_in, d_out in zip(widths[:-1], widths[1:])]
    assert count_parameters(widths, bias) == [sum(p.numel() for p in layer.parameters()) for layer in layers]
    shapes = [layer_shapes(d_in, d_out) for d_in, d_out in zip(widths[:-1], widths[1:])]
    expected = [math.prod(s["W"]) + (math.prod(s["b"]) if bias else 0) for s in shapes]
    assert count_parameters(widths, bias) == expected


def test_linear_768_to_3072_count_and_default_init_scale():
    assert torch_count(768, 3072) == layer_parameters(768, 3072) == 2_362_368
    torch.manual_seed(0)
    std = torch.nn.Linear(768, 3072).weight.std().item()
    assert std == pytest.approx(1 / math.sqrt(3 * 768), rel=0.01)
    assert std == pytest.approx(0.0208, abs=5e-4)


def test_output_activations_of_exercise_11():
    assert output_activations(64, 4096) == 262_144
    assert layer_parameters(1024, 4096) == 4_198_400
    assert output_activations(128, 8192) == 1_048_576
    assert output_activations(1, 1) == 1


def test_training_memory_of_seed_002_is_four_times_the_weights_under_adam():
    n_params = layer_parameters(784, 256)
    assert n_params == 200_960
    assert training_memory_bytes(n_params) == 4 * n_params * 4 == 3_215_360
    assert training_memory_bytes(n_params, 4, "adam") == 4 * training_memory_bytes(n_params, 4, "sgd") // 2
    assert training_memory_bytes(n_params, 4, "momentum") == 3 * n_params * 4
    assert training_memory_bytes(n_params, 2, "sgd") == 2 * n_params * 2
    assert OPTIMIZER_BUFFERS == {"sgd": 0, "momentum": 1, "adam": 2}


def test_training_memory_matches_torch_optimizer_state():
    layer = torch.nn.Linear(7, 73)
    optimizer = torch.optim.Adam(layer.parameters())
    layer(torch.ones(2, 7)).sum().backward()
    optimizer.step()
    values = sum(p.numel() + p.grad.numel() for p in layer.parameters())
    values += sum(t.numel() for state in optimizer.state.values() for t in state.values() if t.dim() > 0)
    n_params = layer_parameters(7, 73)
    assert training_memory_bytes(n_params, 4, "adam") == values * 4


def test_unknown_optimizer_lists_the_known_ones():
    with pytest.raises(ValueError, match="'sgd', 'momentum', 'adam'"):
        training_memory_bytes(100, 4, "adagrad")


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: layer_parameters(0, 3), "d_in"),
        (lambda: layer_parameters(3, 2.0), "d_out"),
        (lambda: layer_parameters(3, 2, bias=1), "bias"),
        (lambda: count_parameters([5]), "at least two"),
        (lambda: count_parameters([5, -1]), r"widths\[1\]"),
        (lambda: count_parameters(7), "widths"),
        (lambda: output_activations(0, 4), "batch"),
        (lambda: training_memory_bytes(-5), "n_params"),
        (lambda: training_memory_bytes(5, 0), "bytes_per_value"),
        (lambda: training_memory_bytes(5, 4, ["adam"]), "unknown optimizer"),
    ],
)
def test_bad_arguments_are_named(call, name):
    with pytest.raises(ValueError, match=name):
        call()
