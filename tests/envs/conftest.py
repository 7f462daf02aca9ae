"""Fixtures for the env tests: a fast table performance model covering every preset's GPU types."""

from __future__ import annotations

import math

import pytest

from arena_gym.types import ModelRef
from tests.helpers import table_model
from traces.recipe import family_batches, family_sizes

#: GPU memory (GB) and relative slowness of the preset clusters' types.
TYPES = {"a100": (40.0, 0.7), "v100": (32.0, 1.2), "a40": (48.0, 1.0), "a10": (24.0, 1.6)}


def _params_b(size: str) -> float:
    return float(size[:-1]) / (1000.0 if size.endswith("M") else 1.0)


def env_perf_model():
    """Three sizes per family, all recipe batches, every type and count up to 16 at every locality.

    Time = (0.5 x params_B + 0.2) x batch / 128 / n^0.85 x type factor, slowed 1/0.9 per
    halving of GPUs per node; out of memory (inf) when 16 GB per billion parameters split over
    n GPUs exceeds the type's memory, so large models need several GPUs and masks matter.
    """
    times = {}
    for family, sizes in family_sizes().items():
        for size in sizes[:3]:
            model, params = ModelRef(family, size), _params_b(size)
            for batch in family_batches()[family]:
                for gpu_type, (memory, factor) in TYPES.items():
                    cap = 16 if gpu_type == "v100" else 4 if gpu_type == "a100" else 2
                    for n in (1, 2, 4, 8, 16):
                        oom = 16.0 * params / n > memory
                        base = (0.5 * params + 0.2) * batch / 128 / n**0.85 * factor
                        per, halvings = min(n, cap), 0
                        while per >= 1:
                            times[(model, batch, gpu_type, n // per, per)] = math.inf if oom else base / 0.9**halvings
                            per //= 2
                            halvings += 1
    return table_model(times)


@pytest.fixture(scope="session")
def perf():
    """The fast table model shared by the env tests."""
    return env_perf_model()
