"""ThroughputOracle: a job's belief throughput on a resource shape, as Arena scores its candidates."""

from __future__ import annotations

import math

from agents.arena.config import ArenaConfig
from agents.common import Estimates, ShapeKey
from arena_gym.types import JobId, JobSpec, JobView, Snapshot


class ThroughputOracle:
    """Samples/s of a job's (model, batch) on a shape, as the belief model says.

    Throughput is ``global_batch / iter_time`` of the proxy plan (``perf.iter_time``), or of
    the data-parallel view (``perf.dp_iter_time``) with ``dp_only``; relaxed localities get
    whatever the belief says for them (a table model applies the 0.9-per-halving rule itself).
    Iteration times come from :class:`agents.common.Estimates`, memoised for as long as the
    snapshot's ``perf`` object stays the same (one episode); :meth:`bind` starts each decision.
    """

    def __init__(self, config: ArenaConfig) -> None:
        self.config = config
        self.estimates = Estimates(dp=config.dp_only)
        self._now = 0.0
        self._remaining: dict[JobId, float] = {}

    def reset(self) -> None:
        """Forget memoised numbers (a new episode may bring a new belief model)."""
        self.estimates.clear()
        self._remaining.clear()

    def bind(self, snapshot: Snapshot) -> None:
        """Start a decision: keep the memo if the belief model is unchanged, note the time."""
        self.estimates.bind(snapshot.perf)
        self._now = snapshot.now
        self._remaining = {}

    def current(self, spec: JobSpec, key: ShapeKey) -> float:
        """Throughput of a configuration a job already holds (0 when the belief calls it infeasible)."""
        return spec.global_batch / self.estimates.time_at(spec, key)

    def rate(self, view: JobView, key: ShapeKey) -> float | None:
        """Throughput of moving ``view`` to a new configuration, or None when that is infeasible.

        Infeasible: no plan fits (out of memory), or, deadline-aware, the job would finish
        after its deadline: ``now + restart overhead + remaining iterations * iter_time``.
        """
        spec = view.spec
        t = self.estimates.time_at(spec, key)
        if t == math.inf:
            return None
        if self.config.deadline_aware and spec.deadline is not None:
            remaining = self._remaining.get(spec.job_id)
            if remaining is None:
                remaining = self._remaining[spec.job_id] = view.remaining_iterations(self._now)
            finish = self._now + self.config.restart_overhead_s(key[1] * key[2]) + remaining * t
            if finish > spec.deadline:
                return None
        return spec.global_batch / t

    def best_rate(self, spec: JobSpec, gpu_type: str, num_gpus: int, capacity: int) -> float | None:
        """Highest throughput over every locality of ``num_gpus`` GPUs of a type (an upper bound), or None."""
        t = self.estimates.fastest(spec, gpu_type, num_gpus, capacity)
        return spec.global_batch / t if t < math.inf else None
