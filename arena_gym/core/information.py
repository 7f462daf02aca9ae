"""Information sets: what a policy is shown of a snapshot.

A clairvoyant policy (``policy.clairvoyant`` true) sees the backend's snapshot as it is. Every
other policy sees an observation *computed* for it, not a wrapper around the true state: the
backend's ``snapshot.observe(viewer)`` (:mod:`arena_gym.core.observed`), or, for a snapshot
built by hand, a copy of its views with every spec hidden. Each job's
:class:`~arena_gym.types.JobSpec` is a :class:`~arena_gym.types.HiddenSpec` there: its true
length cannot be read (reading it, or a view's ``remaining_iterations``, raises
:class:`~arena_gym.types.HiddenInformation` naming the policy) and a deadline derived from it
is absent, while attained iterations and service, age, queueing, the request, model, batch, a
declared deadline, estimates and the cluster state stay readable. The snapshot's ``fork`` (a
copy of the true backend) and ``observe`` are withheld. docs/information_sets.md lists every
field.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from arena_gym.types import HiddenSpec, JobId, JobView, JobViews, Snapshot


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
        return dataclasses.replace(
            snapshot,
            pending=JobViews(tuple(map(self._hide, snapshot.pending))),
            running=JobViews(tuple(map(self._hide, snapshot.running))),
            fork=None,
            observe=None,
        )

    def _hide(self, view: JobView) -> JobView:
        spec = self._specs.get(view.job_id)
        if spec is None:
            spec = self._specs[view.job_id] = HiddenSpec.of(view.spec, self.viewer)
        return dataclasses.replace(view, spec=spec)


def information_set(policy: Any) -> Callable[[Snapshot], Snapshot]:
    """What ``policy`` is shown of each snapshot: the snapshot itself, or what it observes."""
    if is_clairvoyant(policy):
        return lambda snapshot: snapshot
    return Masker(viewer_name(policy)).snapshot
