"""Machinery shared by the baseline policies (Tiresias, Gandiva, ElasticFlow-LS, Gavel, Sia).

* :class:`Estimates`: memoised iteration-time estimates of the belief model in one of two
  views, the AP proxy plan (``perf.iter_time``) or the data-parallel-only view
  (``perf.dp_iter_time``, ``inf`` where the DP memory rule fails);
* :class:`Workspace`: a scratch copy of the free GPUs and of which job holds which placement,
  edited while a policy builds its decision and turned into a :class:`Decision` at the end;
* :func:`priority_fill`: preemptive priority scheduling at fixed shapes (Tiresias' core);
* :func:`assign`: the job-to-configuration assignment problem of Gavel and Sia (HiGHS MILP).

Whatever a policy plans with, the simulator executes every allocation with its ground truth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from agents.fcfs import fits_ever, requested
from agents.milp import MilpBuilder, MilpConfig
from arena_gym.placement import allocation, place_shape
from arena_gym.protocols import PerfModel
from arena_gym.types import (
    GPU_COUNTS,
    ClusterSpec,
    Decision,
    JobId,
    JobSpec,
    JobView,
    Placement,
    ResourceShape,
    Snapshot,
    best_locality,
    localities,
)

ShapeOk = Callable[[ResourceShape], bool]
#: A configuration: (GPU type, GPU count).
Config = tuple[str, int]


class Estimates:
    """Memoised iteration-time estimates of one belief model, per (model, batch, shape).

    ``dp=False`` answers with the AP proxy-plan time (what AP-aware policies plan with);
    ``dp=True`` with the data-parallel-only time, where ``inf`` marks configurations ruled
    out by the DP memory rule (what the SP-aware baselines plan with). ``bind`` switches to
    a snapshot's model, clearing the memo when the model object changes.
    """

    def __init__(self, dp: bool) -> None:
        self.dp = dp
        self._perf: PerfModel | None = None
        self._memo: dict[tuple[object, int, ResourceShape], float] = {}
        self._cluster: ClusterSpec | None = None
        self._tables: dict[tuple[object, int], dict[Config, float]] = {}
        self._counts: dict[tuple[object, int, str], tuple[int, ...]] = {}

    def bind(self, perf: PerfModel) -> bool:
        """Answer from ``perf`` from now on; True (and the memo cleared) if it is a different model."""
        if perf is self._perf:
            return False
        self._perf = perf
        self._memo.clear()
        self._tables.clear()
        self._counts.clear()
        return True

    def clear(self) -> None:
        """Forget the bound model and every memoised estimate."""
        self._perf = None
        self._cluster = None
        self._memo.clear()
        self._tables.clear()
        self._counts.clear()

    def time(self, spec: JobSpec, shape: ResourceShape) -> float:
        """Seconds per iteration of ``spec`` on ``shape`` (``inf``: infeasible)."""
        key = (spec.model, spec.global_batch, shape)
        t = self._memo.get(key)
        if t is None:
            if self._perf is None:
                raise RuntimeError("Estimates.bind(perf) must be called before querying estimates")
            query = self._perf.dp_iter_time if self.dp else self._perf.iter_time
            t = float(query(spec.model, spec.global_batch, shape))
            self._memo[key] = t if t > 0 else math.inf
            t = self._memo[key]
        return t

    def best(self, spec: JobSpec, gpu_type: str, num_gpus: int, capacity: int) -> float:
        """Seconds per iteration at the best locality of ``num_gpus`` GPUs of ``gpu_type``."""
        return self.time(spec, best_locality(gpu_type, num_gpus, capacity))

    def configs(self, cluster: ClusterSpec, spec: JobSpec) -> dict[Config, float]:
        """Feasible configurations of ``spec`` on ``cluster``: (type, count) -> seconds per iteration at best locality.

        Counts are the powers of two up to 16 that the type's nodes can hold; infeasible
        (``inf``) configurations are left out. Ordered by type (cluster order), then count.
        """
        if cluster is not self._cluster:
            self._cluster = cluster
            self._tables.clear()
            self._counts.clear()
        key = (spec.model, spec.global_batch)
        table = self._tables.get(key)
        if table is None:
            table = {}
            for g in cluster.groups:
                for n in GPU_COUNTS:
                    if n <= g.total_gpus:
                        t = self.time(spec, best_locality(g.gpu_type, n, g.gpus_per_node))
                        if math.isfinite(t):
                            table[(g.gpu_type, n)] = t
            self._tables[key] = table
        return table

    def counts(self, cluster: ClusterSpec, spec: JobSpec, gpu_type: str) -> tuple[int, ...]:
        """Feasible GPU counts of ``spec`` on ``gpu_type`` (ascending), from :meth:`configs`."""
        key = (spec.model, spec.global_batch, gpu_type)
        counts = self._counts.get(key) if cluster is self._cluster else None
        if counts is None:
            table = self.configs(cluster, spec)
            counts = self._counts[key] = tuple(n for t, n in table if t == gpu_type)
        return counts

    def throughput(self, spec: JobSpec, shape: ResourceShape) -> float:
        """Samples per second on ``shape`` (0 when infeasible)."""
        t = self.time(spec, shape)
        return spec.global_batch / t if math.isfinite(t) else 0.0


def type_capacity(snapshot: Snapshot) -> dict[str, int]:
    """GPUs per node of every GPU type in the snapshot's cluster."""
    return {g.gpu_type: g.gpus_per_node for g in snapshot.cluster.groups}


def remaining_seconds(view: JobView, now: float, iter_time: float) -> float:
    """Estimated seconds left for ``view`` at ``iter_time`` seconds per iteration."""
    return view.remaining_iterations(now) * iter_time


class Workspace:
    """Scratch state for building one decision: free GPUs per node and who holds what.

    Starts from a snapshot; ``release``/``hold``/``move`` edit it; ``decision`` turns the
    difference to the snapshot into allocations (new or changed placements) and preemptions
    (jobs that held GPUs and hold none now). Placements are found with
    ``arena_gym.placement`` (best locality first, optionally relaxed).
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.capacity = type_capacity(snapshot)
        self.free = {t: np.array(f) for t, f in snapshot.free.items()}
        self.views = {v.job_id: v for v in (*snapshot.pending, *snapshot.running)}
        self.original: dict[JobId, Placement] = {v.job_id: v.allocation.placement for v in snapshot.running
                                                 if v.allocation is not None}
        self.held: dict[JobId, Placement] = dict(self.original)

    def free_gpus(self, gpu_type: str) -> int:
        """Free GPUs of a type in the workspace."""
        return int(self.free[gpu_type].sum())

    def total_gpus(self, gpu_type: str) -> int:
        """All GPUs of a type."""
        return len(self.free[gpu_type]) * self.capacity[gpu_type]

    def release(self, job_id: JobId) -> Placement | None:
        """Give back the GPUs ``job_id`` holds (if any) and return its former placement."""
        p = self.held.pop(job_id, None)
        if p is not None:
            self.free[p.gpu_type][list(p.nodes)] += p.gpus_per_node
        return p

    def hold(self, job_id: JobId, placement: Placement) -> None:
        """Let ``job_id`` hold ``placement`` (its GPUs must be free; any previous holding is released)."""
        self.release(job_id)
        free = self.free[placement.gpu_type]
        nodes = list(placement.nodes)
        if (free[nodes] < placement.gpus_per_node).any():
            raise ValueError(f"job {job_id}: placement {placement} is not free in the workspace")
        free[nodes] -= placement.gpus_per_node
        self.held[job_id] = placement

    def find(self, gpu_type: str, num_gpus: int, relax: bool = False, ok: ShapeOk | None = None,
             free: np.ndarray | None = None) -> Placement | None:
        """A placement of ``num_gpus`` GPUs of ``gpu_type``: best locality, then (``relax``) more spread ones.

        Only shapes accepted by ``ok`` are tried; ``free`` overrides the workspace's free array.
        """
        free = self.free[gpu_type] if free is None else free
        cap = self.capacity[gpu_type]
        if num_gpus > len(free) * cap or int(free.sum()) < num_gpus:
            return None
        shapes = localities(gpu_type, num_gpus, cap)
        for shape in shapes if relax else shapes[:1]:
            if ok is not None and not ok(shape):
                continue
            placement = place_shape(free, shape)
            if placement is not None:
                return placement
        return None

    def move(self, job_id: JobId, gpu_type: str, num_gpus: int, relax: bool = False,
             ok: ShapeOk | None = None) -> Placement | None:
        """Re-place ``job_id`` on ``num_gpus`` GPUs of ``gpu_type`` (its own GPUs count as free).

        Returns the new placement, or None (and the job keeps its old one) if nothing fits.
        """
        old = self.release(job_id)
        placement = self.find(gpu_type, num_gpus, relax, ok)
        if placement is None:
            if old is not None:
                self.hold(job_id, old)
            return None
        self.hold(job_id, placement)
        return placement

    def checkpoint(self) -> tuple[dict[str, np.ndarray], dict[JobId, Placement]]:
        """A copy of the workspace state, for :meth:`restore`."""
        return {t: f.copy() for t, f in self.free.items()}, dict(self.held)

    def restore(self, state: tuple[dict[str, np.ndarray], dict[JobId, Placement]]) -> None:
        """Return to a state taken with :meth:`checkpoint`."""
        free, held = state
        self.free = {t: f.copy() for t, f in free.items()}
        self.held = dict(held)

    def holders(self, gpu_type: str) -> dict[int, list[JobId]]:
        """Node index -> jobs holding GPUs there, for one GPU type."""
        out: dict[int, list[JobId]] = {}
        for job_id, p in self.held.items():
            if p.gpu_type == gpu_type:
                for node in p.nodes:
                    out.setdefault(node, []).append(job_id)
        return out

    def changed(self, job_id: JobId) -> bool:
        """Whether ``job_id``'s holding differs from the snapshot's."""
        return self.held.get(job_id) != self.original.get(job_id)

    def decision(self, perf: PerfModel) -> Decision:
        """The Decision that turns the snapshot into this workspace (proxy-plan grids from ``perf``)."""
        allocations = tuple(
            (job_id, allocation(perf, self.views[job_id].spec, p))
            for job_id, p in self.held.items() if self.original.get(job_id) != p
        )
        preemptions = tuple(job_id for job_id in self.original if job_id not in self.held)
        return Decision(allocations=allocations, preemptions=preemptions)


def runnable_at_request(snapshot: Snapshot, ap: Estimates, spec: JobSpec) -> tuple[str, int] | None:
    """The requested (type, count) when the cluster can hold it and the AP proxy plan fits in memory, else None."""
    gpu_type, n = requested(spec, snapshot)
    if not fits_ever(snapshot, gpu_type, n):
        return None
    cap = snapshot.cluster.group(gpu_type).gpus_per_node
    return (gpu_type, n) if math.isfinite(ap.best(spec, gpu_type, n, cap)) else None


def ap_feasible(ap: Estimates, spec: JobSpec) -> ShapeOk:
    """Shape filter: the AP proxy plan of ``spec`` fits on the shape (the allocation must be executable)."""
    return lambda shape: math.isfinite(ap.time(spec, shape))


def dp_feasible(dp: Estimates, ap: Estimates, spec: JobSpec) -> ShapeOk:
    """Shape filter of the SP-aware baselines: DP-feasible (their belief) and AP-feasible (executable)."""
    ap_ok = ap_feasible(ap, spec)
    return lambda shape: math.isfinite(dp.time(spec, shape)) and ap_ok(shape)


def priority_fill(ws: Workspace, ranked: Sequence[JobView], shape_of: Callable[[JobView], tuple[str, int] | None],
                  ok: Callable[[JobView], ShapeOk], relax: bool = False) -> None:
    """Preemptive priority scheduling at fixed shapes, applied to ``ws``.

    ``ranked`` lists pending and running jobs from highest to lowest priority. GPUs of each
    type go to the highest-priority jobs whose shape (``shape_of``; None = never runnable)
    fits in the type's total; a selected pending job is placed, preempting unselected running
    jobs of its type from the lowest priority up until it fits. If even preempting all of them
    would not make room, nobody is preempted for it.
    """
    budget = {t: ws.total_gpus(t) for t in ws.free}
    shapes: dict[JobId, tuple[str, int]] = {}
    for view in ranked:
        shape = shape_of(view)
        if shape is not None and budget[shape[0]] >= shape[1]:
            budget[shape[0]] -= shape[1]
            shapes[view.job_id] = shape
    victims = {t: [v.job_id for v in reversed(ranked) if v.job_id in ws.held and v.job_id not in shapes
                   and ws.held[v.job_id].gpu_type == t] for t in ws.free}
    for view in ranked:
        if view.job_id not in shapes or view.job_id in ws.held:
            continue
        gpu_type, n = shapes[view.job_id]
        state = ws.checkpoint()
        placement = ws.find(gpu_type, n, relax, ok(view))
        taken = 0
        while placement is None and taken < len(victims[gpu_type]):
            ws.release(victims[gpu_type][taken])
            taken += 1
            placement = ws.find(gpu_type, n, relax, ok(view))
        if placement is None:
            ws.restore(state)
            continue
        del victims[gpu_type][:taken]
        ws.hold(view.job_id, placement)


@dataclass(frozen=True)
class AssignmentJob:
    """One job of an assignment problem: the value of each configuration it may take, and its current one."""

    job_id: JobId
    values: Mapping[Config, float]
    current: Config | None = None  # None: pending (may stay unassigned)

    def __post_init__(self) -> None:
        if self.current is not None and self.current not in self.values:
            raise ValueError(f"job {self.job_id}: current configuration {self.current} has no value")


@dataclass(frozen=True)
class Assignment:
    """The chosen configuration per assigned job, and whether the MILP had to be solved."""

    choice: dict[JobId, Config]
    by_milp: bool


def assign(jobs: Sequence[AssignmentJob], room: Mapping[str, int], max_migrations: int,
           config: MilpConfig | None = None) -> Assignment:
    """Pick at most one configuration per job, maximising the summed values (Gavel's and Sia's model).

    Pending jobs may stay unassigned (value 0); running jobs (``current`` set) keep exactly
    one configuration; the GPUs chosen per type fit ``room``; at most ``max_migrations``
    running jobs leave their current configuration.

    Without the capacity rows the optimum is plain: every pending job takes its best
    configuration (if worth more than 0) and the ``max_migrations`` running jobs with the
    largest gains move to theirs. When that choice fits ``room`` it is optimal and is
    returned directly; otherwise the MILP is solved with HiGHS.
    """
    relaxed = _capacity_free_optimum(jobs, max_migrations)
    used: dict[str, int] = {}
    for c in relaxed.values():
        used[c[0]] = used.get(c[0], 0) + c[1]
    if all(n <= room.get(t, 0) for t, n in used.items()):
        return Assignment(relaxed, by_milp=False)
    builder = MilpBuilder()
    columns: list[tuple[JobId, Config, int]] = []
    moves: list[int] = []
    for job in jobs:
        configs = sorted(job.values)
        idx = builder.add_vars([job.values[c] for c in configs])
        builder.add_row(idx, 1.0, lb=1.0 if job.current is not None else 0.0, ub=1.0)
        columns.extend((job.job_id, c, int(v)) for c, v in zip(configs, idx))
        moves.extend(int(v) for c, v in zip(configs, idx) if job.current is not None and c != job.current)
    for gpu_type, cap in room.items():
        cols = [(v, c[1]) for _, c, v in columns if c[0] == gpu_type]
        if cols:
            builder.add_row([v for v, _ in cols], [n for _, n in cols], ub=float(cap))
    if moves:
        builder.add_row(moves, 1.0, ub=float(max_migrations))
    solution = builder.build(maximize=True).solve(config)
    chosen = solution.chosen([v for *_, v in columns])
    return Assignment({job_id: c for (job_id, c, _), on in zip(columns, chosen) if on}, by_milp=True)


def _capacity_free_optimum(jobs: Sequence[AssignmentJob], max_migrations: int) -> dict[JobId, Config]:
    """The optimum of :func:`assign` without capacity rows (ties: current, then smallest configuration, earlier job)."""
    out: dict[JobId, Config] = {}
    gains = []
    for job in jobs:
        if not job.values:
            continue
        best = max(sorted(job.values), key=lambda c: (job.values[c], c == job.current))  # first of ties: smallest
        if job.current is None:
            if job.values[best] > 0:
                out[job.job_id] = best
            continue
        out[job.job_id] = job.current
        gain = job.values[best] - job.values[job.current]
        if best != job.current and gain > 0:
            gains.append((-gain, len(gains), job.job_id, best))
    for _, _, job_id, best in sorted(gains)[:max_migrations]:
        out[job_id] = best
    return out


def ordered(views: Iterable[JobView]) -> list[JobView]:
    """Views in FIFO order (submit time, then job id)."""
    return sorted(views, key=lambda v: (v.spec.submit_time, v.job_id))
