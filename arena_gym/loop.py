"""The one decide-apply-advance loop, shared by the simulator and the live runner."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from arena_gym.core.information import information_set, is_clairvoyant
from arena_gym.protocols import ClusterBackend, Policy
from arena_gym.records import EpisodeRecord
from arena_gym.types import JobSpec


def run_episode(
    backend: ClusterBackend, policy: Policy, jobs: Sequence[JobSpec], progress: bool = False
) -> EpisodeRecord:
    """Run ``policy`` on ``backend`` over ``jobs`` until drained or the horizon; return the record.

    The policy sees each snapshot through its information set (:mod:`arena_gym.core.information`):
    a non-clairvoyant one cannot read any job's true length; a clairvoyant one is shown the
    backend's fork with each snapshot where the backend can fork.
    """
    policy.reset()
    decisions, wall = 0, 0.0
    bar = _DelayedBar(len(jobs), policy.name) if progress else None
    clock = time.perf_counter
    shown = information_set(policy, backend)
    decide, apply, advance = policy.decide, backend.apply, backend.advance
    snapshot = backend.reset(jobs)
    while snapshot is not None:
        t0 = clock()
        decision = decide(shown(snapshot))
        wall += clock() - t0
        decisions += 1
        apply(decision)
        snapshot = advance()
        if bar is not None and snapshot is not None and snapshot.departures:
            bar.update(len(snapshot.departures))
    if bar is not None:
        bar.close()
    return dataclasses.replace(backend.record(policy.name, decisions, wall), clairvoyant=is_clairvoyant(policy))


class _DelayedBar:
    """A progress bar of finished jobs that appears once the episode has run for ``delay_s``.

    A short episode shows none and never imports tqdm; a long one shows the bar from then on,
    counting the jobs finished before it appeared.
    """

    def __init__(self, total: int, name: str, delay_s: float = 2.0) -> None:
        self.total, self.name = total, name
        self.done = 0
        self.due = time.monotonic() + delay_s
        self.bar: Any = None

    def update(self, n: int) -> None:
        """Count ``n`` more finished jobs."""
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        elif time.monotonic() >= self.due:
            from tqdm.autonotebook import tqdm

            self.bar = tqdm(total=self.total, initial=self.done, desc=self.name, unit="job", leave=False)

    def close(self) -> None:
        """Remove the bar, if one was shown."""
        if self.bar is not None:
            self.bar.close()
