"""Scratch occupancy for building one decision: free GPUs per node, who holds what, and an undo log.

:class:`FreeGpus` is a private copy of a snapshot's free GPUs with placement search (what a
policy that only starts jobs needs, e.g. FCFS); :class:`Workspace` adds the jobs' holdings, an
undo log (try an edit, read what changed, roll back without copying the cluster) and the
:class:`Decision` that turns the snapshot into the workspace. The snapshot is never touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol

import numpy as np

from agents.common.estimates import ShapeOk
from arena_gym.placement import allocation, place_shape
from arena_gym.types import Decision, JobId, JobView, PerfModel, Placement, Snapshot, localities

#: One workspace edit: (job, placement before, placement after); None means "holds no GPUs".
Change = tuple[JobId, Placement | None, Placement | None]


class _Copies(Mapping[str, np.ndarray]):
    """Writable int64 copies of a snapshot's free-GPU arrays (every type), each made when first read."""

    def __init__(self, source: Mapping[str, np.ndarray]) -> None:
        self._source = source
        self.made: dict[str, np.ndarray] = {}

    def __getitem__(self, gpu_type: str) -> np.ndarray:
        copy = self.made.get(gpu_type)
        if copy is None:
            copy = self.made[gpu_type] = np.array(self._source[gpu_type], dtype=np.int64)
        return copy

    def __iter__(self) -> Iterator[str]:
        return iter(self._source)

    def __len__(self) -> int:
        return len(self._source)


class FreeGpus:
    """Free GPUs per node of every type, copied from a snapshot, and placements found in them.

    ``free`` (type -> free GPUs per node) copies a type's array when it is first read, so a
    policy pays only for the types it places on.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        groups = snapshot.cluster.groups
        self.types: tuple[str, ...] = tuple(g.gpu_type for g in groups)
        self.capacity: dict[str, int] = {g.gpu_type: g.gpus_per_node for g in groups}
        self.nodes: dict[str, int] = {g.gpu_type: g.nodes for g in groups}
        source = snapshot.free
        copies = _Copies(source)
        self.free: Mapping[str, np.ndarray] = copies
        self._copied = copies.made  # the arrays copied so far, for the edit paths
        add = np.add.reduce
        self.total_free: dict[str, int] = {t: int(add(source[t])) for t in self.types}

    def free_gpus(self, gpu_type: str) -> int:
        """Free GPUs of a type."""
        return self.total_free[gpu_type]

    def total_gpus(self, gpu_type: str) -> int:
        """All GPUs of a type."""
        return self.nodes[gpu_type] * self.capacity[gpu_type]

    def fits(self, placement: Placement) -> bool:
        """Whether every node of ``placement`` has its GPUs free."""
        free = self.free[placement.gpu_type]
        return all(free[n] >= placement.gpus_per_node for n in placement.nodes)

    def find(
        self,
        gpu_type: str,
        num_gpus: int,
        relax: bool = False,
        ok: ShapeOk | None = None,
        free: np.ndarray | None = None,
    ) -> Placement | None:
        """A placement of ``num_gpus`` GPUs of ``gpu_type``: best locality, then (``relax``) more spread ones.

        Nodes are chosen best-fit (:func:`arena_gym.placement.place_shape`). Only shapes accepted
        by ``ok`` are tried; ``free`` overrides the free-GPU array of the type.
        """
        cap = self.capacity.get(gpu_type)
        if cap is None:  # a type the cluster lacks
            return None
        if free is None:
            if self.total_free[gpu_type] < num_gpus:
                return None
            free = self.free[gpu_type]
        elif int(free.sum()) < num_gpus:
            return None
        if num_gpus > len(free) * cap:
            return None
        shapes = localities(gpu_type, num_gpus, cap)
        for shape in shapes if relax else shapes[:1]:
            if ok is not None and not ok(shape):
                continue
            placement = place_shape(free, shape)
            if placement is not None:
                return placement
        return None

    def take(self, placement: Placement) -> None:
        """Mark the GPUs of ``placement`` as used (a :class:`Workspace` changes holdings with ``set``/``hold``)."""
        free, per = self.free[placement.gpu_type], placement.gpus_per_node
        for node in placement.nodes:
            free[node] -= per
        self.total_free[placement.gpu_type] -= per * len(placement.nodes)


class IndexWatcher(Protocol):
    """Something kept in step with :attr:`Workspace.by_count` (see :meth:`Workspace.watch`)."""

    def linked(self, job: JobId, placement: Placement) -> None:
        """``job`` now holds ``placement``: it was appended to its (type, count) bucket."""

    def unlinked(self, job: JobId, placement: Placement) -> None:
        """``job`` no longer holds ``placement``: it left its (type, count) bucket."""


class Workspace(FreeGpus):
    """Free GPUs per node, a node -> jobs occupancy map and job placements, with an undo log.

    Built from a snapshot's free arrays (copied) and its running jobs. Every edit goes through
    :meth:`set` and is logged, so a search can try a change, read :meth:`changes_since` a
    :meth:`checkpoint`, and :meth:`rollback`. ``placement`` (job -> placement) lists jobs in the
    order they last took their placement; :meth:`decision` lists changed jobs in that order, a
    rollback restoring the order as it was at the checkpoint.

    The jobs by type and GPU count (:attr:`by_count`) and the per-node occupancy
    (:meth:`occupants`) are each built on first use (``by_count`` at once with ``index=True``),
    after which their order (new entries last) follows every edit; a policy that iterates
    ``by_count`` in order builds it at once. Watchers (:meth:`watch`) hear of every change of
    ``by_count``.
    """

    def __init__(self, snapshot: Snapshot, index: bool = False) -> None:
        super().__init__(snapshot)
        self.snapshot = snapshot
        self._occupants: dict[str, dict[int, dict[JobId, int]]] | None = None
        self._by_count: dict[str, dict[int, dict[JobId, None]]] | None = None
        self._largest: dict[str, int] = {}  # per type, once asked: the largest count a job holds (by_count kept)
        self._watchers: tuple[IndexWatcher, ...] = ()
        self._log: list[Change] = []
        self._order_log: list[int | None] = []  # per logged edit: the job's order before it
        self._touched: dict[JobId, None] = {}  # every job ever edited, in the order first edited
        placement = snapshot.running.placements()  # read without building the jobs' views
        order = dict(zip(placement, range(1, len(placement) + 1)))  # when each job last took its placement
        self.placement = placement
        self._rank = order  # position in the snapshot's running jobs
        self._order = dict(order)
        self._tick = len(order)
        self.views = SnapshotViews(snapshot)
        self.original: dict[JobId, Placement] = dict(placement)
        if index:
            self._build_by_count()

    # ------------------------------------------------------------------ edits
    def set(self, job: JobId, new: Placement | None) -> None:
        """Move ``job`` to ``new`` (None: take it off the cluster), logging the change; no-op if unchanged."""
        old = self.placement.get(job)
        if old is new or (old is not None and new is not None and old == new):
            return
        self._touched[job] = None
        self._order_log.append(self._order.get(job))
        if old is not None:
            self._unlink(job, old)
        if new is not None:
            self._link(job, new)
        self._log.append((job, old, new))

    def release(self, job: JobId) -> Placement | None:
        """Give back the GPUs ``job`` holds (if any) and return its former placement."""
        old = self.placement.get(job)
        self.set(job, None)
        return old

    def hold(self, job: JobId, placement: Placement) -> None:
        """Let ``job`` (re)take ``placement``; any previous holding is released first, and must leave it free."""
        self.set(job, None)
        if not self.fits(placement):
            raise ValueError(f"job {job}: placement {placement} is not free in the workspace")
        self.set(job, placement)

    def move(
        self, job: JobId, gpu_type: str, num_gpus: int, relax: bool = False, ok: ShapeOk | None = None
    ) -> Placement | None:
        """Re-place ``job`` on ``num_gpus`` GPUs of ``gpu_type`` (its own GPUs count as free).

        Returns the new placement, or None (and the job takes its old one back) if nothing fits.
        """
        old = self.release(job)
        placement = self.find(gpu_type, num_gpus, relax, ok)
        if placement is None:
            if old is not None:
                self.hold(job, old)
            return None
        self.hold(job, placement)
        return placement

    def checkpoint(self) -> int:
        """A mark to roll back to."""
        return len(self._log)

    def rollback(self, mark: int) -> None:
        """Undo every edit made after ``mark``."""
        log, order_log, order = self._log, self._order_log, self._order
        while len(log) > mark:
            job, old, new = log.pop()
            before = order_log.pop()
            if new is not None:
                self._unlink(job, new)
            if old is not None:
                self._link(job, old)
            if before is not None:
                order[job] = before

    def changes_since(self, mark: int) -> tuple[Change, ...]:
        """The edits made after ``mark``, in order."""
        return tuple(self._log[mark:])

    def redo(self, changes: Iterable[Change]) -> None:
        """Redo recorded edits (on the state they were recorded from)."""
        for job, _, new in changes:
            self.set(job, new)

    def relink(self, job: JobId, via: Placement) -> None:
        """What ``set(job, via)`` and its rollback leave, without the edit: ``job`` goes last in every order.

        The job keeps its placement and its order stamp; nothing is logged (an undone edit leaves no
        entry); the (type, count) bucket of ``via`` exists afterwards, as the edit would have made it.
        """
        p, before = self.placement[job], self._order[job]
        self._touched[job] = None
        if self._by_count is not None:
            self._by_count[via.gpu_type].setdefault(via.gpus_per_node * len(via.nodes), {})
        self._unlink(job, p)
        self._link(job, p)
        self._order[job] = before

    def watch(self, watcher: IndexWatcher) -> None:
        """Tell ``watcher`` of every later change of :attr:`by_count` (built now if it is not yet)."""
        self._build_by_count()
        self._watchers = (*self._watchers, watcher)

    # ------------------------------------------------------------------ queries
    @property
    def by_count(self) -> dict[str, dict[int, dict[JobId, None]]]:
        """GPU type -> GPU count -> the jobs holding that many GPUs of the type (read-only use)."""
        by_count = self._by_count
        return by_count if by_count is not None else self._build_by_count()

    def occupants(self, gpu_type: str, node: int) -> dict[JobId, int]:
        """Jobs on one node and the GPUs each holds there (read-only use)."""
        occupants = self._occupants
        if occupants is None:
            occupants = self._occupants = {t: {} for t in self.types}
            for job, p in self.placement.items():
                on_type, per = occupants[p.gpu_type], p.gpus_per_node
                for n in p.nodes:
                    on_type.setdefault(n, {})[job] = per
        return occupants[gpu_type].get(node, {})

    def largest(self, gpu_type: str) -> int:
        """The largest GPU count a job of ``gpu_type`` holds (0 if none; kept up to date once asked)."""
        top = self._largest.get(gpu_type)
        if top is None:
            top = 0
            for count, jobs in self.by_count[gpu_type].items():
                if jobs and count > top:
                    top = count
            self._largest[gpu_type] = top
        return top

    def changed(self, job: JobId) -> bool:
        """Whether ``job``'s holding differs from the snapshot's."""
        return self.placement.get(job) != self.original.get(job)

    def changed_jobs(self) -> list[JobId]:
        """The jobs whose holding differs from the snapshot's: those that held GPUs in the snapshot's
        order, then the others in the order they were first edited (read from the edits, not the cluster)."""
        placement, original, rank = self.placement, self.original, self._rank
        moved = [j for j in self._touched if placement.get(j) != original.get(j)]
        return sorted(moved, key=lambda j: rank.get(j, len(rank) + 1))

    def decision(self, perf: PerfModel) -> Decision:
        """The Decision that turns the snapshot into this workspace (proxy-plan grids from ``perf``).

        Allocations: jobs whose placement changed, in placement order; preemptions: jobs that
        held GPUs and hold none now, in the snapshot's order.
        """
        changed = sorted(
            (j for j, p in self.placement.items() if self.original.get(j) != p), key=self._order.__getitem__
        )
        allocations = tuple((j, allocation(perf, self.views[j].spec, self.placement[j])) for j in changed)
        preemptions = tuple(j for j in self.original if j not in self.placement)
        return Decision(allocations=allocations, preemptions=preemptions)

    # ------------------------------------------------------------------ internals
    def _link(self, job: JobId, p: Placement) -> None:
        t, per, nodes = p.gpu_type, p.gpus_per_node, p.nodes
        free = self._copied.get(t)
        if free is None:
            free = self.free[t]
        for node in nodes:
            free[node] -= per
        count = per * len(nodes)
        self.total_free[t] -= count
        self.placement[job] = p
        self._tick += 1
        self._order[job] = self._tick
        if self._occupants is not None:
            on_type = self._occupants[t]
            for node in nodes:
                on_node = on_type.get(node)
                if on_node is None:
                    on_node = on_type[node] = {}
                on_node[job] = per
        if self._by_count is not None:
            bucket = self._by_count[t].get(count)
            if bucket is None:
                bucket = self._by_count[t][count] = {}
            bucket[job] = None
            top = self._largest.get(t)
            if top is not None and count > top:
                self._largest[t] = count
            for watcher in self._watchers:
                watcher.linked(job, p)

    def _unlink(self, job: JobId, p: Placement) -> None:
        t, per, nodes = p.gpu_type, p.gpus_per_node, p.nodes
        free = self._copied.get(t)
        if free is None:
            free = self.free[t]
        for node in nodes:
            free[node] += per
        count = per * len(nodes)
        self.total_free[t] += count
        del self.placement[job]
        if self._occupants is not None:
            occupants = self._occupants[t]
            for node in nodes:
                del occupants[node][job]
        if self._by_count is not None:
            bucket = self._by_count[t][count]
            del bucket[job]
            if not bucket and self._largest.get(t) == count:
                del self._largest[t]  # the largest holder left: found again when next asked
            for watcher in self._watchers:
                watcher.unlinked(job, p)

    def _build_by_count(self) -> dict[str, dict[int, dict[JobId, None]]]:
        by_count = self._by_count
        if by_count is None:
            by_count = self._by_count = {t: {} for t in self.types}
            for job, p in self.placement.items():
                by_count[p.gpu_type].setdefault(p.gpus_per_node * len(p.nodes), {})[job] = None
        return by_count


class SnapshotViews(Mapping[JobId, JobView]):
    """A snapshot's job views by id, each looked up when first read (no queue scan) and kept."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._cache: dict[JobId, JobView] = {}

    def __getitem__(self, job: JobId) -> JobView:
        view = self._cache.get(job)
        if view is None:
            view = self._snapshot.job(job)
            if view is None:
                raise KeyError(job)
            self._cache[job] = view
        return view

    def __iter__(self) -> Iterator[JobId]:
        for view in (*self._snapshot.pending, *self._snapshot.running):
            yield view.job_id

    def __len__(self) -> int:
        return len(self._snapshot.pending) + len(self._snapshot.running)
