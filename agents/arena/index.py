"""Halving a job in place, and ShrinkIndex: the jobs a downgrade may halve, grouped so that the best is read without a scan."""

from __future__ import annotations

import functools
from collections.abc import Callable

from agents.common import ShapeKey, Workspace
from arena_gym.types import JobId, Placement

#: (throughput change, job) of a halving; the job is None for the target's own request.
Shrink = tuple[float, JobId | None]


@functools.lru_cache(maxsize=65536)
def halved(p: Placement) -> Placement:
    """Shrink in place to half the GPUs: drop half the nodes, or half the GPUs of a single node.

    One object per placement (memoised), so that memos keyed by placement object keep their answers.
    """
    if len(p.nodes) > 1:
        return Placement(p.gpu_type, p.nodes[: len(p.nodes) // 2], p.gpus_per_node)
    return Placement(p.gpu_type, p.nodes, p.gpus_per_node // 2)


def halved_key(p: Placement) -> ShapeKey:
    """The memo key of the shape :func:`halved` gives."""
    n = len(p.nodes)
    return (p.gpu_type, n // 2, p.gpus_per_node) if n > 1 else (p.gpu_type, 1, p.gpus_per_node // 2)


class ShrinkIndex:
    """Per GPU type and count (>= 2), the jobs whose halving is feasible, grouped by the throughput change it makes.

    A :class:`~agents.common.IndexWatcher` of the workspace's ``by_count``: a bucket's groups are
    built the first time it is asked about, then follow every edit. The tie rule: among jobs whose
    halvings change the throughput equally, the lowest job id is chosen (:func:`tie_first`), so the
    answer depends on the placements only, never on the order in which jobs took them.
    ``change(job, placement)`` is the throughput change of halving ``job`` on ``placement``, or
    None when the halving is infeasible.
    """

    def __init__(self, ws: Workspace, change: Callable[[JobId, Placement], float | None]) -> None:
        self._by_count = ws.by_count
        self._placement = ws.placement
        self._change = change
        self._groups: dict[tuple[str, int], dict[float, _Group]] = {}
        self._of: dict[JobId, float] = {}
        ws.watch(self)

    def best(self, gpu_type: str, top: int) -> Shrink | None:
        """The best halving of a job holding at least 2 and ``top / 2`` GPUs of ``gpu_type`` (ties: lowest job id)."""
        all_groups = self._groups
        best: Shrink | None = None
        for count, jobs in self._by_count[gpu_type].items():
            if count < 2 or 2 * count < top or not jobs:
                continue
            groups = all_groups.get((gpu_type, count))
            if groups is None:
                groups = self._build(gpu_type, count, jobs)
            if groups:
                change = max(groups)
                if best is None or change > best[0]:
                    best = (change, groups[change].first())
                elif change == best[0]:
                    best = (change, tie_first(best[1], groups[change].first()))
        return best

    def linked(self, job: JobId, placement: Placement) -> None:
        """Add ``job`` at the end of its group (if its bucket is indexed and its halving feasible)."""
        groups = self._groups.get((placement.gpu_type, len(placement.nodes) * placement.gpus_per_node))
        if groups is not None:
            self._add(groups, job, placement)

    def unlinked(self, job: JobId, placement: Placement) -> None:
        """Take ``job`` out of its group."""
        change = self._of.pop(job, None)
        if change is None:
            return
        groups = self._groups[placement.gpu_type, len(placement.nodes) * placement.gpus_per_node]
        group = groups[change]
        group.discard(job)
        if not group.jobs:
            del groups[change]

    def _build(self, gpu_type: str, count: int, jobs: dict[JobId, None]) -> dict[float, _Group]:
        groups: dict[float, _Group] = {}
        self._groups[gpu_type, count] = groups
        placement = self._placement
        for job in jobs:
            self._add(groups, job, placement[job])
        return groups

    def _add(self, groups: dict[float, _Group], job: JobId, placement: Placement) -> None:
        change = self._change(job, placement)
        if change is not None:
            group = groups.get(change)
            if group is None:
                group = groups[change] = _Group()
            group.add(job)
            self._of[job] = change


def tie_first(a: JobId, b: JobId) -> JobId:
    """Arena's tie rule among equally ranked jobs: the lowest job id."""
    return a if a <= b else b


class _Group:
    """The jobs whose halvings make one throughput change, with the lowest id kept (found again when it leaves)."""

    __slots__ = ("jobs", "_first")

    def __init__(self) -> None:
        self.jobs: set[JobId] = set()
        self._first: JobId | None = None

    def add(self, job: JobId) -> None:
        self.jobs.add(job)
        if self._first is not None and job < self._first:
            self._first = job

    def discard(self, job: JobId) -> None:
        self.jobs.discard(job)
        if job == self._first:
            self._first = None

    def first(self) -> JobId:
        """The lowest job id of the group (not empty)."""
        if self._first is None:
            self._first = min(self.jobs)
        return self._first
