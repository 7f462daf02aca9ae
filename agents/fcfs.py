"""FCFS: first come, first served on the user's requested GPU type and count."""

from __future__ import annotations

import math

import numpy as np

from arena_gym.placement import allocation, node_capacity, place
from arena_gym.types import Allocation, Decision, JobId, JobSpec, Snapshot, best_locality


def requested(spec: JobSpec, snapshot: Snapshot) -> tuple[str, int]:
    """The job's requested (GPU type, count); a missing type means the cluster's first type, a missing count 1."""
    return spec.requested_gpu_type or snapshot.cluster.gpu_types[0], spec.requested_gpus or 1


def fits_ever(snapshot: Snapshot, gpu_type: str, num_gpus: int) -> bool:
    """Whether the cluster could ever hold ``num_gpus`` of ``gpu_type``."""
    return gpu_type in snapshot.free and num_gpus <= snapshot.free[gpu_type].size * node_capacity(snapshot, gpu_type)


class FCFS:
    """First come, first served at the requested shape, with per-type head-of-line blocking.

    Decides with: the AP proxy estimates only to check feasibility (it never changes a job's
    type or count, so the artifact evaluates it with AP-optimal data). Executes with: the
    simulator's ground truth. As in the artifact, a job waits while an earlier job of the same
    GPU type is pending; jobs whose request can never be met (type absent, too many GPUs, no
    feasible plan) are skipped rather than blocking their type forever. ``relax`` allows
    spreading a job over more nodes than its best locality (the artifact's ``fcfs-r``).
    """

    ap_search = "full"
    clairvoyant = False  # knows only what was requested and when

    def __init__(self, relax: bool = False, name: str = "fcfs") -> None:
        self.relax = relax
        self.name = name

    def reset(self) -> None:
        """FCFS keeps no state."""

    def decide(self, snapshot: Snapshot) -> Decision:
        """Start pending jobs in submission order until every GPU type is blocked."""
        free = {t: np.array(f) for t, f in snapshot.free.items()}
        blocked: set[str] = set()
        chosen: list[tuple[JobId, Allocation]] = []
        for view in snapshot.pending:
            if len(blocked) == len(free):
                break
            spec = view.spec
            gpu_type, n = requested(spec, snapshot)
            if gpu_type in blocked or not fits_ever(snapshot, gpu_type, n):
                continue
            cap = node_capacity(snapshot, gpu_type)
            if not math.isfinite(snapshot.perf.iter_time(spec.model, spec.global_batch, best_locality(gpu_type, n, cap))):
                continue
            placement = place(free[gpu_type], cap, gpu_type, n, self.relax)
            if placement is None:
                blocked.add(gpu_type)
                continue
            for node in placement.nodes:
                free[gpu_type][node] -= placement.gpus_per_node
            chosen.append((spec.job_id, allocation(snapshot.perf, spec, placement)))
        return Decision(allocations=tuple(chosen))
