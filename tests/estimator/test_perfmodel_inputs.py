"""The estimator's public entry points refuse nonsense arguments, naming the argument."""

from __future__ import annotations

import numpy as np
import pytest

from arena_gym.cluster import PRESETS
from arena_gym.types import GpuType, Grid, ModelRef, ResourceShape
from estimator.perfmodel import MAX_GLOBAL_BATCH, EstimatorPerfModel, check_batch
from traces.table import MAX_BATCH

GPT = ModelRef("gpt", "1.3B")
SHAPE = ResourceShape(GpuType("a40"), 1, 2)


@pytest.fixture(scope="module")
def perf() -> EstimatorPerfModel:
    return EstimatorPerfModel(PRESETS["tiny"])


@pytest.mark.parametrize("method", ["iter_time", "dp_iter_time", "proxy_plan", "dp_estimate"])
@pytest.mark.parametrize(
    "batch, error, message",
    [
        (1.5, TypeError, "global_batch must be an integer, got 1.5"),
        (128.0, TypeError, "global_batch must be an integer, got 128.0"),
        ("128", TypeError, "global_batch must be an integer, got '128'"),
        (True, TypeError, "global_batch must be an integer, got True"),
        (0, ValueError, "global_batch must be in 1..16777216, got 0"),
        (-3, ValueError, "global_batch must be in 1..16777216, got -3"),
        (2**63, ValueError, "global_batch must be in 1..16777216"),
    ],
)
def test_bad_batch_names_the_argument(perf, method, batch, error, message):
    with pytest.raises(error, match=message.replace(".", r"\.").replace("(", r"\(")):
        getattr(perf, method)(GPT, batch, SHAPE)


@pytest.mark.parametrize(
    "args, error, name",
    [
        (("gpt__1.3B", 128, SHAPE), TypeError, "model must be a ModelRef"),
        ((GPT, 128, "a40:1x2"), TypeError, "shape must be a ResourceShape"),
        ((GPT, 128, None), TypeError, "shape must be a ResourceShape"),
        ((ModelRef("gpt", "9Z"), 128, SHAPE), ValueError, "unknown model"),
        ((GPT, 128, ResourceShape(GpuType("zz"), 1, 2)), ValueError, "unknown GPU type 'zz'"),
    ],
)
def test_bad_model_or_shape(perf, args, error, name):
    with pytest.raises(error, match=name):
        perf.iter_time(*args)


def test_grid_entry_points_check_the_grid(perf):
    with pytest.raises(TypeError, match="grid must be a Grid"):
        perf.grid_iter_time(GPT, 128, SHAPE)
    with pytest.raises(TypeError, match="grid must be a Grid"):
        perf.plan_grid(GPT, 128, (SHAPE, 1))
    with pytest.raises(TypeError, match="global_batch must be an integer"):
        perf.grid_plan(GPT, 2.5, Grid(SHAPE, 1))
    with pytest.raises(TypeError, match="gpu_type must be a str"):
        perf.table(GPT, 128, 40)


def test_numpy_integers_are_integers(perf):
    assert perf.iter_time(GPT, np.int64(128), SHAPE) == perf.iter_time(GPT, 128, SHAPE)
    assert check_batch(np.int32(7)) == 7 and type(check_batch(np.int32(7))) is int


def test_trace_and_estimator_agree_on_the_batch_range():
    assert MAX_GLOBAL_BATCH == MAX_BATCH
