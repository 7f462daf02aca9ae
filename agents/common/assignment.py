"""Deciding who gets which configuration: preemptive priority fill, and the assignment problem of Gavel and Sia.

* :func:`priority_fill`: preemptive priority scheduling at fixed shapes (SRTF's and Tiresias' core);
* :func:`assign`: pick one configuration per job maximising the summed values under per-type
  capacity and a migration budget (HiGHS MILP, or the capacity-free optimum when it fits);
* :class:`AssignmentPolicy`: the decide outline Gavel and Sia share (build the problem, solve
  it, apply the moves, place the admitted jobs).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agents.common.estimates import DpBelief, ShapeOk, TypeCount
from agents.common.workspace import Workspace
from agents.milp import MilpBuilder, MilpConfig, MilpError
from arena_gym.types import Decision, JobId, JobView, OverheadClass, Snapshot

log = logging.getLogger(__name__)


def priority_fill(
    ws: Workspace,
    ranked: Sequence[JobView],
    shape_of: Callable[[JobView], TypeCount | None],
    ok: Callable[[JobView], ShapeOk],
    relax: bool = False,
) -> None:
    """Preemptive priority scheduling at fixed shapes, applied to ``ws``.

    ``ranked`` lists pending and running jobs from highest to lowest priority. GPUs of each
    type go to the highest-priority jobs whose shape (``shape_of``; None = never runnable)
    fits in the type's total; a selected pending job is placed, preempting unselected running
    jobs of its type from the lowest priority up until it fits. If even preempting all of them
    would not make room, nobody is preempted for it.
    """
    budget = {t: ws.total_gpus(t) for t in ws.types}
    shapes: dict[JobId, TypeCount] = {}
    for view in ranked:
        shape = shape_of(view)
        if shape is not None and budget[shape[0]] >= shape[1]:
            budget[shape[0]] -= shape[1]
            shapes[view.job_id] = shape
    held = ws.placement
    victims = {
        t: [
            v.job_id
            for v in reversed(ranked)
            if v.job_id in held and v.job_id not in shapes and held[v.job_id].gpu_type == t
        ]
        for t in ws.types
    }
    for view in ranked:
        if view.job_id not in shapes or view.job_id in held:
            continue
        gpu_type, n = shapes[view.job_id]
        mark = ws.checkpoint()
        placement = ws.find(gpu_type, n, relax, ok(view))
        taken = 0
        while placement is None and taken < len(victims[gpu_type]):
            ws.release(victims[gpu_type][taken])
            taken += 1
            placement = ws.find(gpu_type, n, relax, ok(view))
        if placement is None:
            ws.rollback(mark)
            continue
        del victims[gpu_type][:taken]
        ws.hold(view.job_id, placement)


@dataclass(frozen=True)
class AssignmentJob:
    """One job of an assignment problem: the value of each configuration it may take, and its current one."""

    job_id: JobId
    values: Mapping[TypeCount, float]
    current: TypeCount | None = None  # None: pending (may stay unassigned)

    def __post_init__(self) -> None:
        if self.current is not None and self.current not in self.values:
            raise ValueError(f"job {self.job_id}: current configuration {self.current} has no value")


@dataclass(frozen=True)
class Assignment:
    """The chosen configuration per assigned job, and whether the MILP had to be solved."""

    choice: dict[JobId, TypeCount]
    by_milp: bool


def assign(
    jobs: Sequence[AssignmentJob], room: Mapping[str, int], max_migrations: int, config: MilpConfig | None = None
) -> Assignment:
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
    columns: list[tuple[JobId, TypeCount, int]] = []
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


def _capacity_free_optimum(jobs: Sequence[AssignmentJob], max_migrations: int) -> dict[JobId, TypeCount]:
    """The optimum of :func:`assign` without capacity rows (ties: current, then smallest configuration, earlier job)."""
    out: dict[JobId, TypeCount] = {}
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


def room_with(free: Mapping[str, int], movers: Iterable[TypeCount]) -> dict[str, int]:
    """Free GPUs per type plus the GPUs of the running jobs whose configurations ``movers`` lists."""
    room = dict(free)
    for gpu_type, n in movers:
        room[gpu_type] += n
    return room


class AssignmentPolicy(ABC):
    """The decide outline of Gavel and Sia: an assignment problem over the jobs that may change, then packing.

    At every decision point a subclass states the problem (:meth:`_problem`: the pending jobs
    that could be admitted, and the running jobs offered a change, each with its value per
    configuration); :func:`assign` solves it with the free GPUs plus those of the running jobs
    in it; the running jobs' changes are applied first (:meth:`_move_order`), then the admitted
    jobs are placed largest first (submission order among equals). Placement is by packing
    (best locality, then spread with ``config.relax``) on shapes the DP belief calls feasible and
    an AP plan can execute; a change that cannot be placed is dropped, a job that cannot be
    placed waits. A MILP failure keeps the current allocation (logged).

    Subclasses set ``config`` (with ``relax``, ``max_migrations`` and ``milp``) and call
    ``super().__init__(name)``.
    """

    ap_search = OverheadClass.FULL
    config: Any

    def __init__(self, name: str) -> None:
        self.name = name
        self.belief = DpBelief()
        self.solves = 0

    def reset(self) -> None:
        """Forget estimates, what the subclass derived from them, and the MILP solve count."""
        self.belief.clear()
        self._forget()
        self.solves = 0

    def decide(self, snapshot: Snapshot) -> Decision:
        """Solve the assignment problem over the jobs that can change, then place its answer."""
        if self.belief.bind(snapshot.perf):
            self._forget()
        ws = Workspace(snapshot)
        free = {t: ws.free_gpus(t) for t in ws.types}
        problem = self._problem(snapshot, free)
        if problem is None:
            return Decision()
        waiting, movers = problem
        room = room_with(free, (job.current for job in movers))
        try:
            result = assign([*waiting, *movers], room, self.config.max_migrations, self.config.milp)
        except MilpError as exc:
            log.warning("%s keeps the current allocation: %s", self.name, exc)
            return Decision()
        self.solves += result.by_milp
        choice, views, relax = result.choice, ws.views, self.config.relax
        changes = [(job, choice[job.job_id]) for job in movers if choice[job.job_id] != job.current]
        for job, (gpu_type, n) in self._move_order(changes):
            ws.move(job.job_id, gpu_type, n, relax, self.belief.ok(views[job.job_id].spec))
        admitted = sorted(
            ((choice[job.job_id], views[job.job_id]) for job in waiting if job.job_id in choice),
            key=lambda cv: (-cv[0][1], cv[1].spec.submit_time, cv[1].job_id),
        )
        for (gpu_type, n), view in admitted:
            placement = ws.find(gpu_type, n, relax, self.belief.ok(view.spec))
            if placement is not None:
                ws.hold(view.job_id, placement)
        return ws.decision(snapshot.perf)

    @abstractmethod
    def _problem(
        self, snapshot: Snapshot, free: dict[str, int]
    ) -> tuple[list[AssignmentJob], list[AssignmentJob]] | None:
        """(pending jobs, running jobs offered a change) of this decision's problem; None when nothing would change."""

    def _move_order(self, changes: list[tuple[AssignmentJob, TypeCount]]) -> Iterable[tuple[AssignmentJob, TypeCount]]:
        """The order in which the running jobs' changes are applied (default: the problem's order)."""
        return changes

    @abstractmethod
    def _forget(self) -> None:
        """Drop whatever the subclass derived from the belief (called when the belief model changes and on reset)."""
