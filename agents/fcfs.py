"""FCFS: first come, first served on the user's requested GPU type and count."""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agents.common import FreeGpus, configure, order_key
from arena_gym.placement import allocation
from arena_gym.types import Allocation, Decision, JobId, JobView, OverheadClass, Snapshot, best_locality


@dataclass(frozen=True)
class FCFSConfig:
    """Settings of :class:`FCFS`: ``relax`` allows spreading a job over more nodes than its best locality."""

    relax: bool = False


class FCFS:
    """First come, first served at the requested shape, with per-type head-of-line blocking.

    Decides with: the AP proxy estimates only to check feasibility (it never changes a job's
    type or count, so the artifact evaluates it with AP-optimal data). Executes with: the
    simulator's ground truth. As in the artifact, a job waits while an earlier job of the same
    GPU type is pending; jobs whose request can never be met (type absent, too many GPUs, no
    feasible plan) are skipped rather than blocking their type forever. ``relax`` allows
    spreading a job over more nodes than its best locality (the artifact's ``fcfs-r``).
    """

    ap_search = OverheadClass.FULL
    clairvoyant = False  # knows only what was requested and when

    def __init__(self, name: str = "fcfs", config: FCFSConfig | None = None, **overrides: Any) -> None:
        self.name = name
        self.config = configure(type(self).__name__, FCFSConfig, config, overrides)

    def reset(self) -> None:
        """FCFS keeps no state."""

    def decide(self, snapshot: Snapshot) -> Decision:
        """Start pending jobs in submission order until every GPU type is blocked.

        GPU types do not compete, so each type's queue is served on its own (the snapshot's
        per-type index): a decision reads only the jobs it starts, the one that blocks each
        type, and the never-runnable jobs ahead of it, however long the queue; a type without
        free GPUs is not read at all.
        """
        types = snapshot.cluster.gpu_types
        gpus = FreeGpus(snapshot)
        pending, iter_time, relax = snapshot.pending, snapshot.perf.iter_time, self.config.relax
        chosen: list[tuple[float, JobId, Allocation]] = []
        for gpu_type in types:
            if gpus.total_free[gpu_type] == 0:
                continue  # nothing of this type can start: its queue need not be read
            cap = gpus.capacity[gpu_type]
            most = cap * len(snapshot.free[gpu_type])  # more GPUs than the type has: never runnable
            queue: Iterable[JobView] = pending.requesting(gpu_type)
            if gpu_type == types[0]:  # jobs without a requested type run on the cluster's first type
                untyped = pending.requesting(None)
                if untyped:
                    queue = heapq.merge(queue, untyped, key=order_key)
            for view in queue:
                spec = view.spec
                n = spec.requested_gpus or 1
                if n > most or not math.isfinite(
                    iter_time(spec.model, spec.global_batch, best_locality(gpu_type, n, cap))
                ):
                    continue  # can never run: blocks nobody
                placement = gpus.find(gpu_type, n, relax)
                if placement is None:
                    break  # head-of-line blocking of this type
                gpus.take(placement)
                chosen.append((spec.submit_time, spec.job_id, allocation(snapshot.perf, spec, placement)))
        chosen.sort(key=lambda c: c[:2])  # submission order, as the queue is
        return Decision(allocations=tuple((job_id, alloc) for _, job_id, alloc in chosen))
