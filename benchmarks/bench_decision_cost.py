"""Benchmark: what one scheduling decision costs, per policy, against queue length and cluster size; whole runs beside FCFS.

Three parts, each policy's figure printed beside FCFS's from the same repetition:

1. **Decision cost against queue length and cluster size.** An overloading synthetic trace (the
   queue grows into the hundreds or thousands) on ``testbed-64``, ``arena-1280`` and ``synth-10k``
   (10,000 GPUs of four types, defined here as :data:`SYNTH_10K`); the CPU time of every
   ``decide`` call (``time.process_time``) with the length of the queue it saw. Per queue-length
   bin (0-9, 10-99, 100-999, 1000+ jobs waiting): median and p95 milliseconds per decision.
2. **Small windows**: the 20 fixed 50-job workloads of the ``synthetic`` evaluation suite on
   ``testbed-64`` (no data needed), run through :class:`arena_gym.harness.scoring.Evaluator` as
   ``arena-gym evaluate`` runs them: median and p95 milliseconds per decision. This is the case
   a search policy that calls Arena on forked ~50-job simulators pays for.
3. **Whole processes**, user + system CPU seconds of ``python -m arena_gym ...`` (as
   ``bench_cli.py`` counts them): ITP ``cluster08`` (the artifact's sampling recipe, seed 0,
   event-driven, ``arena-1280``; needs ``../shared/data``) under Arena and FCFS; 50,000
   synthetic jobs at 200/h on ``arena-1280`` under Arena and FCFS; 100,000 under FCFS; and
   ``make run``'s comparison (``compare --policies fcfs,arena --cluster testbed-64``, the built-in
   trace) with the ``sched_ms_per_decision`` (mean wall milliseconds) its leaderboard reports.

Protocol: ``--reps`` interleaved repetitions (default 3; the policies' order alternates from one
repetition to the next), every figure the median over repetitions; one untimed warm-up run per
cluster first fills the estimator's lazy performance tables (part 3: a short run fills the CLI's
table cache in a temporary ``XDG_CACHE_HOME``), so all timed runs are warm. The load average
(``os.getloadavg``) is recorded before and after every part. ``OMP_NUM_THREADS=1``.

Goals: ``cluster08`` under Arena <= 10 CPU s; 50,000 jobs under Arena <= 60 s; 100,000 under FCFS
<= 60 s; Arena's median decision on the ``make run`` workload <= 0.5 ms.

Writes ``benchmarks/results/decision_cost/decision_cost.json`` (``--out``): the config, the seed,
the code version, the machine and every figure.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_decision_cost.py [--reps 3] [--parts 1,2,3] [--quick]
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from arena_gym.core.information import is_clairvoyant
from arena_gym.harness.cli.common import DEFAULT_TRACE
from arena_gym.harness.cli.compare import DEFAULT_POLICIES  # make run's policies, timed on the small windows
from arena_gym.harness.experiment import RunConfig, load_jobs
from arena_gym.harness.out_dirs import machine, shown_path
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.suites import get_suite
from arena_gym.loop import run_episode
from arena_gym.outputs import code_version, write_json
from arena_gym.protocols import Policy
from arena_gym.registry import make_policy
from arena_gym.scenario import build_scenario
from arena_gym.types import ClusterSpec, Decision, GpuType, NodeGroup, Snapshot

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "decision_cost" / "decision_cost.json"
#: A 10,000-GPU cluster of the four GPU types of the Philly job mix.
SYNTH_10K = ClusterSpec(
    "synth-10k",
    (
        NodeGroup(GpuType("a100"), 500, 8),
        NodeGroup(GpuType("v100"), 250, 8),
        NodeGroup(GpuType("a40"), 500, 4),
        NodeGroup(GpuType("a10"), 500, 4),
    ),
)
#: Queue-length bins (lower bounds) of part 1.
BINS = (0, 10, 100, 1000)
ITP = "itp/cluster08.csv?seed=0"
T = TypeVar("T")
SEED = 0


@dataclass(frozen=True)
class QueueCase:
    """Part 1: an overloading trace on a cluster, and the policies timed on it."""

    cluster: str
    trace: str
    policies: tuple[str, ...]


def queue_cases(quick: bool) -> list[QueueCase]:
    """The traces of part 1 (``quick``: a few hundred jobs each)."""
    scale = 10 if quick else 1
    testbed = "synthetic:mix=testbed,gpu_types=a40+a10,iter_log_mean=5.06,iter_log_sigma=0.89,iter_min=6,iter_max=500"
    return [
        QueueCase(
            "testbed-64", f"{testbed},n_jobs={2000 // scale},rate_per_h=80", ("fcfs", "srtf", "tiresias", "arena")
        ),
        QueueCase("arena-1280", f"synthetic:n_jobs={6000 // scale},rate_per_h=200", ("fcfs", "srtf", "arena")),
        QueueCase("synth-10k", f"synthetic:n_jobs={6000 // scale},rate_per_h=1600", ("fcfs", "arena")),
    ]


@dataclass
class Timed:
    """A policy wrapper that keeps the CPU seconds of every ``decide`` and the queue length it saw."""

    policy: Policy
    seconds: list[float] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The wrapped policy's name."""
        return self.policy.name

    @property
    def ap_search(self) -> Any:
        """The wrapped policy's overhead class."""
        return self.policy.ap_search

    @property
    def clairvoyant(self) -> bool:
        """The wrapped policy's information set (whether it reads the true remaining work)."""
        return is_clairvoyant(self.policy)

    def reset(self) -> None:
        """Reset the wrapped policy (the timings are kept)."""
        self.policy.reset()

    def decide(self, snapshot: Snapshot) -> Decision:
        """The wrapped policy's decision, timed."""
        queued = len(snapshot.pending)
        t0 = time.process_time()
        decision = self.policy.decide(snapshot)
        self.seconds.append(time.process_time() - t0)
        self.queued.append(queued)
        return decision


def ms_stats(seconds: Sequence[float]) -> dict[str, float]:
    """Decisions, median and p95 milliseconds of a list of per-decision seconds."""
    if not seconds:
        return {"decisions": 0, "median_ms": math.nan, "p95_ms": math.nan}
    ms = 1000.0 * np.asarray(seconds)
    return {"decisions": len(ms), "median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95))}


def median_over(reps: list[dict[str, float]]) -> dict[str, float]:
    """Per key, the median over the repetitions that have a number for it (NaN if none has)."""
    keys = dict.fromkeys(k for r in reps for k in r)
    values = {k: [r[k] for r in reps if k in r and not math.isnan(r[k])] for k in keys}
    return {k: statistics.median(v) if v else math.nan for k, v in values.items()}


def alternate(items: Sequence[T], rep: int) -> list[T]:
    """``items`` forwards on even repetitions, backwards on odd ones."""
    return list(items) if rep % 2 == 0 else list(reversed(items))


def part_queue(reps: int, quick: bool) -> list[dict[str, Any]]:
    """Part 1: per (cluster, policy, queue-length bin), median and p95 ms per decision."""
    rows = []
    for case in queue_cases(quick):
        spec = SYNTH_10K if case.cluster == SYNTH_10K.name else case.cluster  # a preset, or the 10,000 GPUs
        scenario = build_scenario(spec, "estimator", seed=SEED, sim=RunConfig(policy="fcfs").sim_config())
        jobs = load_jobs(case.trace, scenario.cluster, scenario.truth, SEED)
        for name in case.policies:  # warm-up: fills the performance tables the trace needs
            policy = make_policy(name, SEED)
            run_episode(scenario.backend(policy.ap_search), policy, jobs[:300])
        per_rep: dict[tuple[str, int], list[dict[str, float]]] = {}
        for rep in range(reps):
            for name in alternate(case.policies, rep):
                timed = Timed(make_policy(name, SEED))
                run_episode(scenario.backend(timed.ap_search), timed, jobs)
                queued = np.asarray(timed.queued)
                for low, high in zip(BINS, (*BINS[1:], math.inf)):
                    mask = (queued >= low) & (queued < high)
                    chosen = [s for s, m in zip(timed.seconds, mask) if m]
                    per_rep.setdefault((name, low), []).append(ms_stats(chosen))
                per_rep.setdefault((name, -1), []).append(ms_stats(timed.seconds))
        for (name, low), stats in per_rep.items():
            if not any(r["decisions"] for r in stats):
                continue
            label = "all" if low < 0 else f"{low}+" if low == BINS[-1] else f"{low}-{BINS[BINS.index(low) + 1] - 1}"
            rows.append(
                {
                    "cluster": case.cluster,
                    "gpus": scenario.cluster.total_gpus,
                    "trace": case.trace,
                    "jobs": len(jobs),
                    "policy": name,
                    "queue": label,
                    **median_over(stats),
                }
            )
    return rows


def part_windows(reps: int, quick: bool) -> list[dict[str, Any]]:
    """Part 2: per policy, median and p95 ms per decision over the synthetic suite's 50-job windows."""
    suite = get_suite("synthetic")
    workloads = suite.workloads()[: 4 if quick else None]
    evaluator = Evaluator(suite.parts[0].config, workloads)
    for name in DEFAULT_POLICIES:  # warm-up
        policy = make_policy(name, SEED)
        run_episode(evaluator.backend(workloads[0], policy.ap_search), policy, workloads[0].jobs)
    per_rep: dict[str, list[dict[str, float]]] = {}
    for rep in range(reps):
        for name in alternate(DEFAULT_POLICIES, rep):
            timed = Timed(make_policy(name, SEED))
            for w in workloads:
                run_episode(evaluator.backend(w, timed.ap_search), timed, w.jobs)
            per_rep.setdefault(name, []).append(ms_stats(timed.seconds))
    return [
        {"suite": suite.name, "workloads": len(workloads), "policy": name, **median_over(stats)}
        for name, stats in per_rep.items()
    ]


def run_process(args: list[str], env: dict[str, str], scratch: Path) -> float:
    """Run ``python -m arena_gym ARGS`` to completion; the user + system CPU seconds of it and its children.

    Its standard error (the progress bar of a long run) goes to a file, so that it never blocks on a pipe.
    """
    with open(scratch / "stderr.txt", "w+b") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "arena_gym", *args], env=env, stdout=subprocess.DEVNULL, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"arena_gym {' '.join(args)} failed: {err.read().decode(errors='replace').strip()[-500:]}")
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class ProcessCase:
    """Part 3: one command per policy, the policy whose CPU seconds have a goal, and that goal."""

    name: str
    trace: str
    cluster: str
    policies: tuple[str, ...]
    goal_policy: str
    goal_s: float


def process_cases(data: Path, quick: bool) -> list[ProcessCase]:
    """The whole-process cases of part 3 (``quick``: a tenth of the synthetic sizes; cluster08 only with data)."""
    scale = 10 if quick else 1
    cases = []
    if (data / ITP.split("?")[0]).is_file():
        cases.append(ProcessCase("itp-cluster08", str(data / ITP), "arena-1280", ("fcfs", "arena"), "arena", 10.0))
    cases += [
        ProcessCase(
            f"synthetic-{50 // scale}k",
            f"synthetic:n_jobs={50_000 // scale},rate_per_h=200",
            "arena-1280",
            ("fcfs", "arena"),
            "arena",
            60.0,
        ),
        ProcessCase(
            f"synthetic-{100 // scale}k",
            f"synthetic:n_jobs={100_000 // scale},rate_per_h=200",
            "arena-1280",
            ("fcfs",),
            "fcfs",
            60.0,
        ),
    ]
    return cases


def part_processes(reps: int, data: Path, quick: bool) -> dict[str, Any]:
    """Part 3: CPU seconds of whole ``simulate`` processes, and ``make run``'s compare."""
    with tempfile.TemporaryDirectory(prefix="bench-decision-") as tmp:
        scratch = Path(tmp)
        env = {**os.environ, "XDG_CACHE_HOME": str(scratch / "cache"), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
        for cluster in ("arena-1280", "testbed-64"):  # fill the table cache: every timed run is warm
            warm = "synthetic:n_jobs=3000,rate_per_h=200" if cluster == "arena-1280" else DEFAULT_TRACE
            run_process(
                [
                    "simulate",
                    "--policy",
                    "arena",
                    "--trace",
                    warm,
                    "--cluster",
                    cluster,
                    "--no-plots",
                    "--out",
                    str(scratch / "warm"),
                ],
                env,
                scratch,
            )
        rows = []
        for case in process_cases(data, quick):
            cpu: dict[str, list[float]] = {p: [] for p in case.policies}
            for rep in range(reps):
                for policy in alternate(case.policies, rep):
                    out = scratch / f"{case.name}-{policy}-{rep}"
                    args = ["simulate", "--policy", policy, "--trace", case.trace, "--cluster", case.cluster]
                    cpu[policy].append(run_process([*args, "--no-plots", "--out", str(out)], env, scratch))
            med = {p: statistics.median(v) for p, v in cpu.items()}
            rows.append(
                {
                    "case": case.name,
                    "trace": case.trace.removeprefix(str(data) + "/"),
                    "cluster": case.cluster,
                    "cpu_s": med,
                    "cpu_s_runs": cpu,
                    "vs_fcfs": {p: med[p] / med["fcfs"] for p in med},
                    "goal": {
                        "policy": case.goal_policy,
                        "cpu_s": case.goal_s,
                        "met": med[case.goal_policy] <= case.goal_s,
                    },
                }
            )
        compare_ms: dict[str, list[float]] = {"fcfs": [], "arena": []}
        for rep in range(reps):
            out = scratch / f"compare-{rep}"
            policies = ",".join(alternate(("fcfs", "arena"), rep))
            run_process(
                ["compare", "--policies", policies, "--cluster", "testbed-64", "--no-plots", "--out", str(out)],
                env,
                scratch,
            )
            with open(out / "leaderboard.csv", newline="") as f:
                for row in csv.DictReader(f):
                    compare_ms[row["policy"]].append(float(row["sched_ms_per_decision"]))
    return {
        "processes": rows,
        "make_run_compare_sched_ms_per_decision": {p: statistics.median(v) for p, v in compare_ms.items()},
    }


def part_make_run(reps: int) -> dict[str, Any]:
    """Arena's and FCFS's median and p95 ms per decision on the ``make run`` workload (in process, warm)."""
    scenario = build_scenario("testbed-64", "estimator", seed=SEED, sim=RunConfig(policy="fcfs").sim_config())
    jobs = load_jobs(DEFAULT_TRACE, scenario.cluster, scenario.truth, SEED)
    per_rep: dict[str, list[dict[str, float]]] = {}
    for rep in range(reps + 1):
        for name in alternate(("fcfs", "arena"), rep):
            timed = Timed(make_policy(name, SEED))
            run_episode(scenario.backend(timed.ap_search), timed, jobs)
            if rep > 0:  # the first repetition is the warm-up
                per_rep.setdefault(name, []).append(ms_stats(timed.seconds))
    stats = {name: median_over(s) for name, s in per_rep.items()}
    return {
        "per_policy": stats,
        "arena_vs_fcfs_median": stats["arena"]["median_ms"] / stats["fcfs"]["median_ms"],
        "goal": {"arena_median_ms": 0.5, "met": stats["arena"]["median_ms"] <= 0.5},
    }


def print_rows(title: str, rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    """A plain table of ``rows``."""
    print(f"\n== {title}")
    print("  ".join(f"{c:>14s}" for c in columns))
    for row in rows:
        cells = [f"{row[c]:14.3f}" if isinstance(row[c], float) else f"{str(row[c]):>14s}" for c in columns]
        print("  ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (medians over them)")
    parser.add_argument("--parts", default="1,2,3", help="comma-separated parts to run (1, 2, 3)")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder (part 3's cluster08)")
    parser.add_argument("--quick", action="store_true", help="a tenth of the sizes and fewer windows (a smoke run)")
    parser.add_argument("--out", type=Path, default=OUT, help="the results JSON")
    args = parser.parse_args()
    parts = {int(p) for p in args.parts.split(",")}
    logging.getLogger("arena_gym.sim").setLevel(logging.ERROR)  # jobs some policies never start: not news here
    load_before = os.getloadavg()
    results: dict[str, Any] = {}
    loads: dict[str, Any] = {}
    t0 = time.perf_counter()
    if 1 in parts:
        loads["queue_before"] = os.getloadavg()
        results["queue"] = part_queue(args.reps, args.quick)
        loads["queue_after"] = os.getloadavg()
        print_rows(
            "decision cost against queue length (ms, medians over repetitions)",
            results["queue"],
            ("cluster", "policy", "queue", "decisions", "median_ms", "p95_ms"),
        )
    if 2 in parts:
        loads["windows_before"] = os.getloadavg()
        results["windows"] = part_windows(args.reps, args.quick)
        results["make_run"] = part_make_run(args.reps)
        loads["windows_after"] = os.getloadavg()
        print_rows(
            "small windows: the synthetic suite's 50-job workloads on testbed-64 (ms)",
            results["windows"],
            ("policy", "decisions", "median_ms", "p95_ms"),
        )
        print(f"make run workload: {results['make_run']}")
    if 3 in parts:
        loads["processes_before"] = os.getloadavg()
        results["processes"] = part_processes(args.reps, args.data, args.quick)
        loads["processes_after"] = os.getloadavg()
        for row in results["processes"]["processes"]:
            print(f"{row['case']}: CPU s {row['cpu_s']}, vs FCFS {row['vs_fcfs']}, goal {row['goal']}")
        print(
            f"make run compare sched_ms_per_decision: {results['processes']['make_run_compare_sched_ms_per_decision']}"
        )
    out = write_json(
        args.out,
        {
            "benchmark": "bench_decision_cost",
            "config": {
                "reps": args.reps,
                "parts": sorted(parts),
                "quick": args.quick,
                "bins": BINS,
                "synth_10k": SYNTH_10K,
            },
            "seed": SEED,
            "code_version": code_version(),
            "machine": machine(load_before),
            "loadavg": loads,
            "wall_s": time.perf_counter() - t0,
            "results": results,
        },
    )
    print(f"results: {shown_path(out, REPO)}")


if __name__ == "__main__":
    main()
