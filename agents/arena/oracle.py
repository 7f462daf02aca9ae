"""ThroughputOracle: memoised belief throughput of a job on a resource shape."""

from __future__ import annotations

import math

from agents.arena.config import ArenaConfig
from arena_gym.protocols import PerfModel
from arena_gym.types import GpuType, JobId, JobSpec, JobView, ResourceShape, Snapshot, localities

#: (GPU type, nodes, GPUs per node): the key of a shape inside one (model, batch) table.
ShapeKey = tuple[str, int, int]


class _ConfigTable:
    """Memo of one (model, batch): iteration time per shape, best throughput per (type, count)."""

    __slots__ = ("times", "best")

    def __init__(self) -> None:
        self.times: dict[ShapeKey, float] = {}
        self.best: dict[tuple[str, int, int], float | None] = {}


class ThroughputOracle:
    """Samples/s of a job's (model, batch) on a shape, as the belief model says.

    Throughput is ``global_batch / iter_time`` of the proxy plan (``perf.iter_time``), or of
    the data-parallel view (``perf.dp_iter_time``) with ``dp_only``; relaxed localities get
    whatever the belief says for them (a table model applies the 0.9-per-halving rule itself).
    Iteration times are memoised per (model, batch, shape) for as long as the snapshot's
    ``perf`` object stays the same (one episode); :meth:`bind` starts each decision.
    """

    def __init__(self, config: ArenaConfig) -> None:
        self.config = config
        self._perf: PerfModel | None = None
        self._configs: dict[tuple[str, str, int], _ConfigTable] = {}
        self._jobs: dict[JobId, _ConfigTable] = {}
        self._now = 0.0
        self._remaining: dict[JobId, float] = {}

    def reset(self) -> None:
        """Forget memoised numbers (a new episode may bring a new belief model)."""
        self._perf = None
        self._configs.clear()
        self._jobs.clear()
        self._remaining.clear()

    def bind(self, snapshot: Snapshot) -> None:
        """Start a decision: keep the memo if the belief model is unchanged, note the time."""
        if snapshot.perf is not self._perf:
            self.reset()
            self._perf = snapshot.perf
        self._now = snapshot.now
        self._remaining = {}

    def _table(self, spec: JobSpec) -> _ConfigTable:
        table = self._jobs.get(spec.job_id)
        if table is None:
            config = (spec.model.family, spec.model.size, spec.global_batch)
            table = self._configs.get(config)
            if table is None:
                table = self._configs[config] = _ConfigTable()
            self._jobs[spec.job_id] = table
        return table

    def iter_time(self, spec: JobSpec, key: ShapeKey) -> float:
        """Belief iteration time (``math.inf`` when infeasible)."""
        times = self._table(spec).times
        t = times.get(key)
        if t is None:
            perf = self._perf
            assert perf is not None, "ThroughputOracle.bind must be called first"
            query = perf.dp_iter_time if self.config.dp_only else perf.iter_time
            t = query(spec.model, spec.global_batch, ResourceShape(GpuType(key[0]), key[1], key[2]))
            t = t if t > 0 and math.isfinite(t) else math.inf
            times[key] = t
        return t

    def current(self, spec: JobSpec, key: ShapeKey) -> float:
        """Throughput of a configuration a job already holds (0 when the belief calls it infeasible)."""
        return spec.global_batch / self.iter_time(spec, key)

    def rate(self, view: JobView, key: ShapeKey) -> float | None:
        """Throughput of moving ``view`` to a new configuration, or None when that is infeasible.

        Infeasible: no plan fits (out of memory), or, deadline-aware, the job would finish
        after its deadline: ``now + restart overhead + remaining iterations * iter_time``.
        """
        spec = view.spec
        t = self.iter_time(spec, key)
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
        table = self._table(spec)
        memo = (gpu_type, num_gpus, capacity)
        if memo in table.best:
            return table.best[memo]
        best = 0.0
        for s in localities(gpu_type, num_gpus, capacity):
            best = max(best, spec.global_batch / self.iter_time(spec, (s.gpu_type, s.n_nodes, s.gpus_per_node)))
        table.best[memo] = best if best > 0 else None
        return table.best[memo]
