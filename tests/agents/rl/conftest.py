"""Shared fixtures: a fast Tiny env setting and one thread for torch."""

from __future__ import annotations

from typing import Any

import pytest
import torch

torch.set_num_threads(1)

ENV_ID = "ArenaGym/Tiny-v1"
#: Small workloads (8 short jobs) on the Tiny cluster: an episode is a few dozen steps.
TRACE = "synthetic:n_jobs=8,arrival=poisson,rate_per_h=6,gpu_types=a40+a10,max_gpus=4,iter_log_mean=6.5"
PERF = "estimator"


@pytest.fixture(scope="session")
def env_overrides() -> dict[str, Any]:
    """EnvConfig overrides of the Tiny env used by these tests."""
    return {"trace": TRACE, "perf": PERF}
