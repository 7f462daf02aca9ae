"""Heuristics through the codec: exact replay of FCFS / SRTF, and every available heuristic as an expert."""

from __future__ import annotations

import importlib.util
import math

import gymnasium as gym
import pytest

import envs  # noqa: F401  (registers the ids)
from arena_gym.harness.experiment import make_policy
from arena_gym.loop import run_episode
from arena_gym.metrics import WALL_CLOCK_KEYS, compute_metrics
from arena_gym.registry import policy_registry, resolve
from envs.expert import HeuristicAgent, PlayResult, expert_actions
from envs.scenario import env_scenario

#: Modules of registered policies that are no heuristics: learned agents, and the search policies (which roll
#: heuristics forward: tests/agents/search).
NOT_HEURISTIC = ("agents.rl", "agents.search.lookahead")
#: Policies whose every decision the codec expresses exactly (same cells, same best-fit nodes).
EXACT = ("fcfs", "fcfs-r", "srtf")
TRACE = "synthetic:n_jobs=40,arrival=poisson,rate_per_h=30,gpu_types=a40+a10,max_gpus=4,iter_log_mean=7.5"
#: A load that makes SRTF preempt on both clusters.
EXACT_TRACES = {
    "ArenaGym/Tiny-v1": TRACE,
    "ArenaGym/Testbed64-v1": "synthetic:n_jobs=60,arrival=poisson,rate_per_h=120,gpu_types=a40+a10,max_gpus=16,iter_log_mean=7.5",
}


def available(name: str) -> bool:
    """Whether a registered policy's module has landed in this checkout."""
    module = policy_registry().entries[name].target.partition(":")[0]
    return importlib.util.find_spec(module) is not None


def heuristics() -> list[str]:
    """The heuristic policies to drive the env with: every registered, available policy but those of NOT_HEURISTIC."""
    entries = policy_registry().entries
    return [n for n, e in entries.items() if not e.target.startswith(NOT_HEURISTIC) and available(n)]


def play_expert(perf, policy_name: str) -> tuple[PlayResult, int]:
    """A policy's episode played through the env on TRACE (as the expert of a warm start), and the job count."""
    policy = make_policy(policy_name)
    env = gym.make("ArenaGym/Testbed64-v1", perf=perf, trace=TRACE, ap_search=policy.ap_search)
    return HeuristicAgent(policy, env).play(seed=1), len(env.unwrapped.jobs)


def simulate(env: gym.Env, policy_name: str) -> dict[str, float]:
    """The metrics of run_episode with the policy on the env's last workload (as `arena-gym simulate` runs it)."""
    base = env.unwrapped
    backend = env_scenario(base.config, base.cluster).backend()
    return compute_metrics(run_episode(backend, make_policy(policy_name), base.jobs))


def assert_same_metrics(a: dict[str, float], b: dict[str, float]) -> None:
    assert a.keys() == b.keys()
    for key in a.keys() - WALL_CLOCK_KEYS:
        assert a[key] == b[key] or (math.isnan(a[key]) and math.isnan(b[key])), key


@pytest.mark.parametrize("policy_name", EXACT)
@pytest.mark.parametrize("env_id", list(EXACT_TRACES))
def test_env_driven_by_exact_heuristic_equals_simulate(perf, policy_name, env_id):
    policy = make_policy(policy_name)
    env = gym.make(
        env_id,
        perf=perf,
        trace=EXACT_TRACES[env_id],
        max_pending=64,
        max_running=64,
        max_substeps=128,
        ap_search=policy.ap_search,
    )
    result = HeuristicAgent(policy, env, strict=True).play(seed=3)
    assert result.invalid_actions == 0
    reference = simulate(env, policy_name)
    assert_same_metrics(result.metrics, reference)
    assert result.metrics["decisions"] == reference["decisions"] > 0
    if policy_name == "srtf":
        assert reference["preemptions"] > 0  # the replay covered preemptions


@pytest.mark.parametrize("policy_name", heuristics())
def test_every_available_heuristic_drives_the_env_without_invalid_actions(perf, policy_name):
    result, jobs = play_expert(perf, policy_name)
    assert result.invalid_actions == 0
    assert result.metrics["jobs_finished"] == jobs


def test_expert_actions_replay_the_decision_exactly(perf):
    env = gym.make("ArenaGym/Testbed64-v1", perf=perf, trace=TRACE, max_pending=48, max_running=48, max_substeps=100)
    base = env.unwrapped
    policy = make_policy("srtf")
    env.reset(seed=7)
    checked = 0
    while base.snapshot is not None and checked < 40:
        decision = policy.decide(base.snapshot)
        actions = expert_actions(base.snapshot, decision, base.codec, base.config, strict=True)
        for action in actions:
            assert base.builder.apply(action)
        rebuilt = base.builder.decision()
        assert set(rebuilt.allocations) == set(decision.allocations)
        assert set(rebuilt.preemptions) == set(decision.preemptions)
        env.step(base.codec.done_action)
        checked += 1
    assert checked == 40


def test_strict_expert_names_what_the_codec_cannot_express(perf):
    env = gym.make("ArenaGym/Testbed64-v1", perf=perf, trace=TRACE, max_pending=1)
    base = env.unwrapped
    env.reset(seed=3)
    policy = resolve(policy_registry().entries["fcfs"].target)()
    while base.snapshot is not None:
        decision = policy.decide(base.snapshot)
        if len(decision.allocations) > 1:
            with pytest.raises(ValueError, match="has no slot"):
                expert_actions(base.snapshot, decision, base.codec, base.config, strict=True)
            assert len(expert_actions(base.snapshot, decision, base.codec, base.config)) == 1
            return
        env.step(base.codec.done_action)
    pytest.fail("no decision point started two jobs at once")


@pytest.mark.parametrize("policy_name", ["fcfs", "srtf"])
def test_env_with_the_default_estimator_equals_arena_gym_simulate(policy_name):
    import estimator
    from arena_gym.harness.experiment import RunConfig, run

    if not hasattr(estimator, "default_perf_model"):
        pytest.skip("the estimator package has no default_perf_model yet")
    policy = make_policy(policy_name)
    env = gym.make(
        "ArenaGym/Testbed64-v1",
        trace=EXACT_TRACES["ArenaGym/Testbed64-v1"],
        max_pending=64,
        max_running=64,
        max_substeps=128,
        ap_search=policy.ap_search,
    )
    result = HeuristicAgent(policy, env, strict=True).play(seed=5)
    reference = run(RunConfig(policy=policy_name, cluster="testbed-64", perf="estimator"), jobs=env.unwrapped.jobs)
    assert_same_metrics(result.metrics, reference.metrics)
    assert reference.metrics["jobs_finished"] == len(env.unwrapped.jobs)
