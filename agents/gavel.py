"""Gavel (OSDI'20) max-sum-throughput, as adapted by the Arena artifact: a job x GPU-type MILP.

Clean-room reimplementation from the published description and docs/arena.md §8.4,
solved with HiGHS through :mod:`agents.milp`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from agents.common import AssignmentJob, AssignmentPolicy, TypeCount, configure, holding, requested, room_with
from agents.milp import MilpConfig
from arena_gym.types import JobSpec, JobStatus, JobView, Snapshot


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


class Gavel(AssignmentPolicy):
    """Heterogeneity-aware max-sum-throughput: a MILP assigning jobs to GPU types at their requested counts.

    Decides with: data-parallel-only estimates (``perf.dp_iter_time``; ``inf`` = ruled out by
    the DP memory rule: that type is excluded for the job). Executes with: the simulator's
    ground truth (the AP plan of the chosen shape).

    At every decision point (arrivals and departures), over the pending jobs that could fit
    (``max_pending``) and the running jobs with room on another type (``max_movable``), it
    solves (:func:`agents.common.assign`, through the outline of
    :class:`agents.common.AssignmentPolicy`; HiGHS unless the capacity-free optimum already fits)::

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

    clairvoyant = False  # throughput only

    def __init__(self, name: str = "gavel", config: GavelConfig | None = None, **overrides: Any) -> None:
        super().__init__(name)
        self.config = configure(type(self).__name__, GavelConfig, config, overrides)
        self._norm: dict[tuple[object, int, int], dict[str, float]] = {}

    def _forget(self) -> None:
        """Forget the normalised throughputs."""
        self._norm.clear()

    def normalised_throughput(self, snapshot: Snapshot, spec: JobSpec, num_gpus: int) -> dict[str, float]:
        """DP throughput of ``spec`` at ``num_gpus`` per feasible type, divided by its best (types with none omitted)."""
        key = (spec.model, spec.global_batch, num_gpus)
        norm = self._norm.get(key)
        if norm is None:
            times = {t: v for (t, n), v in self.belief.configs(snapshot.cluster, spec).items() if n == num_gpus}
            fastest = min(times.values(), default=math.inf)
            norm = self._norm[key] = {t: fastest / v for t, v in times.items()}
        return norm

    def _problem(
        self, snapshot: Snapshot, free: dict[str, int]
    ) -> tuple[list[AssignmentJob], list[AssignmentJob]] | None:
        """The pending jobs that fit the room and the running jobs offered a type change, valued per type."""
        movers = self._movable(snapshot, free)
        room = room_with(free, (holding(view) for view, _ in movers))
        waiting = self._pending(snapshot, room)
        if not waiting and not any(gain > 0 for _, gain in movers):
            return None
        jobs = self._jobs(
            [(v, None) for v in waiting] + [(v, v.allocation.shape.gpu_type) for v, _ in movers], snapshot
        )
        return jobs[: len(waiting)], jobs[len(waiting) :]

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
        for view in snapshot.pending:  # the queue is in submission order
            n = requested(view.spec, snapshot)[1]
            if any(room[t] >= n for t in self.normalised_throughput(snapshot, view.spec, n)):
                out.append(view)
                if len(out) == self.config.max_pending:
                    break
        return out

    def _jobs(self, candidates: list[tuple[JobView, str | None]], snapshot: Snapshot) -> list[AssignmentJob]:
        """The assignment problem: value ``n * (normalised throughput - move penalty + FIFO bonus)`` per type."""
        cfg = self.config
        by_age = sorted(
            range(len(candidates)), key=lambda i: (candidates[i][0].spec.submit_time, candidates[i][0].job_id)
        )
        bonus = [0.0] * len(candidates)
        for rank, i in enumerate(by_age):
            bonus[i] = cfg.fifo_bonus * (len(candidates) - rank) / len(candidates)
        jobs = []
        for i, (view, current) in enumerate(candidates):
            n = view.allocation.num_gpus if current is not None else requested(view.spec, snapshot)[1]
            values = {
                TypeCount(t, n): n * (v - (cfg.min_move_gain if current not in (None, t) else 0.0) + bonus[i])
                for t, v in self.normalised_throughput(snapshot, view.spec, n).items()
            }
            jobs.append(AssignmentJob(view.job_id, values, TypeCount(current, n) if current is not None else None))
        return jobs
