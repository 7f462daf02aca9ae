"""SRTF: shortest remaining (estimated) time first, preemptive, at the requested shape."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agents.common import Estimates, Workspace, configure, fixed_shape, priority_fill
from arena_gym.types import Decision, JobView, OverheadClass, Snapshot


@dataclass(frozen=True)
class SRTFConfig:
    """Settings of :class:`SRTF`: ``relax`` allows spreading a job over more nodes than its best locality."""

    relax: bool = False


class SRTF:
    """Shortest remaining time first over pending and running jobs, at each job's requested shape.

    Decides with: the AP proxy estimate of the job's shape (its current allocation, or the
    request at best locality) times its remaining iterations. Executes with: the simulator's
    ground truth. At every decision point jobs are ranked by remaining time and GPUs of each
    type go to the shortest jobs that fit (:func:`agents.common.priority_fill`): a running job
    is preempted only when a shorter pending job of its type cannot otherwise be placed,
    longest remaining first, and never for nothing. It never changes a job's type or count.
    """

    ap_search = OverheadClass.FULL
    clairvoyant = True  # ranks jobs by their true remaining iterations

    def __init__(self, name: str = "srtf", config: SRTFConfig | None = None, **overrides: Any) -> None:
        self.name = name
        self.config = configure(type(self).__name__, SRTFConfig, config, overrides)
        self._ap = Estimates(dp=False)

    def reset(self) -> None:
        """Forget memoised estimates."""
        self._ap.clear()

    def _remaining_s(self, view: JobView, snapshot: Snapshot) -> float:
        if view.allocation is not None:
            per_iter = self._ap.time(view.spec, view.allocation.shape)
        else:
            shape = fixed_shape(snapshot, self._ap, view)
            if shape is None:
                return math.inf
            per_iter = self._ap.best(view.spec, shape[0], shape[1], snapshot.cluster.group(shape[0]).gpus_per_node)
        return view.remaining_iterations(snapshot.now) * per_iter

    def decide(self, snapshot: Snapshot) -> Decision:
        """Rank all jobs by remaining time; place the shortest, preempting longer ones only if needed."""
        self._ap.bind(snapshot.perf)
        ranked = sorted(
            (*snapshot.pending, *snapshot.running),
            key=lambda v: (self._remaining_s(v, snapshot), v.spec.submit_time, v.job_id),
        )
        ws = Workspace(snapshot)
        priority_fill(
            ws,
            ranked,
            lambda v: fixed_shape(snapshot, self._ap, v),
            lambda v: self._ap.feasible(v.spec),
            self.config.relax,
        )
        return ws.decision(snapshot.perf)
