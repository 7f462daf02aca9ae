"""ElasticFlow-LS: ElasticFlow (ASPLOS'23) with loose deadlines, as adapted by the Arena artifact.

Clean-room reimplementation from the published description and docs/arena.md §8.4, §5.7.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agents.common import DpBelief, Workspace, configure, remaining_seconds, requested
from arena_gym.types import Decision, JobId, JobStatus, JobView, OverheadClass, Snapshot, best_locality


@dataclass(frozen=True)
class ElasticFlowConfig:
    """Settings of :class:`ElasticFlowLS`.

    ``deadline_slack_s``: every job's deadline is its submission time plus this slack; the
    "-LS" default 1e9 s (docs/arena.md §5.7) makes every deadline loose, so the minimum
    satisfactory share is the smallest DP-feasible GPU count and the policy turns throughput
    oriented. ``min_remaining_s``: only jobs with at least this many estimated seconds left
    get extra GPUs (a resize costs a restart). ``relax``: allow spread localities.
    """

    deadline_slack_s: float = 1e9
    min_remaining_s: float = 1800.0
    relax: bool = False

    def __post_init__(self) -> None:
        if not self.deadline_slack_s > 0 or self.min_remaining_s < 0:
            raise ValueError("deadline_slack_s must be > 0 and min_remaining_s >= 0")


class ElasticFlowLS:
    """Admission control on the minimum satisfactory share, then progressive filling, per GPU type.

    Decides with: data-parallel-only estimates (``perf.dp_iter_time``; ``inf`` = ruled out by
    the DP memory rule, never chosen). Executes with: the simulator's ground truth (the AP
    plan of the chosen shape). Jobs stay on their requested GPU type; counts are powers of two.

    1. Admission, earliest deadline first (with loose deadlines: submission order): a pending
       job needs its minimum satisfactory share, the smallest DP-feasible count that meets its
       deadline (the fastest count when none does). If it does not fit, running jobs above
       their own minimum share shrink to their next smaller feasible count, smallest loss of
       throughput per freed GPU first; if even that is not enough nothing shrinks, the job
       waits, and later jobs of that type wait behind it (earlier deadlines first).
    2. Progressive filling: when no job of the type waits, idle GPUs go to the job with the
       highest marginal throughput gain per added GPU (DP samples/s), one doubling to its next
       feasible count at a time, while the gain is positive.
    """

    ap_search = OverheadClass.FULL
    clairvoyant = True  # sizes jobs from their true remaining iterations

    def __init__(self, name: str = "elasticflow-ls", config: ElasticFlowConfig | None = None, **overrides: Any) -> None:
        self.name = name
        self.config = configure(type(self).__name__, ElasticFlowConfig, config, overrides)
        self.belief = DpBelief()

    def reset(self) -> None:
        """Forget cached estimates."""
        self.belief.clear()

    # ------------------------------------------------------------------ estimates
    def min_share(self, snapshot: Snapshot, view: JobView, gpu_type: str) -> int | None:
        """The minimum satisfactory share: smallest DP-feasible count meeting the deadline (None: never feasible)."""
        counts = self.belief.dp.counts(snapshot.cluster, view.spec, gpu_type)
        if not counts:
            return None
        cap = snapshot.cluster.group(gpu_type).gpus_per_node
        left = view.spec.submit_time + self.config.deadline_slack_s - snapshot.now
        times = {n: self.belief.dp.best(view.spec, gpu_type, n, cap) for n in counts}
        for n in counts:
            if remaining_seconds(view, snapshot.now, times[n]) <= left:
                return n
        return min(counts, key=lambda n: (times[n], n))

    # ------------------------------------------------------------------ decide
    def decide(self, snapshot: Snapshot) -> Decision:
        """Admission control per type in deadline order, then progressive filling of idle GPUs."""
        self.belief.bind(snapshot.perf)
        ws = Workspace(snapshot)
        views = ws.views
        floors: dict[JobId, int] = {}  # minimum shares, filled as needed
        blocked: set[str] = set()
        # every deadline is submission + the same slack: deadline order is the snapshot's submission order
        for view in snapshot.pending:
            if len(blocked) == len(ws.types):
                break
            gpu_type = requested(view.spec, snapshot)[0]
            if (
                gpu_type in blocked
                or gpu_type not in ws.free
                or not self.belief.dp.counts(snapshot.cluster, view.spec, gpu_type)
            ):
                continue  # DP-infeasible at every count on its type: ElasticFlow cannot admit it
            share = self.min_share(snapshot, view, gpu_type)
            if share is not None and self._admit(ws, snapshot, view, gpu_type, share, floors, views):
                floors[view.job_id] = share
            else:
                blocked.add(gpu_type)
        for gpu_type in ws.types:
            if gpu_type not in blocked:
                self._fill(ws, snapshot, gpu_type, views)
        return ws.decision(snapshot.perf)

    def _admit(
        self,
        ws: Workspace,
        snapshot: Snapshot,
        view: JobView,
        gpu_type: str,
        share: int,
        floors: dict[JobId, int],
        views: Mapping[JobId, JobView],
    ) -> bool:
        ok = self.belief.ok(view.spec)
        placement = ws.find(gpu_type, share, self.config.relax, ok)
        if placement is None:
            mark = ws.checkpoint()
            while placement is None:
                if not self._shrink_one(ws, snapshot, gpu_type, floors, views):
                    ws.rollback(mark)
                    return False
                placement = ws.find(gpu_type, share, self.config.relax, ok)
        ws.hold(view.job_id, placement)
        return True

    def _shrink_one(
        self, ws: Workspace, snapshot: Snapshot, gpu_type: str, floors: dict[JobId, int], views: Mapping[JobId, JobView]
    ) -> bool:
        """Shrink the job of ``gpu_type`` above its floor that loses least throughput per freed GPU."""
        cap = ws.capacity[gpu_type]
        options = []
        for job_id, p in ws.placement.items():
            if p.gpu_type != gpu_type:
                continue
            if job_id not in floors:
                share = self.min_share(snapshot, views[job_id], gpu_type)
                floors[job_id] = share if share is not None else p.num_gpus
            spec = views[job_id].spec
            counts = self.belief.dp.counts(snapshot.cluster, spec, gpu_type)
            smaller = [n for n in counts if floors[job_id] <= n < p.num_gpus]
            if not smaller:
                continue
            n = smaller[-1]
            smaller_thr = self.belief.dp.throughput(spec, best_locality(gpu_type, n, cap))
            loss = (self.belief.dp.throughput(spec, p.shape) - smaller_thr) / (p.num_gpus - n)
            options.append((loss, spec.submit_time, job_id, n))
        for _loss, _, job_id, n in sorted(options):
            if ws.move(job_id, gpu_type, n, self.config.relax, self.belief.ok(views[job_id].spec)) is not None:
                return True
        return False

    def _fill(self, ws: Workspace, snapshot: Snapshot, gpu_type: str, views: Mapping[JobId, JobView]) -> None:
        """Progressive filling: give idle GPUs of ``gpu_type`` to the best marginal gains per GPU."""
        if ws.free_gpus(gpu_type) == 0:
            return
        cap = ws.capacity[gpu_type]
        heap: list[tuple[float, float, JobId, int]] = []

        def push(job_id: JobId) -> None:
            view, p = views[job_id], ws.placement[job_id]
            bigger = [n for n in self.belief.dp.counts(snapshot.cluster, view.spec, gpu_type) if n > p.num_gpus]
            if not bigger or bigger[0] - p.num_gpus > ws.free_gpus(gpu_type):
                return
            n = bigger[0]
            bigger_thr = self.belief.dp.throughput(view.spec, best_locality(gpu_type, n, cap))
            gain = (bigger_thr - self.belief.dp.throughput(view.spec, p.shape)) / (n - p.num_gpus)
            if gain > 0:
                heapq.heappush(heap, (-gain, view.spec.submit_time, job_id, n))

        for job_id, p in list(ws.placement.items()):
            view = views[job_id]
            if p.gpu_type != gpu_type:
                continue
            if view.allocation is not None:  # running: only settled jobs with enough work left
                if view.status is not JobStatus.RUNNING or ws.changed(job_id):
                    continue
                left = remaining_seconds(view, snapshot.now, self.belief.dp.time(view.spec, p.shape))
                if left < self.config.min_remaining_s:
                    continue
            push(job_id)
        while heap and ws.free_gpus(gpu_type) > 0:
            _, _, job_id, n = heapq.heappop(heap)
            if n - ws.placement[job_id].num_gpus > ws.free_gpus(gpu_type):
                continue
            if ws.move(job_id, gpu_type, n, self.config.relax, self.belief.ok(views[job_id].spec)) is not None:
                push(job_id)
