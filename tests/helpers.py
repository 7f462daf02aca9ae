"""Small builders shared by tests: a hand-written performance table and jobs."""

from __future__ import annotations

import math

from arena_gym.types import GpuType, JobId, JobSpec, ModelRef
from estimator.measured import MeasuredPerfModel, MeasuredTable

GPT = ModelRef("gpt", "1.3B")
MOE = ModelRef("moe", "2.4B")


def table_model(times: dict[tuple[ModelRef, int, str, int, int], float]) -> MeasuredPerfModel:
    """A PerfModel from ``{(model, batch, type, nodes, gpus_per_node): seconds}`` (inf = OOM)."""
    return MeasuredPerfModel(MeasuredTable({(m.family, m.size, b, t, n, g): s for (m, b, t, n, g), s in times.items()}))


def job(job_id: str, submit: float, iters: int, gpu_type: str, gpus: int, model: ModelRef = GPT,
        batch: int = 128, deadline: float | None = None) -> JobSpec:
    """A job requesting ``gpus`` GPUs of ``gpu_type``."""
    return JobSpec(JobId(job_id), model, batch, iters, submit, GpuType(gpu_type), gpus, deadline)


def uniform_model(types=("a40", "a10"), base: float = 2.0, counts=(1, 2, 4, 8), per_node_max: int = 2,
                  models=(GPT, MOE), batch: int = 128) -> MeasuredPerfModel:
    """Every type/count measured at best and spread localities: time = base / sqrt(count)."""
    times = {}
    for m in models:
        for t in types:
            for n in counts:
                per = min(n, per_node_max)
                while per >= 1:
                    times[(m, batch, t, n // per, per)] = base / math.sqrt(n) * (1.0 if t == "a40" else 1.5)
                    per //= 2
    return table_model(times)
