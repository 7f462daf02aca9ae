"""Shared builders for the Arena policy tests: one-type clusters and a decision recorder."""

from __future__ import annotations

from dataclasses import dataclass, field

from arena_gym.loop import run_episode
from arena_gym.metrics import job_outcomes
from arena_gym.sim import SimConfig
from arena_gym.types import ClusterSpec, Decision, GpuType, NodeGroup, Snapshot
from tests.helpers import sim_backend


def cluster(*groups: tuple[str, int, int]) -> ClusterSpec:
    """A cluster from (type, nodes, GPUs per node) triples."""
    return ClusterSpec("test", tuple(NodeGroup(GpuType(t), n, g) for t, n, g in groups))


@dataclass
class Recorder:
    """Wraps a policy and keeps every (snapshot, decision) it produced."""

    policy: object
    calls: list[tuple[Snapshot, Decision]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.policy.name

    @property
    def ap_search(self) -> str:
        return self.policy.ap_search

    @property
    def clairvoyant(self) -> bool:  # the wrapped policy's information set
        return bool(getattr(self.policy, "clairvoyant", False))

    def reset(self) -> None:
        self.policy.reset()

    def decide(self, snapshot: Snapshot) -> Decision:
        decision = self.policy.decide(snapshot)
        self.calls.append((snapshot, decision))
        return decision

    def at(self, now: float) -> Decision:
        """The decision taken at time ``now`` (the last one if several)."""
        found = [d for s, d in self.calls if abs(s.now - now) < 1e-9]
        assert found, f"no decision at t={now}; times: {[s.now for s, _ in self.calls]}"
        return found[-1]


def simulate(spec: ClusterSpec, perf, policy, jobs, config: SimConfig | None = None):
    """Run an episode; returns (record, outcomes by job id, recorder)."""
    recorder = Recorder(policy)
    record = run_episode(sim_backend(spec, perf, policy, config), recorder, jobs)
    return record, {o.job_id: o for o in job_outcomes(record)}, recorder
