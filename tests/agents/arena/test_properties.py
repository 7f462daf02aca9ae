"""Arena on random traces: invariants after every decision, decision hygiene, determinism, variants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.arena import ArenaConfig, ArenaPolicy
from arena_gym.loop import run_episode
from arena_gym.registry import make_policy
from arena_gym.sim import SimConfig
from arena_gym.types import JobStatus
from tests.agents.arena.support import cluster
from tests.helpers import GPT, MOE, CheckedBackend, job, sim_backend, uniform_model

VARIANTS = ("arena", "arena-dp", "arena-ns", "arena-nh", "arena-no", "arena-ddl", "arena-np", "arena-cap10")
SPEC = cluster(("a40", 3, 4), ("a10", 4, 2))
PERF = uniform_model(counts=(1, 2, 4, 8, 16), per_node_max=4)
HORIZON_S = 50_000.0  # every job here ends well before, unless it can never start


def random_jobs(seed: int, n: int = 24):
    rng = np.random.default_rng(seed)
    jobs = []
    for i in range(n):
        submit = float(rng.integers(0, 2000))
        iters = int(rng.integers(5, 400))
        deadline = submit + float(rng.integers(100, 3000)) if rng.random() < 0.4 else None
        jobs.append(
            job(
                f"j{i:02d}",
                submit,
                iters,
                str(rng.choice(["a40", "a10"])),
                int(rng.choice([1, 2, 4, 8])),
                model=GPT if rng.random() < 0.5 else MOE,
                deadline=deadline,
            )
        )
    return jobs


class HygieneChecked:
    """Wraps a policy and checks every decision it returns against the snapshot it saw."""

    def __init__(self, policy) -> None:
        self.policy = policy
        self.name, self.ap_search, self.clairvoyant = policy.name, policy.ap_search, policy.clairvoyant

    def reset(self) -> None:
        self.policy.reset()

    def decide(self, snap):
        decision = self.policy.decide(snap)
        named = [j for j, _ in decision.allocations] + list(decision.preemptions)
        assert len(named) == len(set(named)), "a job appears twice in one decision"
        for j, alloc in decision.allocations:
            assert alloc != snap.job(j).allocation, "no-op allocation entry"
            assert alloc.num_gpus <= 16
        for j in decision.preemptions:
            assert snap.job(j).status is not JobStatus.PENDING
        if decision.preemptions:  # only for a waiting job that starts now
            assert any(snap.job(j).allocation is None for j, _ in decision.allocations)
        return decision


def checked_run(policy, jobs, round_s=None):
    """An episode on a checked simulator (invariants after every step), checking every decision too.

    The horizon matters with periodic rounds: a job that can never start (deadline-aware) would keep them coming.
    """
    config = SimConfig(round_s=round_s, horizon_s=HORIZON_S)
    return run_episode(CheckedBackend(sim_backend(SPEC, PERF, policy, config)), HygieneChecked(policy), jobs).events


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), variant=st.sampled_from(VARIANTS), rounds=st.sampled_from([None, 300.0]))
def test_invariants_hold_on_random_traces(seed, variant, rounds):
    events = checked_run(make_policy(variant), random_jobs(seed), rounds)
    assert events


def test_finishes_every_job_when_unconstrained_by_deadlines():
    jobs = list(random_jobs(7, 30))
    events = checked_run(ArenaPolicy(), jobs)
    finished = {e.job_id for e in events if e.kind.value == "finish"}
    assert finished == {j.job_id for j in jobs}


def test_same_trace_same_event_log_and_reset_between_episodes():
    jobs = random_jobs(3)
    policy = ArenaPolicy()
    first = checked_run(policy, jobs)
    second = checked_run(policy, jobs)  # same object: reset() must clear per-episode state
    third = checked_run(ArenaPolicy(), jobs)
    assert first == second == third


@pytest.mark.parametrize("name", VARIANTS)
def test_registered_variants_build_with_their_switches(name):
    policy = make_policy(name)
    assert isinstance(policy, ArenaPolicy) and policy.name == name
    cfg = policy.config
    assert cfg.dp_only == (name == "arena-dp") and cfg.no_scaling == (name == "arena-ns")
    assert cfg.no_type_change == (name == "arena-nh") and cfg.no_opportunism == (name == "arena-no")
    assert cfg.deadline_aware == (name == "arena-ddl")
    assert policy.ap_search == ("full" if name == "arena-np" else "pruned")
    assert cfg.max_restart_trials == (10 if name == "arena-cap10" else 100)


def test_keyword_overrides_apply_on_top_of_the_config():
    assert ArenaPolicy(config=ArenaConfig(downgrade_depth=2)).config.downgrade_depth == 2
    both = ArenaPolicy(no_scaling=True, config=ArenaConfig(downgrade_depth=2)).config
    assert both == ArenaConfig(no_scaling=True, downgrade_depth=2)
    assert ArenaPolicy(pruned=False).ap_search == "full" and ArenaPolicy(deadline_aware=True).clairvoyant
    with pytest.raises(ValueError, match="ArenaPolicy: unknown setting\\(s\\) no_scalling; valid: dp_only, no_scaling"):
        ArenaPolicy(no_scalling=True)
    with pytest.raises(ValueError, match="max_upgrade_steps"):
        ArenaPolicy(max_upgrade_steps=-1)


def test_the_grow_ceiling_lets_only_the_upgrade_trial_pass_the_cap():
    """max_grow_gpus: a lone job admitted at its 2 GPUs grows to 8, past the 4-GPU cap; the ceiling is checked."""
    lone = [job("j00", 0.0, 300, "a40", 2)]
    runs = {
        ceiling: max(e.num_gpus for e in checked_run(ArenaPolicy(max_job_gpus=4, max_grow_gpus=ceiling), lone))
        for ceiling in (0, 4, 8)
    }
    assert runs == {0: 4, 4: 4, 8: 8}
    with pytest.raises(ValueError, match="max_grow_gpus must be 0 or >= max_job_gpus \\(16\\), got 8"):
        ArenaConfig(max_grow_gpus=8)


def test_the_restart_cap_ablation_bounds_every_trial(monkeypatch):
    """arena-cap10 tries at most 10 jobs per pending restart trial, where Arena (cap 100) tries more."""
    from agents.arena.round import DecisionRound
    from arena_gym.harness.experiment import RunConfig, run

    most: list[int] = []
    restart = DecisionRound.restart_pending

    def counted(self, exclude):
        fit, tried = self.search.fit, set()

        def counting(view, *args, **kwargs):
            tried.add(view.job_id)  # a job fitted again over opportunists counts once, as in the trial
            return fit(view, *args, **kwargs)

        self.search.fit = counting
        try:
            return restart(self, exclude)
        finally:
            most[-1] = max(most[-1], len(tried))

    monkeypatch.setattr(DecisionRound, "restart_pending", counted)
    trace = "synthetic:n_jobs=120,rate_per_h=200"
    for name in ("arena", "arena-cap10"):
        most.append(0)
        run(RunConfig(policy=name, trace=trace))
    assert most[0] > 10 and most[1] == 10
