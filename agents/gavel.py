"""Gavel (OSDI'20) max-sum-throughput, as adapted by the Arena artifact: a job x GPU-type MILP.

Clean-room reimplementation from the published description and reference/arena.md §8.4,
solved with HiGHS through :mod:`agents.milp`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

from agents.baselines_common import (
    AssignmentJob,
    Estimates,
    ShapeOk,
    Workspace,
    assign,
    dp_feasible,
    ordered,
)
from agents.fcfs import requested
from agents.milp import MilpConfig, MilpError
from arena_gym.types import Decision, JobSpec, JobStatus, JobView, Snapshot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GavelConfig:
    """Settings of :class:`Gavel`.

    ``max_migrations``: running jobs that may change GPU type per allocation event (the
    artifact's ``MAX_MGRT_JOB_NUM`` = 3). ``min_move_gain``: normalised throughput a running job
    must gain per GPU to be worth a type change (its restart costs minutes); 0 reproduces the
    bare max-sum objective. ``max_pending``: pending jobs (first in submission order among those
    that could fit) per solve; ``max_movable``: running jobs offered a type change per solve,
    largest gain first. Both keep the MILP small. ``fifo_bonus``: a tiny objective bonus for
    older jobs that breaks ties in submission order. ``relax``: packing placement may spread a
    job over more nodes when its best locality does not fit (the artifact's placement does).
    """

    max_migrations: int = 3
    min_move_gain: float = 0.05
    max_pending: int = 64
    max_movable: int = 6
    fifo_bonus: float = 1e-3
    relax: bool = True
    milp: MilpConfig = field(default_factory=MilpConfig)

    def __post_init__(self) -> None:
        if self.max_migrations < 0 or self.max_pending < 1 or self.max_movable < 0:
            raise ValueError("max_migrations and max_movable must be >= 0, max_pending >= 1")
        if self.min_move_gain < 0 or not 0 <= self.fifo_bonus < 0.01:
            raise ValueError("min_move_gain must be >= 0 and fifo_bonus in [0, 0.01)")


class Gavel:
    """Heterogeneity-aware max-sum-throughput: a MILP assigning jobs to GPU types at their requested counts.

    Decides with: data-parallel-only estimates (``perf.dp_iter_time``; ``inf`` = ruled out by
    the DP memory rule: that type is excluded for the job). Executes with: the simulator's
    ground truth (the AP plan of the chosen shape).

    At every decision point (arrivals and departures), over the pending jobs that could fit
    (``max_pending``) and the running jobs with room on another type (``max_movable``), it
    solves (:func:`agents.baselines_common.assign`; HiGHS unless the capacity-free optimum
    already fits)::

        max  sum_j sum_t  w[j,t] x[j,t]
        s.t. sum_t x[j,t] <= 1            pending job j (admitted to at most one type)
             sum_t x[j,t]  = 1            running job j (never preempted)
             sum_j n_j x[j,t] <= free_t + GPUs of type t held by the running jobs in the MILP
             sum_{running j} sum_{t != type_j} x[j,t] <= max_migrations

    with ``w[j,t] = n_j * thr[j,t] / max_t' thr[j,t']``: the job's DP throughput on type t
    normalised by its best type (normalised, as in Gavel's heterogeneity-aware policies, so
    that jobs whose throughputs are in different units compare), weighted by its GPU count
    (Gavel's scale factor, so a 16-GPU job counts as much as sixteen 1-GPU jobs); minus
    ``n_j * min_move_gain`` for a type change; plus the FIFO tie-break. GPU counts stay at the request (no scaling).
    The chosen assignment is then placed by packing (``arena_gym.placement``, best locality
    first); a job that cannot be placed waits, a move that cannot be placed is dropped.
    """

    ap_search = "full"
    clairvoyant = False  # throughput only

    def __init__(self, name: str = "gavel", max_migrations: int = GavelConfig.max_migrations,
                 min_move_gain: float = GavelConfig.min_move_gain, max_pending: int = GavelConfig.max_pending,
                 max_movable: int = GavelConfig.max_movable, fifo_bonus: float = GavelConfig.fifo_bonus,
                 relax: bool = GavelConfig.relax, milp: MilpConfig | None = None) -> None:
        self.name = name
        self.config = GavelConfig(max_migrations, min_move_gain, max_pending, max_movable, fifo_bonus, relax,
                                  milp if milp is not None else MilpConfig())
        self._dp = Estimates(dp=True)
        self._ap = Estimates(dp=False)
        self._norm: dict[tuple[object, int, int], dict[str, float]] = {}
        self.solves = 0

    def reset(self) -> None:
        """Forget cached estimates and the MILP solve count."""
        self._dp.clear()
        self._ap.clear()
        self._norm.clear()
        self.solves = 0

    def normalised_throughput(self, snapshot: Snapshot, spec: JobSpec, num_gpus: int) -> dict[str, float]:
        """DP throughput of ``spec`` at ``num_gpus`` per feasible type, divided by its best (types with none omitted)."""
        key = (spec.model, spec.global_batch, num_gpus)
        norm = self._norm.get(key)
        if norm is None:
            dp_table = self._dp.configs(snapshot.cluster, spec)
            ap_table = self._ap.configs(snapshot.cluster, spec)
            times = {t: dp_table[(t, n)] for t, n in dp_table if n == num_gpus and (t, n) in ap_table}
            fastest = min(times.values(), default=math.inf)
            norm = self._norm[key] = {t: fastest / v for t, v in times.items()}
        return norm

    def _ok(self, spec: JobSpec) -> ShapeOk:
        return dp_feasible(self._dp, self._ap, spec)

    def decide(self, snapshot: Snapshot) -> Decision:
        """Solve the max-sum-throughput MILP over the jobs that can change, then place its answer."""
        if self._dp.bind(snapshot.perf) | self._ap.bind(snapshot.perf):
            self._norm.clear()
        ws = Workspace(snapshot)
        free = {t: ws.free_gpus(t) for t in ws.free}
        movers = self._movable(snapshot, free)
        room = dict(free)
        for view, _ in movers:
            room[view.allocation.shape.gpu_type] += view.allocation.num_gpus
        waiting = self._pending(snapshot, room)
        if not waiting and not any(gain > 0 for _, gain in movers):
            return Decision()
        jobs = self._jobs([(v, None) for v in waiting] + [(v, v.allocation.shape.gpu_type) for v, _ in movers], snapshot)
        try:
            result = assign(jobs, room, self.config.max_migrations, self.config.milp)
        except MilpError as exc:
            log.warning("%s keeps the current allocation: %s", self.name, exc)
            return Decision()
        self.solves += result.by_milp
        views = ws.views
        for view, _ in movers:
            target = result.choice[view.job_id]
            if target[0] != view.allocation.shape.gpu_type:
                ws.move(view.job_id, target[0], target[1], self.config.relax, self._ok(view.spec))
        admitted = sorted(((c, views[j]) for j, c in result.choice.items() if views[j].allocation is None),
                          key=lambda cv: (-cv[0][1], cv[1].spec.submit_time, cv[1].job_id))
        for (gpu_type, n), view in admitted:
            placement = ws.find(gpu_type, n, self.config.relax, self._ok(view.spec))
            if placement is not None:
                ws.hold(view.job_id, placement)
        return ws.decision(snapshot.perf)

    def _movable(self, snapshot: Snapshot, free: dict[str, int]) -> list[tuple[JobView, float]]:
        """Running jobs offered a type change, with their best net gain: settled, room on another feasible type."""
        if self.config.max_migrations == 0:
            return []
        out = []
        for view in snapshot.running:
            if view.status is not JobStatus.RUNNING:
                continue
            n, current = view.allocation.num_gpus, view.allocation.shape.gpu_type
            norm = self.normalised_throughput(snapshot, view.spec, n)
            others = [v for t, v in norm.items() if t != current and free[t] >= n]
            if current in norm and others:
                gain = max(others) - norm[current] - self.config.min_move_gain
                out.append((-gain, view.spec.submit_time, view.job_id, view))
        out.sort(key=lambda o: o[:3])
        return [(view, -neg_gain) for neg_gain, _, _, view in out[: self.config.max_movable]]

    def _pending(self, snapshot: Snapshot, room: dict[str, int]) -> list[JobView]:
        """The first ``max_pending`` pending jobs (submission order) that fit the room of some feasible type."""
        out = []
        for view in ordered(snapshot.pending):
            n = requested(view.spec, snapshot)[1]
            if any(room[t] >= n for t in self.normalised_throughput(snapshot, view.spec, n)):
                out.append(view)
                if len(out) == self.config.max_pending:
                    break
        return out

    def _jobs(self, candidates: list[tuple[JobView, str | None]], snapshot: Snapshot) -> list[AssignmentJob]:
        """The assignment problem: value ``n * (normalised throughput - move penalty + FIFO bonus)`` per type."""
        cfg = self.config
        by_age = sorted(range(len(candidates)), key=lambda i: (candidates[i][0].spec.submit_time, candidates[i][0].job_id))
        bonus = [0.0] * len(candidates)
        for rank, i in enumerate(by_age):
            bonus[i] = cfg.fifo_bonus * (len(candidates) - rank) / len(candidates)
        jobs = []
        for i, (view, current) in enumerate(candidates):
            n = view.allocation.num_gpus if current is not None else requested(view.spec, snapshot)[1]
            values = {(t, n): n * (v - (cfg.min_move_gain if current not in (None, t) else 0.0) + bonus[i])
                      for t, v in self.normalised_throughput(snapshot, view.spec, n).items()}
            jobs.append(AssignmentJob(view.job_id, values, (current, n) if current is not None else None))
        return jobs
