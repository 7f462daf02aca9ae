"""Performance-model specs refuse nonsense with one-line errors (noise overflow, empty paths)."""

from __future__ import annotations

import math

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.perf import MAX_SIGMA, NoisyPerfModel
from arena_gym.registry import make_perf
from arena_gym.types import GpuType, ResourceShape
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
