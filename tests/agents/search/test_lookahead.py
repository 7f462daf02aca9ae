"""The lookahead policy: the base decision unless a candidate wins in the worlds; seeded; the oracle plans on the truth."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from agents.catalogue import LOOKAHEAD
from agents.search.lookahead import Lookahead, LookaheadConfig
from arena_gym.cluster import load_cluster
from arena_gym.harness import load_jobs
from arena_gym.loop import run_episode
from arena_gym.registry import make_perf, make_policy
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import Snapshot
from tests.agents.arena.test_event_log_identity import event_log_digest

TRACE = "synthetic:mix=testbed,n_jobs=24,rate_per_h=90,iter_log_mean=5.06,iter_log_sigma=0.89,iter_min=6,iter_max=500"
#: A small search: two worlds, a one-hour horizon.
SMALL = {"worlds": 2, "horizon_s": 3600.0, "belief": "synthetic"}


@pytest.fixture(scope="module")
def testbed():
    cluster = load_cluster("testbed-64")
    perf = make_perf("estimator", cluster)
    return cluster, perf, load_jobs(TRACE, cluster, perf, seed=4)


def _run(policy, testbed, jobs=None):
    cluster, perf, workload = testbed
    backend = SimBackend(cluster, perf, config=SimConfig(overhead_class=policy.ap_search))
    return run_episode(backend, policy, jobs if jobs is not None else workload)


def test_without_candidates_it_is_the_base_policy(testbed) -> None:
    lookahead = Lookahead(candidates=(), **SMALL)
    assert _run(lookahead, testbed).events == _run(make_policy("arena"), testbed).events
    assert lookahead.searched == 0


def test_it_searches_where_proposals_differ_and_is_seeded(testbed) -> None:
    runs = [Lookahead(rng=np.random.default_rng(7), **SMALL) for _ in range(2)]
    records = [_run(p, testbed) for p in runs]
    assert records[0].events == records[1].events  # same seed, same decisions
    assert runs[0].searched > 0 and runs[0].changed <= runs[0].searched
    again = _run(runs[0], testbed)  # reset() restarts the random stream
    assert again.events == records[0].events


def test_each_search_is_logged_with_every_proposal_scored_in_every_world(testbed) -> None:
    policy = Lookahead(rng=np.random.default_rng(7), **SMALL)
    _run(policy, testbed)
    assert policy.searches and policy.searched == len(policy.searches)
    assert policy.changed == sum(1 for s in policy.searches if s.chosen)
    for search in policy.searches:
        assert search.proposers[0] == "arena" and len(search.proposers) == len(search.scores) >= 2
        assert all(len(row) == SMALL["worlds"] for row in search.scores)
        means = [float(np.mean(row)) for row in search.scores]
        assert search.chosen in (0, int(np.argmin(means)))
        assert search.chosen == 0 or means[search.chosen] < means[0] * (1 - policy.config.margin)
    policy.reset()
    assert policy.searches == [] and policy.changed == 0


def test_a_non_clairvoyant_search_refuses_clairvoyant_policies() -> None:
    with pytest.raises(ValueError, match=r"cannot use clairvoyant policies \(srtf\)"):
        Lookahead(candidates=("srtf",))
    assert Lookahead(oracle=True, candidates=("srtf",)).clairvoyant


def test_proposers_may_roll_their_own_proposals_forward(testbed) -> None:
    with pytest.raises(ValueError, match="^LookaheadConfig: rollout must be one of base, proposer, got 'other'$"):
        LookaheadConfig(rollout="other")
    policy = Lookahead(rollout="proposer", rng=np.random.default_rng(3), **SMALL)
    record = _run(policy, testbed)
    assert policy.searched > 0 and len([e for e in record.events if e.kind.value == "finish"]) == len(record.jobs)


def test_an_infinite_margin_never_changes_the_base_decision(testbed) -> None:
    with pytest.raises(ValueError, match="margin must be in"):
        LookaheadConfig(margin=1.0)
    strict = Lookahead(margin=0.999999, **SMALL)
    assert _run(strict, testbed).events == _run(make_policy("arena"), testbed).events


def test_rollouts_take_the_sampled_scale_as_known_unless_told_otherwise() -> None:
    pinning = Lookahead(base="arena-gittins-32", candidates=("arena",))
    assert pinning.config.pin_scale
    roller = pinning._roller(pinning.base, 0.7)
    assert roller is not pinning.base and roller.priority._pinned == 0.7
    assert pinning.base.priority._pinned is None
    unpinned = Lookahead(base="arena-gittins-32", candidates=("arena",), pin_scale=False)
    assert unpinned._roller(unpinned.base, 0.7).priority._pinned is None
    assert pinning._roller(pinning.base, None).priority._pinned is None  # a world drawn at no scale


def test_the_first_decisions_ignore_the_true_future(testbed) -> None:
    _, _, jobs = testbed
    cut = jobs[3].submit_time
    other = tuple(dataclasses.replace(j, submit_time=j.submit_time + 900.0) if j.submit_time > cut else j for j in jobs)

    class Logged(Lookahead):
        def decide(self, snapshot: Snapshot):
            decision = super().decide(snapshot)
            self.log.append((snapshot.now, decision))
            return decision

    runs = []
    for workload in (jobs, other):
        policy = Logged(rng=np.random.default_rng(1), **SMALL)
        policy.log = []
        _run(policy, testbed, workload)
        runs.append([d for t, d in policy.log if t <= cut])
    assert len(runs[0]) >= 3 and runs[0] == runs[1]


def test_the_oracle_is_clairvoyant_and_needs_the_true_world(testbed) -> None:
    oracle = make_policy("lookahead-oracle")
    assert oracle.clairvoyant and not make_policy("lookahead").clairvoyant
    record = _run(Lookahead(oracle=True, **SMALL), testbed)
    assert record.clairvoyant and len([e for e in record.events if e.kind.value == "finish"]) == len(record.jobs)
    cluster, perf, jobs = testbed
    snapshot = SimBackend(cluster, perf).reset(jobs)
    assert snapshot is not None
    blind = Lookahead(oracle=True, base="fcfs", candidates=("arena",), **SMALL)  # Arena grows the first job: a search
    blind.reset()
    with pytest.raises(ValueError, match="cannot fork"):  # a backend's own snapshot carries no fork
        blind.decide(snapshot)


def test_the_oracle_plans_on_the_true_world_the_policies_it_runs_never_see(testbed, monkeypatch) -> None:
    from agents.arena import ArenaPolicy
    from agents.search.worlds import TrueWorld

    forks: list[bool] = []
    decide = ArenaPolicy.decide

    def spy(self, snapshot: Snapshot):
        forks.append(hasattr(snapshot, "fork"))
        return decide(self, snapshot)

    planned: list[dict[str, int]] = []
    worlds = TrueWorld.worlds

    def true_worlds(self, snapshot, until, config):
        for world in worlds(self, snapshot, until, config):
            planned.append({j.job_id: j.iterations for j in world.backend.state.jobs})
            yield world

    monkeypatch.setattr(ArenaPolicy, "decide", spy)
    monkeypatch.setattr(TrueWorld, "worlds", true_worlds)
    jobs = testbed[2][:12]
    policy = Lookahead(oracle=True, **SMALL)  # non-clairvoyant Arena and two of its ablations, in the true world
    _run(policy, testbed, jobs)
    assert policy.searched == len(planned) > 0
    assert all(world == {j.job_id: j.iterations for j in jobs} for world in planned)  # true lengths, true future
    assert forks and not any(forks)


@pytest.mark.parametrize("oracle", [False, True])
def test_the_policies_a_search_runs_see_only_their_information_set(testbed, monkeypatch, oracle: bool) -> None:
    from agents.arena import ArenaPolicy
    from arena_gym.types import HiddenSpec

    seen: list[bool] = []
    decide = ArenaPolicy.decide

    def spy(self, snapshot: Snapshot):
        seen.extend(isinstance(v.spec, HiddenSpec) for v in (*snapshot.pending, *snapshot.running))
        seen.append(not hasattr(snapshot, "fork"))
        return decide(self, snapshot)

    monkeypatch.setattr(ArenaPolicy, "decide", spy)
    policy = Lookahead(oracle=oracle, **SMALL)  # Arena and two of its ablations, in the true world or sampled ones
    _run(policy, testbed, testbed[2][:12])
    assert policy.searched > 0 and seen and all(seen)


#: SHA-256 of the event log of the registered search (its base, candidates and real belief; two worlds, a one-hour
#: horizon, no margin: every better-scored proposal wins) on TRACE's first 12 jobs, recorded when the registered
#: base became arena-gittins-32-f: speed work on the search must leave it.
DIGEST = "ec456253fbe196479ea095fc1a3d3d07c3cec23a5589d3db85638d2172ce7259"


def test_the_registered_search_reproduces_a_fixed_event_log(testbed) -> None:
    policy = Lookahead(**{**LOOKAHEAD, "worlds": 2, "horizon_s": 3600.0, "margin": 0.0})
    record = _run(policy, testbed, testbed[2][:12])
    assert policy.changed > 0 and event_log_digest([record]) == DIGEST
