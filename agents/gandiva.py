"""Gandiva (OSDI'18) as adapted by the Arena artifact: migration plus grow/shrink, one GPU type per job.

Clean-room reimplementation from the published description and docs/arena.md §8.4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from agents.common import (
    Estimates,
    ShapeOk,
    Workspace,
    configure,
    ordered,
    remaining_seconds,
    requested,
    runnable_at_request,
)
from arena_gym.types import (
    GPU_COUNTS,
    Decision,
    JobStatus,
    JobView,
    OverheadClass,
    Placement,
    ResourceShape,
    Snapshot,
    best_locality,
)


@dataclass(frozen=True)
class GandivaConfig:
    """Settings of :class:`Gandiva`.

    ``max_grow_factor``: a job grows to at most this multiple of its requested GPU count
    (and never beyond 16 GPUs). ``min_grow_speedup``: a doubling is taken only if the AP
    estimate speeds the job up at least this much (Gandiva's introspection keeps a grow only
    when it pays). ``min_remaining_s``: only jobs with at least this many estimated seconds
    left grow (a grow costs a restart). ``max_migrations``: running jobs moved per decision
    to defragment nodes for a waiting job. ``relax``: allow spreading a job over more nodes
    than its best locality when nothing else fits.
    """

    max_grow_factor: int = 4
    min_grow_speedup: float = 1.2
    min_remaining_s: float = 1800.0
    max_migrations: int = 4
    relax: bool = False

    def __post_init__(self) -> None:
        if self.max_grow_factor < 1 or self.max_grow_factor & (self.max_grow_factor - 1):
            raise ValueError(f"max_grow_factor must be a power of two >= 1, got {self.max_grow_factor}")
        if not self.min_grow_speedup >= 1:
            raise ValueError(f"min_grow_speedup must be >= 1, got {self.min_grow_speedup}")
        if self.min_remaining_s < 0 or self.max_migrations < 0:
            raise ValueError("min_remaining_s and max_migrations must be >= 0")


class Gandiva:
    """Introspective packing with migration and grow/shrink inside each job's requested GPU type.

    Decides with: AP proxy estimates (``perf.iter_time``; the artifact evaluates Gandiva with
    AP-optimal data because it never changes a job's type). Executes with: the simulator's
    ground truth. Per GPU type, in submission order, a pending job gets its requested count:

    1. at best locality if it fits;
    2. else grown jobs of that type shrink back to their request (most grown first) until it
       fits (nothing shrinks if that would not be enough);
    3. else a migration packs single-node jobs off the nodes it needs (at most
       ``max_migrations`` moves);
    4. else (``relax``) at a spread locality; otherwise it waits and blocks its type.

    When no job of a type waits, running jobs of that type grow into idle GPUs by doubling,
    best estimated speedup first, while the speedup is at least ``min_grow_speedup``.
    No heterogeneity: a job never leaves its requested type.
    """

    ap_search = OverheadClass.FULL
    clairvoyant = True  # skips jobs whose true remaining time is short

    def __init__(self, name: str = "gandiva", config: GandivaConfig | None = None, **overrides: Any) -> None:
        self.name = name
        self.config = configure(type(self).__name__, GandivaConfig, config, overrides)
        self._ap = Estimates(dp=False)

    def reset(self) -> None:
        """Forget cached estimates."""
        self._ap.clear()

    def decide(self, snapshot: Snapshot) -> Decision:
        """Admit (shrinking or migrating if needed), then grow into idle GPUs, type by type."""
        self._ap.bind(snapshot.perf)
        ws = Workspace(snapshot)
        waiting: dict[str, list[JobView]] = {t: [] for t in ws.types}
        for view in snapshot.pending:  # the queue is in submission order
            shape = runnable_at_request(snapshot, self._ap, view.spec)
            if shape is not None:
                waiting[shape[0]].append(view)
        running = ordered(snapshot.running)
        for gpu_type, queue in waiting.items():
            blocked = False
            for view in queue:
                if not self._admit(ws, snapshot, view, running):
                    blocked = True
                    break
            if not blocked:
                self._grow(ws, snapshot, gpu_type, running)
        return ws.decision(snapshot.perf)

    # ------------------------------------------------------------------ admission
    def _admit(self, ws: Workspace, snapshot: Snapshot, view: JobView, running: list[JobView]) -> bool:
        gpu_type, n = requested(view.spec, snapshot)
        ok = self._ap.feasible(view.spec)
        placement = ws.find(gpu_type, n, ok=ok)
        if placement is None:
            placement = self._shrink_for(ws, snapshot, gpu_type, n, ok, running)
        if placement is None:
            placement = self._defragment(ws, gpu_type, best_locality(gpu_type, n, ws.capacity[gpu_type]), running)
        if placement is None and self.config.relax:
            placement = ws.find(gpu_type, n, relax=True, ok=ok)
        if placement is None:
            return False
        ws.hold(view.job_id, placement)
        return True

    def _shrink_for(
        self, ws: Workspace, snapshot: Snapshot, gpu_type: str, n: int, ok: ShapeOk, running: list[JobView]
    ) -> Placement | None:
        """Shrink grown jobs of ``gpu_type`` back to their request, most grown first, until ``n`` GPUs fit."""
        grown = [
            (ws.placement[v.job_id].num_gpus / requested(v.spec, snapshot)[1], v)
            for v in running
            if v.job_id in ws.placement
            and ws.placement[v.job_id].gpu_type == gpu_type
            and ws.placement[v.job_id].num_gpus > requested(v.spec, snapshot)[1]
        ]
        if not grown:
            return None
        mark = ws.checkpoint()
        for _, view in sorted(grown, key=lambda g: (-g[0], g[1].spec.submit_time, g[1].job_id)):
            back = requested(view.spec, snapshot)[1]
            if ws.move(view.job_id, gpu_type, back, ok=self._ap.feasible(view.spec)) is None:
                continue
            placement = ws.find(gpu_type, n, ok=ok)
            if placement is not None:
                return placement
        ws.rollback(mark)
        return None

    def _defragment(
        self, ws: Workspace, gpu_type: str, shape: ResourceShape, running: list[JobView]
    ) -> Placement | None:
        """Move single-node jobs off the ``shape.n_nodes`` cheapest nodes so ``shape`` fits there; None if impossible."""
        if self.config.max_migrations == 0 or ws.free_gpus(gpu_type) < shape.num_gpus:
            return None
        free = ws.free[gpu_type]
        specs = {v.job_id: v.spec for v in running}
        options = []  # (number of jobs to move, those jobs, node)
        for node in range(len(free)):
            need = shape.gpus_per_node - int(free[node])
            if need <= 0:
                options.append((0, (), node))
                continue
            movable = sorted(
                (j for j in ws.occupants(gpu_type, node) if len(ws.placement[j].nodes) == 1 and j in specs),
                key=lambda j: (-ws.placement[j].gpus_per_node, j),
            )
            chosen, freed = [], 0
            for j in movable:
                if freed >= need:
                    break
                chosen.append(j)
                freed += ws.placement[j].gpus_per_node
            if freed >= need:
                options.append((len(chosen), tuple(chosen), node))
        options.sort()
        picked = options[: shape.n_nodes]
        if len(picked) < shape.n_nodes or sum(len(o[1]) for o in picked) > self.config.max_migrations:
            return None
        mark = ws.checkpoint()
        targets = [node for _, _, node in picked]
        evicted = [j for _, jobs, _ in picked for j in jobs]
        placements = {j: ws.release(j) for j in evicted}
        elsewhere = ws.free[gpu_type].copy()
        elsewhere[targets] = 0
        for j in sorted(evicted, key=lambda j: (-placements[j].num_gpus, j)):
            old = placements[j]
            new = ws.find(gpu_type, old.num_gpus, ok=self._ap.feasible(specs[j]), free=elsewhere)
            if new is None or new.shape != old.shape:
                ws.rollback(mark)
                return None
            ws.hold(j, new)
            elsewhere[list(new.nodes)] -= new.gpus_per_node
        placement = ws.find(gpu_type, shape.num_gpus, free=_only(ws.free[gpu_type], targets))
        if placement is None:
            ws.rollback(mark)
        return placement

    # ------------------------------------------------------------------ growth
    def _grow(self, ws: Workspace, snapshot: Snapshot, gpu_type: str, running: list[JobView]) -> None:
        cap = ws.capacity[gpu_type]
        candidates = [
            v
            for v in running
            if v.status is JobStatus.RUNNING
            and v.job_id in ws.placement
            and not ws.changed(v.job_id)
            and ws.placement[v.job_id].gpu_type == gpu_type
        ]
        while candidates:
            options = []
            for view in candidates:
                n = ws.placement[view.job_id].num_gpus
                limit = min(GPU_COUNTS[-1], self.config.max_grow_factor * requested(view.spec, snapshot)[1])
                if 2 * n > limit or n > ws.free_gpus(gpu_type):
                    continue
                now_t = self._ap.time(view.spec, ws.placement[view.job_id].shape)
                if remaining_seconds(view, snapshot.now, now_t) < self.config.min_remaining_s:
                    continue
                speedup = now_t / self._ap.best(view.spec, gpu_type, 2 * n, cap)
                if speedup >= self.config.min_grow_speedup:
                    options.append((-speedup, view.spec.submit_time, view.job_id, view))
            if not options:
                return
            *_, best = min(options, key=lambda o: o[:3])
            doubled = 2 * ws.placement[best.job_id].num_gpus
            if ws.move(best.job_id, gpu_type, doubled, ok=self._ap.feasible(best.spec)) is None:
                candidates.remove(best)


def _only(free: np.ndarray, nodes: list[int]) -> np.ndarray:
    """``free`` with every node outside ``nodes`` zeroed."""
    out = np.zeros_like(free)
    out[nodes] = free[nodes]
    return out
