"""Information sets: what a policy is shown of a snapshot.

A clairvoyant policy (``policy.clairvoyant`` true) sees the backend's snapshot as it is. Every
other policy sees an observation *computed* for it, not a wrapper around the true state: the
backend's ``snapshot.observe(viewer)`` (:mod:`arena_gym.core.observed`), or, for a snapshot
built by hand, a copy of its views with every spec hidden. Each job's
:class:`~arena_gym.types.JobSpec` is a :class:`~arena_gym.types.HiddenSpec` there: its true
length cannot be read (reading it, or a view's ``remaining_iterations``, raises
:class:`~arena_gym.types.HiddenInformation` naming the policy) and a deadline derived from it
is absent, while attained iterations and service, age, queueing, the request, model, batch, a
declared deadline, estimates and the cluster state stay readable; the snapshot's ``observe`` is
withheld. docs/information_sets.md lists every field.

No snapshot carries a copy of its backend. Given a backend that can fork
(:class:`~arena_gym.types.Forkable`, the simulator), a clairvoyant policy's information set
shows it each snapshot as a :class:`~arena_gym.types.ForkableSnapshot`, with the backend's
``fork`` (the true state and future, for the clairvoyant search); no other policy is shown one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from arena_gym.protocols import ClusterBackend
from arena_gym.types import Forkable, ForkableSnapshot, HiddenSpec, JobId, JobView, JobViews, Snapshot


def is_clairvoyant(policy: Any) -> bool:
    """Whether ``policy`` declares that it sees the truth (``clairvoyant``; absent means no)."""
    return bool(getattr(policy, "clairvoyant", False))


def viewer_name(policy: Any) -> str:
    """The name a policy's hidden specs carry (its ``name``, else its class name)."""
    return str(getattr(policy, "name", type(policy).__name__))


class Masker:
    """Turns snapshots into what the non-clairvoyant policy ``viewer`` observes."""

    def __init__(self, viewer: str) -> None:
        self.viewer = viewer
        self._specs: dict[JobId, HiddenSpec] = {}

    def snapshot(self, snapshot: Snapshot) -> Snapshot:
        """``snapshot`` as the viewer observes it."""
        if snapshot.observe is not None:
            return snapshot.observe(self.viewer)
        return snapshot.plain(
            pending=JobViews(tuple(map(self._hide, snapshot.pending))),
            running=JobViews(tuple(map(self._hide, snapshot.running))),
            observe=None,
        )

    def _hide(self, view: JobView) -> JobView:
        spec = self._specs.get(view.job_id)
        if spec is None:
            spec = self._specs[view.job_id] = HiddenSpec.of(view.spec, self.viewer)
        return dataclasses.replace(view, spec=spec)


def information_set(policy: Any, backend: ClusterBackend | None = None) -> Callable[[Snapshot], Snapshot]:
    """What ``policy`` is shown of each snapshot of ``backend``: the snapshot itself, or what it observes.

    A clairvoyant policy is shown the snapshot with the backend's ``fork`` where ``backend`` can
    fork (a :class:`~arena_gym.types.ForkableSnapshot`), else the snapshot itself.
    """
    if is_clairvoyant(policy):
        if isinstance(backend, Forkable):
            fork = backend.fork
            return lambda snapshot: ForkableSnapshot.of(snapshot, fork)
        return lambda snapshot: snapshot
    return Masker(viewer_name(policy)).snapshot
