"""Information sets: what a policy is shown of a snapshot.

A clairvoyant policy (``policy.clairvoyant`` true) sees the backend's snapshot as it is. Every
other policy sees the same snapshot with each job's :class:`~arena_gym.types.JobSpec` replaced by
a :class:`~arena_gym.types.HiddenSpec`: its true length cannot be read (reading it, or a view's
``remaining_iterations``, raises :class:`~arena_gym.types.HiddenInformation` naming the policy),
while attained iterations and service, age, queueing, the request, model, batch, estimates and
the cluster state stay readable; the snapshot's ``fork`` (a copy of the true backend) is
withheld. The hidden views are built lazily, as the policy reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, overload

from arena_gym.types import HiddenSpec, JobId, JobSpec, JobView, JobViews, ModelRef, Placement, Snapshot


def is_clairvoyant(policy: Any) -> bool:
    """Whether ``policy`` declares that it sees the truth (``clairvoyant``; absent means no)."""
    return bool(getattr(policy, "clairvoyant", False))


class Masker:
    """Turns snapshots into what the non-clairvoyant policy ``viewer`` may see (memoised per job id: one per episode)."""

    def __init__(self, viewer: str) -> None:
        self.viewer = viewer
        self._specs: dict[JobId, HiddenSpec] = {}
        self._views: dict[JobId, tuple[JobView, JobView]] = {}

    def spec(self, spec: JobSpec) -> HiddenSpec:
        """The hidden form of ``spec`` (the same object for every view of the job)."""
        hidden = self._specs.get(spec.job_id)
        if hidden is None:
            hidden = self._specs[spec.job_id] = HiddenSpec.of(spec, self.viewer)
        return hidden

    def view(self, view: JobView) -> JobView:
        """``view`` with its spec hidden (cached while the backend hands out the same view)."""
        cached = self._views.get(view.job_id)
        if cached is not None and cached[0] is view:
            return cached[1]
        hidden = dataclasses.replace(view, spec=self.spec(view.spec))
        self._views[view.job_id] = (view, hidden)
        return hidden

    def snapshot(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` as the viewer may see it."""
        return dataclasses.replace(
            snapshot,
            pending=HiddenViews(snapshot.pending, self.view),
            running=HiddenViews(snapshot.running, self.view),
            fork=None,  # the backend's copy holds the true lengths and the true future
        )


def information_set(policy: Any) -> Callable[[Snapshot], Snapshot]:
    """What ``policy`` is shown of each snapshot: the snapshot itself, or its hidden form."""
    if is_clairvoyant(policy):
        return lambda snapshot: snapshot
    return Masker(str(getattr(policy, "name", type(policy).__name__))).snapshot


class HiddenViews(JobViews):
    """A snapshot's job views with every spec hidden, read lazily through ``hide``."""

    __slots__ = ("_inner", "_hide")

    def __init__(self, inner: JobViews, hide: Callable[[JobView], JobView]) -> None:
        super().__init__()
        self._inner = inner
        self._hide = hide

    def __len__(self) -> int:
        return len(self._inner)

    @overload
    def __getitem__(self, index: int) -> JobView: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[JobView, ...]: ...

    def __getitem__(self, index: int | slice) -> JobView | tuple[JobView, ...]:
        if isinstance(index, slice):
            return tuple(map(self._hide, self._inner[index]))
        return self._hide(self._inner[index])

    def __iter__(self) -> Iterator[JobView]:
        return map(self._hide, self._inner)

    def __reversed__(self) -> Iterator[JobView]:
        return map(self._hide, reversed(self._inner))

    def placements(self) -> dict[JobId, Placement]:
        """Job id -> placement of the jobs holding GPUs (placements are never hidden)."""
        return self._inner.placements()

    def get(self, job_id: str) -> JobView | None:
        """The hidden view of ``job_id`` if it is in this sequence, else None."""
        view = self._inner.get(job_id)
        return None if view is None else self._hide(view)

    def requesting(self, gpu_type: str | None) -> Sequence[JobView]:
        """The hidden views of the jobs that requested ``gpu_type``, in order."""
        return HiddenViews(_as_views(self._inner.requesting(gpu_type)), self._hide)

    def by_config(self) -> Mapping[tuple[ModelRef, int], Sequence[JobView]]:
        """The hidden views grouped by job configuration."""
        return {config: HiddenViews(_as_views(views), self._hide) for config, views in self._inner.by_config().items()}


def _as_views(views: Sequence[JobView]) -> JobViews:
    return views if isinstance(views, JobViews) else JobViews(views)
