"""SRTF: shortest remaining (estimated) time first, preemptive, at the requested shape."""

from __future__ import annotations

import math

import numpy as np

from agents.fcfs import fits_ever, requested
from arena_gym.placement import allocation, node_capacity, place
from arena_gym.types import Allocation, Decision, JobId, JobView, Snapshot, best_locality


class SRTF:
    """Shortest remaining time first over pending and running jobs, at each job's requested shape.

    Decides with: the AP proxy estimate of the requested shape times the remaining iterations.
    Executes with: the simulator's ground truth. At every decision point jobs are ranked by
    remaining time; GPUs of each type go to the shortest jobs that fit. A running job is
    preempted only when a shorter pending job of its type cannot otherwise be placed, longest
    remaining first, so it never preempts for nothing. It never changes a job's type or count.
    """

    ap_search = "full"

    def __init__(self, preemptive: bool = True, name: str = "srtf") -> None:
        self.preemptive = preemptive
        self.name = name

    def reset(self) -> None:
        """SRTF keeps no state."""

    def _remaining_s(self, view: JobView, snapshot: Snapshot) -> float:
        gpu_type, n = requested(view.spec, snapshot)
        shape = view.allocation.shape if view.allocation is not None else None
        if shape is None:
            if not fits_ever(snapshot, gpu_type, n):
                return math.inf
            shape = best_locality(gpu_type, n, node_capacity(snapshot, gpu_type))
        t = snapshot.perf.iter_time(view.spec.model, view.spec.global_batch, shape)
        return view.remaining_iterations(snapshot.now) * t

    def decide(self, snapshot: Snapshot) -> Decision:
        """Rank all jobs by remaining time; place the shortest, preempting longer ones if needed."""
        ranked = sorted(
            ((self._remaining_s(v, snapshot), v.spec.submit_time, v.job_id, v) for v in snapshot.pending + snapshot.running),
            key=lambda r: r[:3],
        )
        budget = {t: int(f.sum()) + sum(v.allocation.num_gpus for v in snapshot.running if v.allocation.shape.gpu_type == t)
                  for t, f in snapshot.free.items()}
        selected: set[JobId] = set()
        for remaining, _, job_id, view in ranked:
            gpu_type, n = (view.allocation.shape.gpu_type, view.allocation.num_gpus) if view.allocation else requested(view.spec, snapshot)
            if not math.isfinite(remaining) or not fits_ever(snapshot, gpu_type, n) or budget[gpu_type] < n:
                continue
            budget[gpu_type] -= n
            selected.add(job_id)
        victims = {t: [v for _, _, _, v in reversed(ranked) if v.allocation is not None and v.job_id not in selected
                       and v.allocation.shape.gpu_type == t] for t in snapshot.free} if self.preemptive else {t: [] for t in snapshot.free}
        free = {t: np.array(f) for t, f in snapshot.free.items()}
        chosen: list[tuple[JobId, Allocation]] = []
        preempted: list[JobId] = []
        for _, _, job_id, view in ranked:
            if job_id not in selected or view.allocation is not None:
                continue
            gpu_type, n = requested(view.spec, snapshot)
            cap = node_capacity(snapshot, gpu_type)
            trial = free[gpu_type].copy()
            placement = place(trial, cap, gpu_type, n)
            taken = 0
            while placement is None and taken < len(victims[gpu_type]):
                victim = victims[gpu_type][taken]
                taken += 1
                for node in victim.allocation.placement.nodes:
                    trial[node] += victim.allocation.placement.gpus_per_node
                placement = place(trial, cap, gpu_type, n)
            if placement is None:
                continue  # even preempting every longer job would not make room: preempt none
            free[gpu_type] = trial
            preempted.extend(v.job_id for v in victims[gpu_type][:taken])
            del victims[gpu_type][:taken]
            for node in placement.nodes:
                free[gpu_type][node] -= placement.gpus_per_node
            chosen.append((job_id, allocation(snapshot.perf, view.spec, placement)))
        return Decision(allocations=tuple(chosen), preemptions=tuple(preempted))
