"""Workspace: a private, undoable copy of GPU occupancy for one decision."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from arena_gym.types import JobId, Placement, Snapshot

#: One workspace edit: (job, placement before, placement after); None means "holds no GPUs".
Change = tuple[JobId, Placement | None, Placement | None]


class Workspace:
    """Free GPUs per node, a node -> jobs occupancy map and job placements, with an undo log.

    Built from a snapshot's free arrays (copied) and its running jobs; the snapshot is never
    touched. Every edit goes through :meth:`set` and is logged, so a search can try a change,
    read ``changes_since`` a checkpoint, and ``rollback`` without copying the cluster.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        groups = snapshot.cluster.groups
        self.types: tuple[str, ...] = tuple(g.gpu_type for g in groups)
        self.capacity: dict[str, int] = {g.gpu_type: g.gpus_per_node for g in groups}
        self.nodes: dict[str, int] = {g.gpu_type: g.nodes for g in groups}
        self.free: dict[str, np.ndarray] = {t: np.array(snapshot.free[t], dtype=np.int64) for t in self.types}
        self.total_free: dict[str, int] = {t: int(f.sum()) for t, f in self.free.items()}
        self.placement: dict[JobId, Placement] = {}
        self.jobs_of: dict[str, dict[JobId, None]] = {t: {} for t in self.types}
        self.by_count: dict[str, dict[int, dict[JobId, None]]] = {t: {} for t in self.types}
        self._occupants: dict[str, dict[int, dict[JobId, int]]] = {t: {} for t in self.types}
        self._log: list[Change] = []
        for view in snapshot.running:
            if view.allocation is not None:
                self._link(view.job_id, view.allocation.placement)

    # ------------------------------------------------------------------ edits
    def set(self, job: JobId, new: Placement | None) -> None:
        """Move ``job`` to ``new`` (None: take it off the cluster), logging the change."""
        old = self.placement.get(job)
        if old == new:
            return
        self._apply(job, old, new)
        self._log.append((job, old, new))

    def checkpoint(self) -> int:
        """A mark to roll back to."""
        return len(self._log)

    def rollback(self, mark: int) -> None:
        """Undo every edit made after ``mark``."""
        log = self._log
        while len(log) > mark:
            job, old, new = log.pop()
            self._apply(job, new, old)

    def changes_since(self, mark: int) -> tuple[Change, ...]:
        """The edits made after ``mark``, in order."""
        return tuple(self._log[mark:])

    def replay(self, changes: Iterable[Change]) -> None:
        """Redo recorded edits (on the state they were recorded from)."""
        for job, _, new in changes:
            self.set(job, new)

    # ------------------------------------------------------------------ queries
    def fits(self, placement: Placement) -> bool:
        """Whether every node of ``placement`` has its GPUs free."""
        free = self.free[placement.gpu_type]
        return all(free[n] >= placement.gpus_per_node for n in placement.nodes)

    def occupants(self, gpu_type: str, node: int) -> dict[JobId, int]:
        """Jobs on one node and the GPUs each holds there (read-only use)."""
        return self._occupants[gpu_type].get(node, {})

    def largest(self, gpu_type: str) -> int:
        """The largest GPU count a job of ``gpu_type`` holds (0 if none)."""
        return max((c for c, jobs in self.by_count[gpu_type].items() if jobs), default=0)

    # ------------------------------------------------------------------ internals
    def _apply(self, job: JobId, old: Placement | None, new: Placement | None) -> None:
        if old is not None:
            self._unlink(job, old)
        if new is not None:
            self._link(job, new, charge=True)

    def _link(self, job: JobId, p: Placement, charge: bool = False) -> None:
        t, per = p.gpu_type, p.gpus_per_node
        occupants = self._occupants[t]
        free = self.free[t]
        for node in p.nodes:
            occupants.setdefault(node, {})[job] = per
            if charge:
                free[node] -= per
        if charge:
            self.total_free[t] -= per * len(p.nodes)
        self.placement[job] = p
        self.jobs_of[t][job] = None
        self.by_count[t].setdefault(per * len(p.nodes), {})[job] = None

    def _unlink(self, job: JobId, p: Placement) -> None:
        t, per = p.gpu_type, p.gpus_per_node
        occupants = self._occupants[t]
        free = self.free[t]
        for node in p.nodes:
            del occupants[node][job]
            free[node] += per
        self.total_free[t] += per * len(p.nodes)
        del self.placement[job]
        del self.jobs_of[t][job]
        del self.by_count[t][per * len(p.nodes)][job]
