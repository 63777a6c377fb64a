"""Tensor parallelism on real gloo processes: layerlab.distributed and grader.checks.distributed."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grader.codec import TensorData, Unsupported
from grader.checks.distributed import verify_split_on_processes
from grader.misconceptions import MISCONCEPTIONS
from grader.reference.tensor_parallel import split_input_columns, split_output_rows
from layerlab import distributed as tp


def layer(batch: int, d_in: int, d_out: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return (
        rng.normal(size=(batch, d_in)),
        rng.normal(size=(d_out, d_in)),
        rng.normal(size=d_out),
        rng.normal(size=(batch, d_out)),
    )


def single_process(X, W, b, G) -> dict[str, np.ndarray]:
    """Forward and backward of one unsplit layer in float64 with torch autograd."""
    X_t, W_t, b_t = (torch.tensor(a, requires_grad=True) for a in (X, W, b))
    Z = X_t @ W_t.T + b_t
    (Z * torch.tensor(G)).sum().backward()
    return {"Z": Z.detach().numpy(), "dX": X_t.grad.numpy(), "dW": W_t.grad.numpy(), "db": b_t.grad.numpy()}


def assert_matches(run: tp.TensorParallelRun, expected: dict) -> None:
    for name, value in expected.items():
        got = getattr(run, name)
        assert got.shape == value.shape, f"{name}: shape {got.shape} != {value.shape}"
        np.testing.assert_allclose(got, value, rtol=1e-12, atol=1e-12, err_msg=name)


# ---- real processes reproduce the single-process layer ----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("kind", ["column", "row"])
def test_split_layer_on_processes_matches_single_process(kind, world_size):
    X, W, b, G = layer(5, 7, 11)  # 11 rows and 7 columns split unevenly over 2 and 3 ranks
    shards = split_output_rows(W, b, world_size) if kind == "column" else split_input_columns(W, world_size)
    run = tp.tensor_parallel_on_processes(kind, shards, X, b=None if kind == "column" else b, upstream=G)
    assert_matches(run, single_process(X, W, b, G))
    axis = 0 if kind == "column" else 1
    assert [shape[axis] for shape in run.weight_shapes] == [
        len(part) for part in np.array_split(np.arange(W.shape[axis]), world_size)
    ]
    for rank_Z, rank_dX in zip(run.rank_Z, run.rank_dX):  # replicated on every rank after the collective
        np.testing.assert_allclose(rank_Z, run.Z, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(rank_dX, run.dX, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.sampled_from([1, 3, 7]),
    d_in=st.integers(3, 9),
    d_out=st.integers(3, 9),
    world_size=st.sampled_from([2, 3]),
    kind=st.sampled_from(["column", "row"]),
)
def test_verify_accepts_correct_splits(batch, d_in, d_out, world_size, kind):
    X, W, b, _ = layer(batch, d_in, d_out, seed=batch * 100 + d_in * 10 + d_out)
    shards = split_output_rows(W, b, world_size) if kind == "column" else split_input_columns(W, world_size)
    result = verify_split_on_processes(kind, shards, X, W, b, world_size)
    assert result.ok and result.ran and not result.misconceptions, result.feedback
    assert set(result.max_errors) == {"Z", "dX", "dW", "db"} and max(result.max_errors.values()) < 1e-10


@pytest.mark.slow
def test_verify_accepts_decoded_tensor_shards():
    X, W, b, _ = layer(4, 6, 5)
    shards = [(TensorData(W_i, "float64"), b_i.tolist()) for W_i, b_i in split_output_rows(W, b, 2)]
    result = verify_split_on_processes("split_output_rows", shards, X, W, b, 2)
    assert result.ok, result.feedback


# ---- wrong splits are caught on real processes with the matching code -------------------------


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 3])
def test_bias_on_every_rank_is_caught(world_size):
    X, W, b, _ = layer(4, 7, 5)
    shards = [(W_i, b) for W_i in split_input_columns(W, world_size)]
    result = verify_split_on_processes("row", shards, X, W, b, world_size)
    assert not result.ok and result.ran
    assert result.misconceptions == ("bias-added-per-shard",)
    assert "once" in result.feedback


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("kind", ["column", "row"])
def test_no_reduction_is_caught(kind, world_size):
    X, W, b, _ = layer(3, 7, 8)
    shards = split_output_rows(W, b, world_size) if kind == "column" else split_input_columns(W, world_size)
    result = verify_split_on_processes(kind, shards, X, W, b, world_size, combine="none")
    assert not result.ok and result.ran
    assert result.misconceptions == ("split-needs-no-communication",)


@pytest.mark.slow
@pytest.mark.parametrize("kind,wrong", [("column", "all_reduce"), ("row", "all_gather")])
def test_wrong_collective_is_caught(kind, wrong):
    X, W, b, _ = layer(3, 6, 6)
    shards = split_output_rows(W, b, 2) if kind == "column" else split_input_columns(W, 2)
    result = verify_split_on_processes(kind, shards, X, W, b, 2, combine=wrong)
    assert not result.ok and result.misconceptions == ("split-needs-no-communication",)


@pytest.mark.slow
@pytest.mark.parametrize("world_size", [2, 3])
@pytest.mark.parametrize("kind", ["column", "row"])
def test_transposed_square_split_runs_and_is_caught(kind, world_size):
    X, W, b, _ = layer(4, 7, 7)  # square: blocks of W.T have the right shapes but the wrong numbers
    shards = (
        [
            (W_i, b_i)
            for (W_i, _), b_i in zip(split_output_rows(W.T, b, world_size), np.array_split(b, world_size))
        ]
        if kind == "column"
        else split_input_columns(W.T, world_size)
    )
    result = verify_split_on_processes(kind, shards, X, W, b, world_size)
    assert not result.ok and result.ran
    assert result.misconceptions == ("weight-rows-are-inputs",)


@pytest.mark.parametrize("kind", ["column", "row"])
def test_wrong_axis_of_a_rectangular_weight_is_caught_by_shape(kind):
    X, W, b, _ = layer(3, 5, 8)
    shards = (
        [(W_i, b_i) for W_i, b_i in zip(split_input_columns(W, 2), np.array_split(b, 2))]
        if kind == "column"
        else [W_i for W_i, _ in split_output_rows(W, b, 2)]
    )
    result = verify_split_on_processes(kind, shards, X, W, b, 2)
    assert not result.ok and not result.ran
    assert result.misconceptions == ("weight-rows-are-inputs",)


@pytest.mark.parametrize(
    "shards",
    [
        None,
        Unsupported("builtins.generator"),
        [[1.0, 2.0]],
        "W",
        [np.ones((2, 3)), np.ones((2, 3)), np.ones((2, 3))],
        [(np.full((2, 4), np.nan), np.zeros(2)), (np.ones((2, 4)), np.zeros(2))],
        [(np.ones((2, 4)), None), (np.ones((2, 4)), np.zeros(2))],
        [[[1.0, 2.0], [3.0]], [[1.0], [2.0]]],
        [([[True] * 4] * 2, [1.0, 1.0]), (np.ones((2, 4)), np.zeros(2))],
    ],
)
def test_malformed_shards_get_feedback_without_processes(shards):
    X, W, b, _ = layer(2, 4, 4)
    result = verify_split_on_processes("column", shards, X, W, b, 2)
    assert not result.ok and not result.ran
    assert result.feedback.startswith("The shards could not be run: ") and not result.feedback.endswith("..")
    assert all(code in MISCONCEPTIONS for code in result.misconceptions)


def test_verify_rejects_bad_arguments_from_the_check():
    X, W, b, _ = layer(2, 4, 4)
    with pytest.raises(ValueError, match="kind"):
        verify_split_on_processes("diagonal", [], X, W, b, 2)
    with pytest.raises(ValueError, match="world_size"):
        verify_split_on_processes("row", [], X, W, b, 0)


# ---- the process runner never hangs and never shares a rendezvous ------------------------------


def _sleep_forever(rank, world_size):
    time.sleep(3600)


def _fail_on_rank_one(rank, world_size):
    if rank == 1:
        raise RuntimeError("deliberate failure")
    return rank


def _all_reduce_rank(rank, world_size, value):
    tensor = torch.tensor([float(value + rank)])
    torch.distributed.all_reduce(tensor)
    return float(tensor.item())


@pytest.mark.slow
def test_timeout_kills_every_rank():
    with pytest.raises(tp.DistributedTimeout):
        tp.run_on_processes(_sleep_forever, 2, timeout=3)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("rank-")]


@pytest.mark.slow
def test_a_failing_rank_is_reported_with_its_number():
    with pytest.raises(tp.DistributedRunError, match="rank 1 failed: RuntimeError: deliberate failure"):
        tp.run_on_processes(_fail_on_rank_one, 2, timeout=30)


@pytest.mark.slow
def test_a_rank_dying_at_exit_after_reporting_is_tolerated(monkeypatch):
    # Forked ranks inherit the patch: each one kills itself instead of exiting cleanly,
    # like gloo's occasional abort in its destructors once the work is done.
    monkeypatch.setattr(os, "_exit", lambda code: os.kill(os.getpid(), signal.SIGKILL))
    assert tp.run_on_processes(_all_reduce_rank, 2, (1,), timeout=30, start_method="fork") == [3.0, 3.0]


@pytest.mark.slow
def test_a_single_rank_runs_without_peers():
    X, W, b, G = layer(3, 4, 5)
    run = tp.tensor_parallel_on_processes("row", [W], X, b=b, upstream=G)
    assert_matches(run, single_process(X, W, b, G))


@pytest.mark.slow
def test_functions_defined_in_a_notebook_work():
    namespace = {}
    exec(
        textwrap.dedent("""
        import torch
        def notebook_worker(rank, world_size):
            value = torch.tensor([rank + 1.0])
            torch.distributed.all_reduce(value)
            return value.item()
    """),
        namespace,
    )  # a function with no importable module, as in a Jupyter kernel
    assert tp.run_on_processes(namespace["notebook_worker"], 3) == [6.0, 6.0, 6.0]


@pytest.mark.slow
def test_concurrent_runs_never_clash():
    script = textwrap.dedent("""
        import sys
        from layerlab.distributed import run_on_processes
        from tests.test_distributed import _all_reduce_rank
        offset = int(sys.argv[1])
        for world_size in (2, 3, 2):
            got = run_on_processes(_all_reduce_rank, world_size, (offset,), timeout=60)
            assert got == [float(world_size * offset + world_size * (world_size - 1) // 2)] * world_size, got
        print("ok")
    """)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(offset)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        for offset in (10, 20)
    ]
    try:
        outputs = [child.communicate(timeout=120) for child in children]
    finally:
        for child in children:
            child.kill()
    for child, (out, err) in zip(children, outputs):
        assert child.returncode == 0 and out.strip() == "ok", err[-2000:]


def _return_tensor_or_function(rank, world_size):
    return torch.full((2,), float(rank)) if rank == 0 else (lambda: rank)


def _exit_hard_on_rank_zero(rank, world_size):
    if rank == 0:
        os._exit(3)
    torch.distributed.all_reduce(torch.zeros(1))
    return rank


@pytest.mark.slow
def test_results_come_back_by_value_and_unpicklable_ones_are_named():
    assert torch.equal(tp.run_on_processes(_return_tensor_or_function, 1)[0], torch.zeros(2))
    with pytest.raises(
        tp.DistributedRunError, match="rank 1 failed: TypeError: the worker returned function"
    ):
        tp.run_on_processes(_return_tensor_or_function, 2, timeout=30)


@pytest.mark.slow
def test_a_rank_that_crashes_is_named_before_the_peer_it_broke():
    with pytest.raises(tp.DistributedRunError, match="rank-0 exited with code 3"):
        tp.run_on_processes(_exit_hard_on_rank_zero, 2, timeout=30)


@pytest.mark.parametrize(
    "kind,shards,X,options,message",
    [
        ("row", [], np.ones((2, 3)), {}, "got an empty list"),
        ("row", [np.ones((4, 3))], np.ones(3), {}, r"X should be 2-D \(B, d_in\), but has shape \(3,\)"),
        (
            "row",
            [np.ones((4, 2)), np.ones((4, 2))],
            np.ones((2, 3)),
            {},
            "columns adding up to X's 3 input features",
        ),
        ("row", [np.ones((4, 1)), np.ones((3, 2))], np.ones((2, 3)), {}, "the same number of output rows"),
        ("row", [[[1.0], [1.0, 2.0]]], np.ones((2, 1)), {}, "shard 0 is not made of rectangular arrays"),
        ("row", [np.ones((4, 3))], np.ones((2, 3)), {"b": np.ones(3)}, r"b should have shape \(4,\)"),
        (
            "row",
            [np.ones((4, 3))],
            np.ones((2, 3)),
            {"upstream": np.ones((4, 2))},
            r"upstream should have shape \(2, 4\)",
        ),
        ("column", [np.ones((4, 2))], np.ones((2, 3)), {}, r"shard 0's weight has shape \(4, 2\).*3 columns"),
        (
            "column",
            [(np.ones((4, 3)), np.ones(3))],
            np.ones((2, 3)),
            {},
            r"shard 0's bias should have shape \(4,\)",
        ),
        (
            "column",
            [(np.ones((2, 3)), np.ones(2)), (np.ones((1, 3)), np.ones(1))],
            np.ones((2, 3)),
            {"combine": "all_reduce"},
            r"shards have \[2, 1\] rows",
        ),
    ],
)
def test_split_shapes_that_do_not_fit_are_refused_before_any_process_starts(
    kind, shards, X, options, message
):
    with pytest.raises(ValueError, match=message):
        tp.tensor_parallel_on_processes(kind, shards, X, **options)


def test_uneven_blocks_summed_by_a_modelled_all_reduce_are_the_communication_misconception():
    X, W, b, _ = layer(3, 5, 7)
    result = verify_split_on_processes("column", split_output_rows(W, b, 2), X, W, b, 2, combine="all_reduce")
    assert not result.ok and not result.ran and result.infrastructure_error is None
    assert result.misconceptions == ("split-needs-no-communication",) and "all_gather" in result.feedback


def test_run_on_processes_rejects_bad_arguments():
    with pytest.raises(ValueError, match="world_size"):
        tp.run_on_processes(_all_reduce_rank, 0)
    for timeout in (0, None, float("nan")):
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
            tp.run_on_processes(_all_reduce_rank, 2, (0,), timeout=timeout)
    with pytest.raises(ValueError, match="kind"):
        tp.tensor_parallel_on_processes("diagonal", [], np.zeros((1, 1)))


# ---- DTensor gives the same numbers and per-rank shapes ---------------------------------------


def _dtensor_rank(rank, world_size, state, X):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    block = torch.nn.Sequential(
        torch.nn.Linear(*state["0.weight"].shape[::-1]),
        torch.nn.ReLU(),
        torch.nn.Linear(*state["2.weight"].shape[::-1]),
    ).double()
    block.load_state_dict({key: torch.tensor(value) for key, value in state.items()})
    block = parallelize_module(
        block, init_device_mesh("cpu", (world_size,)), {"0": ColwiseParallel(), "2": RowwiseParallel()}
    )
    X_t = torch.tensor(X, requires_grad=True)
    Z = block(X_t)
    Z = Z.full_tensor() if hasattr(Z, "full_tensor") else Z
    Z.sum().backward()
    return {
        "Z": Z.detach().numpy(),
        "dX": X_t.grad.numpy(),
        "shapes": {name: tuple(p.to_local().shape) for name, p in block.named_parameters()},
    }


@pytest.mark.slow
def test_dtensor_colwise_rowwise_matches_the_split():
    try:
        import torch.distributed.tensor.parallel  # noqa: F401
    except ImportError as error:
        pytest.skip(f"torch.distributed.tensor.parallel is not available in this torch build: {error}")
    torch.manual_seed(0)
    block = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).double()
    state = {key: value.detach().numpy() for key, value in block.state_dict().items()}
    X = np.random.default_rng(3).normal(size=(4, 5))
    ranks = tp.run_on_processes(_dtensor_rank, 2, (state, X), timeout=120)
    X_t = torch.tensor(X, requires_grad=True)
    Z = block(X_t)
    Z.sum().backward()
    first, second = (
        split_output_rows(state["0.weight"], state["0.bias"], 2),
        split_input_columns(state["2.weight"], 2),
    )
    for rank, result in enumerate(ranks):
        np.testing.assert_allclose(result["Z"], Z.detach().numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(result["dX"], X_t.grad.numpy(), rtol=1e-12, atol=1e-12)
        assert result["shapes"]["0.weight"] == first[rank][0].shape
        assert result["shapes"]["0.bias"] == first[rank][1].shape
        assert result["shapes"]["2.weight"] == second[rank].shape


# ---- measuring the collectives -----------------------------------------------------------------


def test_fit_alpha_beta_recovers_a_known_line():
    volumes = np.array([1e3, 1e4, 1e5, 1e6, 1e7])
    alpha, bandwidth = tp.fit_alpha_beta(volumes, 50e-6 + volumes / 2e9)
    assert alpha == pytest.approx(50e-6, rel=1e-6) and bandwidth == pytest.approx(2e9, rel=1e-6)
    assert tp.fit_alpha_beta(volumes, np.full(5, 1e-3))[1] == float("inf")
    noisy_alpha, noisy_bandwidth = tp.fit_alpha_beta(volumes, np.array([2e-4, 1e-4, 1e-4, 6e-4, 9e-3]))
    assert noisy_alpha >= 0 and 0 < noisy_bandwidth < float("inf")  # latency never fitted below zero


@pytest.mark.parametrize(
    "volumes,seconds,message",
    [
        ([], [], "at least 2"),
        ([1e3], [1e-3], "at least 2"),
        ([1e3, 1e4, 1e5], [1e-3, 2e-3], "same length"),
        ([1e3, 1e4], [0.0, 1e-3], "seconds finite and > 0"),
        ([1e3, np.nan], [1e-3, 1e-3], "volumes should be finite"),
    ],
)
def test_fit_alpha_beta_refuses_points_it_cannot_fit(volumes, seconds, message):
    with pytest.raises(ValueError, match=message):
        tp.fit_alpha_beta(volumes, seconds)


@pytest.mark.parametrize("options", [{"sizes": []}, {"sizes": [0]}, {"repeat": 0}, {"warmup": -1}])
def test_time_collectives_refuses_bad_arguments_before_starting_processes(options):
    with pytest.raises(ValueError, match="time_collectives needs"):
        tp.time_collectives(**{"sizes": [1024], **options})


@pytest.mark.slow
def test_time_collectives_returns_positive_medians():
    timings = tp.time_collectives([1024, 65536], world_size=2, repeat=3, warmup=1)
    assert list(timings["sizes"]) == [1024, 65536]
    for name in ("all_gather", "all_reduce"):
        assert (
            timings[name].shape == (2,) and np.all(timings[name] > 0) and np.all(np.isfinite(timings[name]))
        )
