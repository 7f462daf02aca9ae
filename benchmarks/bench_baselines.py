"""Baseline policies on the full Philly trace (1,938 jobs) on arena-1280, 600,000 s horizon.

Prints, per policy: wall and CPU time of the whole episode (CPU time is the fairer figure on a
shared machine), decisions, milliseconds of policy time per
decision, MILP solves (Gavel, Sia), jobs finished, average JCT, reconfigurations and
preemptions. Target: every baseline under 10 s on one core.

``--perf`` is the performance model (ground truth and belief), ``estimator`` by default; the
artifact's measured table is
``measured:../shared/data/arena/measured_iter_time.csv,../shared/data/arena/dp_memory_gb.csv``
(no a10 data: a10 requests are then infeasible at their type; the DP memory table applies the
artifact's DP memory rule to the data-parallel view). Needs ../shared/data.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from arena_gym.harness.experiment import load_jobs
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.registry import make_policy
from arena_gym.scenario import Scenario, build_scenario
from arena_gym.sim import SimConfig

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
BASELINES = ("tiresias", "gandiva", "elasticflow-ls", "gavel", "sia")


def bench(policy_name: str, jobs: tuple, scenario: Scenario) -> None:
    """Run one policy and print its figures."""
    policy = make_policy(policy_name)
    backend = scenario.backend(policy.ap_search)
    t0, c0 = time.perf_counter(), time.process_time()
    record = run_episode(backend, policy, jobs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = compute_metrics(record)
    solves = getattr(policy, "solves", None)
    print(
        f"{policy_name:15s} wall={wall:6.2f}s cpu={cpu:6.2f}s decisions={record.decisions:5d} "
        f"ms/decision={1000 * record.decide_wall_s / max(1, record.decisions):6.2f} "
        f"milp_solves={'-' if solves is None else solves:>5} finished={int(m['jobs_finished']):4d} "
        f"avg_jct={m['avg_jct_s'] / 3600:6.2f}h reconfigs={int(m['reconfigurations']):5d} "
        f"preemptions={int(m['preemptions']):4d}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--perf", default="estimator", help="performance model spec (estimator, measured:CSV, ...)")
    parser.add_argument("--policies", default=",".join(BASELINES), help="comma-separated policy names")
    parser.add_argument("--trace", default=str(DATA / "arena/traces/philly.csv"))
    parser.add_argument("--cluster", default="arena-1280")
    parser.add_argument("--horizon", type=float, default=600_000.0, help="seconds from the first submission")
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"needs the shared data folder {DATA}")
    scenario = build_scenario(args.cluster, args.perf, sim=SimConfig(horizon_s=args.horizon))
    jobs = load_jobs(args.trace, scenario.cluster, scenario.truth, seed=0)
    print(
        f"trace={Path(args.trace).name} jobs={len(jobs)} cluster={scenario.cluster.name} perf={scenario.truth.name} "
        f"horizon={args.horizon:.0f}s"
    )
    for name in args.policies.split(","):
        bench(name.strip(), jobs, scenario)


if __name__ == "__main__":
    main()
