"""Arena end to end on a slice of the real Philly trace (needs ../shared/data)."""

from __future__ import annotations

from agents.arena import ArenaPolicy
from agents.fcfs import FCFS
from arena_gym.cluster import PRESETS
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.sim import SimConfig
from estimator.measured import measured_perf_model
from tests.helpers import CheckedBackend, sim_backend
from traces import load_trace


def test_arena_beats_fcfs_on_first_150_philly_jobs(shared_data):
    arena_dir = shared_data / "arena"
    perf = measured_perf_model(str(arena_dir / "measured_iter_time.csv"), str(arena_dir / "dp_memory_gb.csv"))
    jobs = load_trace(arena_dir / "traces" / "philly.csv").jobs[:150]
    config = SimConfig(round_s=300.0, horizon_s=jobs[0].submit_time + 200_000.0)
    metrics = {}
    for policy in (FCFS(), ArenaPolicy()):
        backend = CheckedBackend(sim_backend(PRESETS["arena-1280"], perf, policy, config))
        metrics[policy.name] = compute_metrics(run_episode(backend, policy, jobs))
    fcfs, arena = metrics["fcfs"], metrics["arena"]
    assert arena["jobs_finished"] > fcfs["jobs_finished"]
    assert arena["avg_jct_s"] < fcfs["avg_jct_s"]
    assert arena["avg_throughput"] > fcfs["avg_throughput"]
