"""Performance-model specs refuse nonsense with one-line errors (noise overflow, empty paths)."""

from __future__ import annotations

import math

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.perf import MAX_SIGMA, NoisyPerfModel
from arena_gym.registry import make_perf
from arena_gym.types import MAX_TIME_S, GpuType, JobSpec, ModelRef, ResourceShape
from tests.helpers import GPT, table_model

BASE = table_model({(GPT, 128, "a40", 1, 2): 5.0})
SHAPE = ResourceShape(GpuType("a40"), 1, 2)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("noisy:1e9", r"noisy:SIGMA needs 0 <= SIGMA <= 10, got '1e9'"),
        ("noisy:-1", r"noisy:SIGMA needs 0 <= SIGMA <= 10"),
        ("noisy:nan", r"noisy:SIGMA needs 0 <= SIGMA <= 10, got 'nan'"),
        ("noisy:", r"performance model spec 'noisy:' needs an argument after 'noisy:'"),
        ("measured:", r"performance model spec 'measured:' needs an argument after 'measured:'"),
        ("measured:  ", r"needs an argument after 'measured:'"),
    ],
)
def test_bad_perf_specs_are_one_line_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        make_perf(spec, PRESETS["tiny"], truth=BASE)


def test_sigma_range_is_checked_by_the_model_too():
    with pytest.raises(ValueError, match="noise sigma must be in 0..10, got inf"):
        NoisyPerfModel(BASE, math.inf)


def test_largest_noise_stays_finite_and_positive():
    times = [NoisyPerfModel(BASE, MAX_SIGMA, seed=s).iter_time(GPT, 128, SHAPE) for s in range(300)]
    assert all(math.isfinite(t) and t > 0 for t in times)
    assert max(times) / min(times) > 1e6  # the noise is really that wide


def test_a_submit_time_beyond_2_40_s_is_refused_where_seconds_would_lose_precision() -> None:
    model = ModelRef("gpt", "1.3B")
    assert JobSpec("j", model, 32, 10, MAX_TIME_S).submit_time == 2.0**40
    # a quarter second survives at 2**40 s; at 1e18 s a 35.3 s job length is rounded to the 128 s grid
    assert (MAX_TIME_S + 0.25) - MAX_TIME_S == 0.25 and (1e18 + 35.3) - 1e18 == 0.0
    for bad in (1e18, MAX_TIME_S * 2, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^job j: submit time must be in 0\.\.1099511627776 s"):
            JobSpec("j", model, 32, 10, bad)
