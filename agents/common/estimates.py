"""Belief estimates with one memo cache: iteration times of (model, batch) on shapes, in the AP or DP view.

Policies plan with the snapshot's belief model (``snapshot.perf``); the simulator executes with
its ground truth. :class:`Estimates` answers from the belief and memoises every answer for as
long as the bound model is the same object (one episode). :class:`DpBelief` is what the
SP-aware baselines plan with: data-parallel-only times, restricted to shapes the AP plan can
execute.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from arena_gym.types import (
    GPU_COUNTS,
    ClusterSpec,
    GpuType,
    JobSpec,
    PerfModel,
    Placement,
    ResourceShape,
    best_locality,
    localities,
)

#: (GPU type, nodes, GPUs per node): a shape as a plain tuple, the memo's key.
ShapeKey = tuple[str, int, int]
#: A filter over resource shapes (True: the policy may use the shape).
ShapeOk = Callable[[ResourceShape], bool]


class TypeCount(NamedTuple):
    """A configuration without locality: a GPU type and a GPU count."""

    gpu_type: str
    num_gpus: int


def shape_key(shape: ResourceShape) -> ShapeKey:
    """The memo key of a shape."""
    return (shape.gpu_type, shape.n_nodes, shape.gpus_per_node)


def key_of(placement: Placement) -> ShapeKey:
    """The memo key of a placement's shape."""
    return (placement.gpu_type, len(placement.nodes), placement.gpus_per_node)


class _Table:
    """Memo of one (model, batch): seconds per shape, and the fastest locality per (type, count, capacity)."""

    __slots__ = ("times", "fastest")

    def __init__(self) -> None:
        self.times: dict[ShapeKey, float] = {}
        self.fastest: dict[tuple[str, int, int], float] = {}


class Estimates:
    """Memoised iteration times of one belief model, per (model, batch, shape).

    ``dp=False`` answers with the AP proxy-plan time (``perf.iter_time``: what AP-aware
    policies plan with); ``dp=True`` with the data-parallel-only time (``perf.dp_iter_time``),
    where ``inf`` marks configurations ruled out by the DP memory rule. Every infeasible answer
    (no plan fits, zero or negative) is ``math.inf``. :meth:`bind` starts each decision: the
    memo is kept while the model object stays the same and cleared when it changes.
    """

    def __init__(self, dp: bool) -> None:
        self.dp = dp
        self._perf: PerfModel | None = None
        self._tables: dict[tuple[object, int], _Table] = {}
        self._jobs: dict[str, tuple[JobSpec, _Table]] = {}
        self._cluster: ClusterSpec | None = None
        self._configs: dict[tuple[object, int], dict[TypeCount, float]] = {}
        self._counts: dict[tuple[object, int, str], tuple[int, ...]] = {}

    def bind(self, perf: PerfModel) -> bool:
        """Answer from ``perf`` from now on; True (and the memo cleared) if it is a different model."""
        if perf is self._perf:
            return False
        self.clear()
        self._perf = perf
        return True

    def clear(self) -> None:
        """Forget the bound model and every memoised estimate."""
        self._perf = None
        self._cluster = None
        self._tables.clear()
        self._jobs.clear()
        self._configs.clear()
        self._counts.clear()

    def _table(self, spec: JobSpec) -> _Table:
        memo = self._jobs.get(spec.job_id)
        if memo is not None and memo[0] is spec:
            return memo[1]
        key = (spec.model, spec.global_batch)
        table = self._tables.get(key)
        if table is None:
            table = self._tables[key] = _Table()
        self._jobs[spec.job_id] = (spec, table)
        return table

    def time_at(self, spec: JobSpec, key: ShapeKey) -> float:
        """Seconds per iteration of ``spec`` on the shape ``key`` (``inf``: infeasible)."""
        times = self._table(spec).times
        t = times.get(key)
        if t is None:
            perf = self._perf
            if perf is None:
                raise RuntimeError("Estimates.bind(perf) must be called before querying estimates")
            query = perf.dp_iter_time if self.dp else perf.iter_time
            t = float(query(spec.model, spec.global_batch, ResourceShape(GpuType(key[0]), key[1], key[2])))
            t = times[key] = t if t > 0 and math.isfinite(t) else math.inf
        return t

    def time(self, spec: JobSpec, shape: ResourceShape) -> float:
        """Seconds per iteration of ``spec`` on ``shape`` (``inf``: infeasible)."""
        return self.time_at(spec, (shape.gpu_type, shape.n_nodes, shape.gpus_per_node))

    def best(self, spec: JobSpec, gpu_type: str, num_gpus: int, capacity: int) -> float:
        """Seconds per iteration at the best locality of ``num_gpus`` GPUs of ``gpu_type``."""
        return self.time(spec, best_locality(gpu_type, num_gpus, capacity))

    def fastest(self, spec: JobSpec, gpu_type: str, num_gpus: int, capacity: int) -> float:
        """The lowest seconds per iteration over every locality of ``num_gpus`` GPUs of ``gpu_type`` (``inf``: none)."""
        table = self._table(spec)
        memo = (gpu_type, num_gpus, capacity)
        t = table.fastest.get(memo)
        if t is None:
            t = table.fastest[memo] = min(
                (self.time(spec, s) for s in localities(gpu_type, num_gpus, capacity)), default=math.inf
            )
        return t

    def throughput(self, spec: JobSpec, shape: ResourceShape) -> float:
        """Samples per second on ``shape`` (0 when infeasible)."""
        t = self.time(spec, shape)
        return spec.global_batch / t if math.isfinite(t) else 0.0

    def configs(self, cluster: ClusterSpec, spec: JobSpec) -> dict[TypeCount, float]:
        """Feasible configurations of ``spec`` on ``cluster``: (type, count) -> seconds per iteration at best locality.

        Counts are the powers of two up to 16 that the type's nodes can hold; infeasible
        configurations are left out. Ordered by type (cluster order), then count.
        """
        if cluster is not self._cluster:
            self._cluster = cluster
            self._configs.clear()
            self._counts.clear()
        key = (spec.model, spec.global_batch)
        table = self._configs.get(key)
        if table is None:
            table = {}
            for g in cluster.groups:
                for n in GPU_COUNTS:
                    if n <= g.total_gpus:
                        t = self.best(spec, g.gpu_type, n, g.gpus_per_node)
                        if math.isfinite(t):
                            table[TypeCount(g.gpu_type, n)] = t
            self._configs[key] = table
        return table

    def counts(self, cluster: ClusterSpec, spec: JobSpec, gpu_type: str) -> tuple[int, ...]:
        """Feasible GPU counts of ``spec`` on ``gpu_type`` (ascending), from :meth:`configs`."""
        key = (spec.model, spec.global_batch, gpu_type)
        counts = self._counts.get(key) if cluster is self._cluster else None
        if counts is None:
            table = self.configs(cluster, spec)
            counts = self._counts[key] = tuple(n for t, n in table if t == gpu_type)
        return counts

    def feasible(self, spec: JobSpec) -> ShapeOk:
        """Shape filter: ``spec`` has a finite time on the shape in this view."""
        return lambda shape: math.isfinite(self.time(spec, shape))


class DpBelief:
    """What the SP-aware baselines plan with: data-parallel-only times, on shapes the AP plan can execute.

    ``dp`` answers with ``perf.dp_iter_time`` (the baselines' belief); ``ap`` with the AP proxy
    plan, used only to keep choices executable: the simulator runs every allocation with an AP
    plan, so a shape on which no AP plan fits is never chosen.
    """

    def __init__(self) -> None:
        self.dp = Estimates(dp=True)
        self.ap = Estimates(dp=False)

    def bind(self, perf: PerfModel) -> bool:
        """Bind both views to ``perf``; True if it is a different model (memo cleared)."""
        return self.dp.bind(perf) | self.ap.bind(perf)

    def clear(self) -> None:
        """Forget both views' memo."""
        self.dp.clear()
        self.ap.clear()

    def ok(self, spec: JobSpec) -> ShapeOk:
        """Shape filter: DP-feasible (the belief) and AP-feasible (executable)."""
        dp, ap = self.dp, self.ap
        return lambda shape: math.isfinite(dp.time(spec, shape)) and math.isfinite(ap.time(spec, shape))

    def configs(self, cluster: ClusterSpec, spec: JobSpec) -> dict[TypeCount, float]:
        """DP seconds per iteration (best locality) of every configuration that is DP- and AP-feasible."""
        ap = self.ap.configs(cluster, spec)
        return {c: t for c, t in self.dp.configs(cluster, spec).items() if c in ap}
