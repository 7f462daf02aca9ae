"""The one decide-apply-advance loop, shared by the simulator and the live runner."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from arena_gym.protocols import ClusterBackend, Policy
from arena_gym.records import EpisodeRecord
from arena_gym.types import JobSpec


def run_episode(
    backend: ClusterBackend, policy: Policy, jobs: Sequence[JobSpec], progress: bool = False
) -> EpisodeRecord:
    """Run ``policy`` on ``backend`` over ``jobs`` until drained or the horizon; return the record."""
    policy.reset()
    decisions, wall = 0, 0.0
    bar = _progress_bar(len(jobs), policy.name) if progress else None
    snapshot = backend.reset(jobs)
    while snapshot is not None:
        t0 = time.perf_counter()
        decision = policy.decide(snapshot)
        wall += time.perf_counter() - t0
        decisions += 1
        backend.apply(decision)
        snapshot = backend.advance()
        if bar is not None and snapshot is not None and snapshot.departures:
            bar.update(len(snapshot.departures))
    if bar is not None:
        bar.close()
    return backend.record(policy.name, decisions, wall)


def _progress_bar(total: int, name: str) -> Any:
    """A progress bar of finished jobs (tqdm is imported only when one is shown)."""
    from tqdm.autonotebook import tqdm

    return tqdm(total=total, desc=name, unit="job", leave=False)
