"""Tiresias (NSDI'19), discretised two-dimensional least-attained-service (2D-LAS).

Clean-room reimplementation from the published description.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from agents.common import Estimates, Workspace, configure, fixed_shape, priority_fill
from arena_gym.types import Decision, JobId, JobView, OverheadClass, Snapshot

#: One GPU-hour in GPU-seconds.
GPU_HOUR = 3600.0


@dataclass(frozen=True)
class TiresiasConfig:
    """Settings of :class:`Tiresias`.

    ``thresholds_gpu_s``: attained-service boundaries between the priority queues, in
    GPU-seconds (K thresholds make K + 1 queues). The default, 1 and 10 GPU-hours, spaces
    queues exponentially as Tiresias does; on Arena's Philly trace (median job ≈ 100+
    GPU-hours) it separates the first hour of every job from the bulk of long jobs.
    ``starvation_factor``: a preempted job that has waited longer than this many times its
    executed time (attained GPU-seconds / GPUs) is promoted back to the highest queue
    (Tiresias' starvation guard); None disables promotion.
    ``relax``: allow spreading a job over more nodes than its best locality.
    """

    thresholds_gpu_s: tuple[float, ...] = (1 * GPU_HOUR, 10 * GPU_HOUR)
    starvation_factor: float | None = 8.0
    relax: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "thresholds_gpu_s", tuple(self.thresholds_gpu_s))
        t = self.thresholds_gpu_s
        if any(x <= 0 for x in t) or list(t) != sorted(set(t)):
            raise ValueError(f"Tiresias thresholds must be positive and strictly increasing, got {t}")
        if self.starvation_factor is not None and not self.starvation_factor > 0:
            raise ValueError(f"starvation_factor must be > 0 or None, got {self.starvation_factor}")


class Tiresias:
    """Discretised 2D-LAS: priority queues on attained GPU-seconds, FIFO within a queue, preemptive.

    Decides with: each job's requested GPU type and count (it never scales or retypes a job);
    the AP proxy estimate serves only to check that the requested shape is feasible. Executes
    with: the simulator's ground truth. A job's queue is the number of thresholds its attained
    service (``view.attained_gpu_seconds(now)``, GPUs x seconds) has passed. Jobs are ranked by
    queue, then running before pending (so jobs of one queue never preempt each other), then
    submission time. GPUs of each type go down that ranking; a pending job preempts running
    jobs of lower rank when it needs their GPUs. Starvation guard: see :class:`TiresiasConfig`.
    Decisions happen at the backend's decision points (arrivals, completions, optional rounds),
    so a demotion takes effect at the next one.
    """

    ap_search = OverheadClass.FULL
    clairvoyant = False  # ranks jobs by attained service only

    def __init__(self, name: str = "tiresias", config: TiresiasConfig | None = None, **overrides: Any) -> None:
        self.name = name
        self.config = configure(type(self).__name__, TiresiasConfig, config, overrides)
        self._ap = Estimates(dp=False)
        self._offset: dict[JobId, float] = {}  # attained service forgiven at a starvation promotion
        self._preempted_at: dict[JobId, float] = {}

    def reset(self) -> None:
        """Forget promotions, preemption times and cached estimates."""
        self._ap.clear()
        self._offset.clear()
        self._preempted_at.clear()

    def queue(self, view: JobView, now: float) -> int:
        """The job's priority queue (0 = highest)."""
        service = view.attained_gpu_seconds(now) - self._offset.get(view.job_id, 0.0)
        return bisect.bisect_right(self.config.thresholds_gpu_s, service)

    def _promote_starved(self, snapshot: Snapshot) -> None:
        factor = self.config.starvation_factor
        for view in snapshot.pending:
            since = self._preempted_at.get(view.job_id)
            if factor is None or since is None or view.allocation is not None:
                continue
            gpus = view.spec.requested_gpus or 1
            executed_s = view.attained_gpu_s / gpus
            if snapshot.now - since >= factor * executed_s:
                self._offset[view.job_id] = view.attained_gpu_s
                del self._preempted_at[view.job_id]

    def decide(self, snapshot: Snapshot) -> Decision:
        """Rank jobs by (queue, running first, submit time) and fill each GPU type down the ranking."""
        self._ap.bind(snapshot.perf)
        self._promote_starved(snapshot)
        now = snapshot.now
        ranked = sorted(
            (*snapshot.pending, *snapshot.running),
            key=lambda v: (self.queue(v, now), v.allocation is None, v.spec.submit_time, v.job_id),
        )
        ws = Workspace(snapshot)
        priority_fill(
            ws,
            ranked,
            lambda v: fixed_shape(snapshot, self._ap, v),
            lambda v: self._ap.feasible(v.spec),
            self.config.relax,
        )
        decision = ws.decision(snapshot.perf)
        for job_id in decision.preemptions:
            self._preempted_at[job_id] = now
        for job_id, _ in decision.allocations:
            self._preempted_at.pop(job_id, None)
        return decision
