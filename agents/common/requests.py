"""What a job asks for, and whether and when it can run: helpers every policy reads the queue with."""

from __future__ import annotations

import math
from collections.abc import Iterable

from agents.common.estimates import Estimates, TypeCount
from arena_gym.placement import node_capacity
from arena_gym.types import JobSpec, JobView, Snapshot


def requested(spec: JobSpec, snapshot: Snapshot) -> TypeCount:
    """The job's requested (GPU type, count); a missing type means the cluster's first type, a missing count 1."""
    return TypeCount(spec.requested_gpu_type or snapshot.cluster.gpu_types[0], spec.requested_gpus or 1)


def fits_ever(snapshot: Snapshot, gpu_type: str, num_gpus: int) -> bool:
    """Whether the cluster could ever hold ``num_gpus`` of ``gpu_type``."""
    return gpu_type in snapshot.free and num_gpus <= snapshot.free[gpu_type].size * node_capacity(snapshot, gpu_type)


def runnable_at_request(snapshot: Snapshot, ap: Estimates, spec: JobSpec) -> TypeCount | None:
    """The requested (type, count) when the cluster can hold it and the AP proxy plan fits in memory, else None."""
    gpu_type, n = requested(spec, snapshot)
    if not fits_ever(snapshot, gpu_type, n):
        return None
    cap = snapshot.cluster.group(gpu_type).gpus_per_node
    return TypeCount(gpu_type, n) if math.isfinite(ap.best(spec, gpu_type, n, cap)) else None


def holding(view: JobView) -> TypeCount | None:
    """The (type, count) a job holds at the snapshot (None if pending)."""
    alloc = view.allocation
    return None if alloc is None else TypeCount(alloc.shape.gpu_type, alloc.num_gpus)


def order_key(view: JobView) -> tuple[float, str]:
    """Submission order (the snapshot's queue order): submit time, then job id."""
    return view.spec.submit_time, view.job_id


def ordered(views: Iterable[JobView]) -> list[JobView]:
    """Views in submission order (submit time, then job id)."""
    return sorted(views, key=order_key)


def remaining_seconds(view: JobView, now: float, iter_time: float) -> float:
    """Estimated seconds left for ``view`` at ``iter_time`` seconds per iteration."""
    return view.remaining_iterations(now) * iter_time


def fixed_shape(snapshot: Snapshot, ap: Estimates, view: JobView) -> TypeCount | None:
    """The (type, count) of a policy that never scales or retypes: what a job holds, else its runnable request."""
    current = holding(view)
    return current if current is not None else runnable_at_request(snapshot, ap, view.spec)
