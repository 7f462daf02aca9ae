"""ArenaPolicy.fork: a fork shares the memoised estimates and moves, yet both copies go on as each would alone."""

from __future__ import annotations

import copy
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from agents.arena.config import ArenaConfig
from agents.arena.oracle import ThroughputOracle
from arena_gym.cluster import load_cluster
from arena_gym.core.information import information_set
from arena_gym.harness import load_jobs
from arena_gym.registry import make_perf, make_policy
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Decision, GpuType, JobId, Placement, Snapshot
from tests.helpers import GPT, MOE, job, table_model

#: An overloaded testbed: the queue grows, so restart trials, downgrades and upgrades all run.
TRACE = "synthetic:mix=testbed,n_jobs=120,rate_per_h=150"


@pytest.fixture(scope="module")
def workload():
    cluster = load_cluster("testbed-64")
    perf = make_perf("estimator", cluster)
    return cluster, perf, load_jobs(TRACE, cluster, perf, seed=3)


class Driver:
    """One episode driven a decision at a time."""

    def __init__(self, backend: SimBackend, policy, snapshot: Snapshot | None) -> None:
        self.backend, self.policy, self.snapshot = backend, policy, snapshot
        self.shown: Callable[[Snapshot], Snapshot] = information_set(policy)

    def step(self) -> bool:
        """One decide-apply-advance; False once the episode is over."""
        if self.snapshot is None:
            return False
        self.backend.apply(self.policy.decide(self.shown(self.snapshot)))
        self.snapshot = self.backend.advance()
        return True

    def finish(self) -> None:
        while self.step():
            pass


def _fork(driver: Driver, policy) -> Driver:
    """A fork of the driver's backend at its current decision point, driven by ``policy``."""
    backend, s = driver.backend.fork(), driver.snapshot
    assert s is not None
    return Driver(backend, policy, backend.state.snapshot(s.now, s.arrivals, s.departures, s.round_index))


def _perturb(driver: Driver) -> None:
    """Send the episode another way: preempt its first running job, then advance."""
    assert driver.snapshot is not None and len(driver.snapshot.running) > 0
    driver.backend.apply(Decision(preemptions=(next(iter(driver.snapshot.running)).job_id,)))
    driver.snapshot = driver.backend.advance()


@pytest.mark.parametrize("name", ["arena", "arena-ddl", "arena-gittins", "arena-pl", "arena-srpt"])
def test_a_fork_and_its_original_interleaved_go_on_as_each_would_alone(workload, name: str) -> None:
    cluster, perf, jobs = workload
    config = SimConfig(overhead_class=make_policy(name).ap_search)

    def start() -> Driver:
        policy = make_policy(name)
        policy.reset()
        backend = SimBackend(cluster, perf, config=config)
        return Driver(backend, policy, backend.reset(jobs))

    alone = start()
    alone.finish()

    original = start()
    for _ in range(60):
        original.step()
    assert original.snapshot is not None
    # the original sent another way, alone, from a deep copy (nothing shared with the fork below)
    detour = _fork(original, copy.deepcopy(original.policy))
    twin = _fork(original, original.policy.fork())
    _perturb(detour)
    detour.finish()
    _perturb(original)
    while original.step() | twin.step():  # alternate decisions: the memos are shared between them
        pass
    assert twin.backend.events == alone.backend.events
    assert original.backend.events == detour.backend.events
    assert original.backend.events != alone.backend.events  # the two really went different ways


def test_forks_in_different_worlds_keep_their_own_per_job_memos() -> None:
    # Job "S" holds the same placement object in two sampled worlds, but names GPT in one (halving feasible) and MoE
    # in the other (only two GPUs fit): each fork's memo answers for its own world, the parent's for neither.
    perf = table_model({(GPT, 128, "a40", 1, 2): 1.0, (GPT, 128, "a40", 1, 1): 2.0, (MOE, 128, "a40", 1, 2): 3.0})
    parent = ThroughputOracle(ArenaConfig())
    parent.estimates.bind(perf)
    held = Placement(GpuType("a40"), (0,), 2)
    gpt, moe = ({JobId("S"): SimpleNamespace(spec=job("S", 0, 10, "a40", 2, model=m))} for m in (GPT, MOE))
    in_gpt, in_moe = parent.fork(), parent.fork()
    assert in_gpt.halving_change(gpt, JobId("S"), held) == pytest.approx(64.0 - 128.0)
    assert in_moe.halving_change(moe, JobId("S"), held) is None  # not the other world's answer
    assert in_moe.held_rate(moe, JobId("S"), held) == pytest.approx(128 / 3.0)
    assert in_gpt.held_rate(gpt, JobId("S"), held) == pytest.approx(128.0)
    assert not parent._halving and not parent._held
