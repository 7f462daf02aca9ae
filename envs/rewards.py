"""Rewards as named options: each integrates a piecewise-constant rate over the event log.

Between two decision points the reward is ``sign x scale x integral of rate(t) dt`` where the
rate changes only at events, so the episode's return decomposes exactly into a metric:

- ``jct`` (default): rate = jobs in the system (submitted, not finished), sign -1. The return
  is ``-scale x`` the total time jobs spent in the system: minus the total JCT once drained.
- ``slowdown``: rate = sum over jobs in the system of ``1 / ideal_s``, with ``ideal_s`` the
  job's iterations x its fastest ground-truth iteration time on the grid; sign -1. The return
  is minus the total JCT slowdown once drained.
- ``throughput``: rate = samples/s of the running jobs (reconfiguring jobs make none), sign +1.
  The return is ``scale x`` the samples trained.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from arena_gym.records import Event, EventKind
from arena_gym.registry import Entry, Registry
from arena_gym.types import JobId, JobSpec


class RateReward(ABC):
    """Integrates ``sign x rate(t)``; subclasses say how each event changes the rate."""

    sign = -1.0

    def __init__(self) -> None:
        self._t = 0.0
        self._rate = 0.0

    def reset(self, jobs: Sequence[JobSpec], start: float, best_time: Callable[[JobSpec], float]) -> None:
        """Start a new episode at ``start``; ``best_time(spec)`` is a job's fastest seconds per iteration."""
        self._t = start
        self._rate = 0.0

    def accrue(self, events: Sequence[Event], until: float) -> float:
        """Integral of ``sign x rate`` from the last call up to ``until``, applying ``events`` (in time order)."""
        total = 0.0
        for ev in events:
            total += self._rate * (ev.time - self._t)
            self._t = ev.time
            self._update(ev)
        total += self._rate * (until - self._t)
        self._t = until
        return self.sign * total

    @abstractmethod
    def _update(self, ev: Event) -> None:
        """Change the rate for one event."""


class JctReward(RateReward):
    """Minus the number of jobs in the system, integrated over time."""

    def _update(self, ev: Event) -> None:
        if ev.kind is EventKind.SUBMIT:
            self._rate += 1.0
        elif ev.kind is EventKind.FINISH:
            self._rate -= 1.0


class SlowdownReward(RateReward):
    """Minus the sum of ``1 / ideal_s`` over jobs in the system, integrated over time."""

    def __init__(self) -> None:
        super().__init__()
        self._weight: dict[JobId, float] = {}

    def reset(self, jobs: Sequence[JobSpec], start: float, best_time: Callable[[JobSpec], float]) -> None:
        """Precompute each job's weight ``1 / (iterations x fastest time)`` (0 if it fits nowhere)."""
        super().reset(jobs, start, best_time)
        self._weight = {}
        for spec in jobs:
            ideal = spec.iterations * best_time(spec)
            self._weight[spec.job_id] = 1.0 / ideal if 0 < ideal < float("inf") else 0.0

    def _update(self, ev: Event) -> None:
        if ev.kind is EventKind.SUBMIT:
            self._rate += self._weight[ev.job_id]
        elif ev.kind is EventKind.FINISH:
            self._rate -= self._weight[ev.job_id]


class ThroughputReward(RateReward):
    """Samples/s of the running jobs, integrated over time."""

    sign = 1.0

    def __init__(self) -> None:
        super().__init__()
        self._samples: dict[JobId, float] = {}

    def reset(self, jobs: Sequence[JobSpec], start: float, best_time: Callable[[JobSpec], float]) -> None:
        """Forget the running jobs of the previous episode."""
        super().reset(jobs, start, best_time)
        self._samples = {}

    def _update(self, ev: Event) -> None:
        if ev.kind is EventKind.RUN:
            self._samples[ev.job_id] = ev.samples_per_s
            self._rate += ev.samples_per_s
        elif ev.kind in (EventKind.ALLOCATE, EventKind.PREEMPT, EventKind.FINISH):
            self._rate -= self._samples.pop(ev.job_id, 0.0)


def reward_registry() -> Registry:
    """The named reward options (``EnvConfig.reward``)."""
    return Registry(
        "reward",
        {
            "jct": Entry("envs.rewards:JctReward", {}, "minus jobs in system x time (sums to minus total JCT)"),
            "slowdown": Entry("envs.rewards:SlowdownReward", {}, "minus the JCT slowdown accrued"),
            "throughput": Entry("envs.rewards:ThroughputReward", {}, "samples trained"),
        },
    )
