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
    built the first time it is asked about, then follow every edit. Within a group jobs keep
    their bucket order, so the first job of the highest group is the one a scan of the bucket in
    order keeps under strict improvement. ``change(job, placement)`` is the throughput change of
    halving ``job`` on ``placement``, or None when the halving is infeasible.
    """

    def __init__(self, ws: Workspace, change: Callable[[JobId, Placement], float | None]) -> None:
        self._by_count = ws.by_count
        self._placement = ws.placement
        self._change = change
        self._groups: dict[tuple[str, int], dict[float, dict[JobId, None]]] = {}
        self._of: dict[JobId, float] = {}
        ws.watch(self)

    def best(self, gpu_type: str, top: int, best: Shrink | None) -> Shrink | None:
        """The best of ``best`` and the halvings of jobs holding at least 2 and ``top / 2`` GPUs of ``gpu_type``.

        Buckets are read in the workspace's order, each replacing ``best`` only with a strictly
        larger change, as a scan of every job in order would.
        """
        all_groups = self._groups
        for count, jobs in self._by_count[gpu_type].items():
            if count < 2 or 2 * count < top or not jobs:
                continue
            groups = all_groups.get((gpu_type, count))
            if groups is None:
                groups = self._build(gpu_type, count, jobs)
            if groups:
                change = max(groups)
                if best is None or change > best[0]:
                    best = (change, next(iter(groups[change])))
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
        del group[job]
        if not group:
            del groups[change]

    def _build(self, gpu_type: str, count: int, jobs: dict[JobId, None]) -> dict[float, dict[JobId, None]]:
        groups: dict[float, dict[JobId, None]] = {}
        self._groups[gpu_type, count] = groups
        placement = self._placement
        for job in jobs:
            self._add(groups, job, placement[job])
        return groups

    def _add(self, groups: dict[float, dict[JobId, None]], job: JobId, placement: Placement) -> None:
        change = self._change(job, placement)
        if change is not None:
            group = groups.get(change)
            if group is None:
                group = groups[change] = {}
            group[job] = None
            self._of[job] = change
