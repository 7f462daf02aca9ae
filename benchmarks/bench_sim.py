"""Simulator speed: FCFS over the full Philly trace (1,938 jobs) on arena-1280 and over ITP cluster08
(13,047 jobs), printing wall time, events and events per second.

Target: Philly under FCFS in under 3 s on one core (the artifact's round-based simulator needs
about 4 minutes for 2,000 rounds of it). Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from arena_gym.harness.experiment import load_jobs
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.registry import make_policy
from arena_gym.scenario import build_scenario
from arena_gym.sim import SimConfig

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def bench(name: str, trace: Path, cluster_name: str, perf_spec: str, horizon: float) -> None:
    scenario = build_scenario(cluster_name, perf_spec, sim=SimConfig(horizon_s=horizon))
    t0 = time.perf_counter()
    jobs = load_jobs(str(trace), scenario.cluster, scenario.truth, seed=0)
    load_s = time.perf_counter() - t0
    walls = []
    for _ in range(2):  # the first run also fills the estimator's lazy tables; the second is the simulator alone
        policy = make_policy("fcfs")
        backend = scenario.backend(policy.ap_search)
        t0 = time.perf_counter()
        record = run_episode(backend, policy, jobs)
        walls.append(time.perf_counter() - t0)
    wall = walls[1]
    m = compute_metrics(record)
    print(
        f"{name:10s} jobs={len(jobs):6d} load={load_s:5.2f}s cold_wall={walls[0]:6.2f}s sim_wall={wall:6.2f}s events={len(record.events):7d} "
        f"events/s={len(record.events) / wall:9.0f} decisions={record.decisions:6d} "
        f"finished={int(m['jobs_finished']):5d} avg_jct={m['avg_jct_s'] / 3600:7.2f}h"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--perf", default="estimator")
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"needs the shared data folder {DATA}")
    bench("philly", DATA / "arena/traces/philly.csv", "arena-1280", args.perf, 600_000.0)
    bench("philly-all", DATA / "arena/traces/philly.csv", "arena-1280", args.perf, float("inf"))
    bench("cluster08", DATA / "itp/cluster08.csv", "arena-1280", args.perf, float("inf"))


if __name__ == "__main__":
    main()
