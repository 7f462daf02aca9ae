"""Queue orders for Arena: who is admitted and restarted first, and who counts as blocked.

Arena walks its queue in submission order (FIFO). A :class:`Priority` replaces that order by
keys computed from each snapshot (lowest first), and says how urgent each job's progress is
(expected completions per sample of service: what the weighted upgrade trial and downgrade
search multiply a samples/s gain by). :class:`ShortestRemaining` orders by the true remaining run time at the
requested shape (clairvoyant: shortest remaining processing time; urgency 1 / remaining
samples); the belief's Gittins index (non-clairvoyant) is
:class:`agents.arena.gittins.GittinsPriority`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from agents.common import Estimates, requested
from arena_gym.placement import node_capacity
from arena_gym.types import JobView, Snapshot


class Priority(Protocol):
    """Keys that order a snapshot's jobs (lower first); ``clairvoyant`` if they read the true remaining work.

    A priority may remember the episode (it sees every snapshot the policy sees, in order):
    ``reset`` forgets it, ``fork`` copies it for a rollout.
    """

    clairvoyant: bool

    def keys(self, snapshot: Snapshot) -> Callable[[JobView], tuple]:
        """The key of each job of ``snapshot`` (memoised within the snapshot)."""
        ...

    def urgency(self, snapshot: Snapshot) -> Callable[[JobView], float]:
        """Each job's expected completions per sample of further service (>= 0; only ratios between jobs matter)."""
        ...

    def targets(self, snapshot: Snapshot) -> Callable[[JobView], int] | None:
        """The most GPUs the upgrade trial may grow each job to (a sizing target), or None: the config's ceiling for all."""
        ...

    def reset(self) -> None:
        """Forget the episode."""
        ...

    def fork(self) -> Priority:
        """A copy that goes on independently."""
        ...


class ShortestRemaining:
    """Shortest remaining run time first: remaining iterations x the belief's time per iteration at the request."""

    clairvoyant = True

    def __init__(self) -> None:
        self._estimates = Estimates(dp=False)

    def reset(self) -> None:
        """Nothing to forget (the estimates' memo is kept per belief model)."""

    def fork(self) -> ShortestRemaining:
        """Itself: it keeps no episode state."""
        return self

    def targets(self, snapshot: Snapshot) -> None:
        """No sizing targets: the config's ceiling."""
        return None

    def keys(self, snapshot: Snapshot) -> Callable[[JobView], tuple]:
        """(remaining seconds at the requested shape, submit time, job id)."""
        self._estimates.bind(snapshot.perf)
        now, memo = snapshot.now, {}

        def key(view: JobView) -> tuple:
            found = memo.get(view.job_id)
            if found is None:
                gpu_type, n = requested(view.spec, snapshot)
                per_iter = self._estimates.best(view.spec, gpu_type, n, node_capacity(snapshot, gpu_type))
                found = memo[view.job_id] = (
                    view.remaining_iterations(now) * per_iter,
                    view.spec.submit_time,
                    view.job_id,
                )
            return found

        return key

    def urgency(self, snapshot: Snapshot) -> Callable[[JobView], float]:
        """1 / the remaining samples (remaining iterations x global batch)."""
        now = snapshot.now

        def weight(view: JobView) -> float:
            return 1.0 / max(view.remaining_iterations(now) * view.spec.global_batch, 1.0)

        return weight
