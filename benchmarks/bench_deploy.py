"""Deploy benchmark: the built-in live trace deployed for real, and sim vs live.

Runs ``arena-gym deploy`` (each run a subprocess, as a user would) and prints, per run: jobs
finished, average JCT, makespan, reconfigurations (resizes and placement changes), preemptions,
failures, resumed generations, jobs whose loss trajectory continued across every resume, the
median measured reconfiguration, the sim-vs-live average-JCT error, and the median ratio of a live
step's time to the performance model's time for the plan it ran (the model's own error: on a
machine where other work takes CPU time, this ratio, not the scheduling, explains the JCT error).
The default runs are the acceptance demos:

* ``arena`` and ``fcfs`` on ``cpu-4`` (2 nodes x 2 CPU devices; oversubscribed on a 2-core
  machine): every job finishes; Arena resizes or moves at least one job and preempts one;
* ``arena`` on ``cpu-2`` (a core per device on a 2-core machine): the sim-vs-live average-JCT
  error (goal: within 10%) and the median per-job JCT error (goal: within 15%), of the predicted
  simulation (the performance model's step times and restart costs alone) and of the twin (which
  charges the start-up and checkpoint costs measured live; :mod:`real_runner.live.sim_vs_live`).

On Linux with scheduler autogroups (``/proc/sys/kernel/sched_autogroup_enabled``), every session is
its own scheduling group and ``nice`` only orders processes inside one; the deployment's workers
run in sessions of their own (they outlive a crashed controller), so on a machine shared with
other work they would compete with it as equals even when this benchmark was given priority.
By default the benchmark gives each worker session the benchmark's own autogroup nice
value while the deployment runs (the profiler's and the runner benchmark's ranks inherit it
anyway; ``--no-share-priority`` leaves them alone); this changes nothing where the benchmark runs at the default priority.

``--perf`` picks the performance model of the comparison (``estimator``, ``profiled:PATH``, or
``profile``: profile the testbed on first use). Writes ``results/bench_deploy.json`` (config, code
version, machine, load average, every run's figures) and keeps each run's results directory under
``results/bench_deploy/``. ``--work 0.25`` shrinks every job for a quick look. A full run takes
about 10-20 minutes on a quiet 2-core machine; wall-clock figures measured under load are upper
bounds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pandas as pd

from arena_gym.harness.out_dirs import shown_path
from arena_gym.outputs import code_version, write_json
from arena_gym.registry import make_perf
from arena_gym.types import ModelRef, best_locality
from real_runner.plans import plan_from_dict
from real_runner.progress import read_progress
from real_runner.testbed import testbed_from_dict

REPO = Path(__file__).resolve().parents[1]

#: (policy, testbed, what the run demonstrates).
RUNS = (
    ("arena", "cpu-4", "resizes, preemptions, trajectories"),
    ("fcfs", "cpu-4", "every job finishes"),
    ("arena", "cpu-2", "sim vs live"),
)


def step_time_ratio(out: Path) -> float:
    """Median over generations (3+ steps) of the live median step time / the perf model's time for the plan it ran.

    Separates the performance model's error (this ratio - 1) from what scheduling and overheads add.
    """
    config = json.loads((out / "config.json").read_text())
    testbed = testbed_from_dict(config["testbed"], "testbed")
    perf = make_perf(config["perf"], testbed.cluster())
    ratios = []
    for progress in sorted((out / "run" / "jobs").glob("*/progress.jsonl")):
        records = read_progress(progress)
        starts = [i for i, r in enumerate(records) if r.event == "start"]
        for k, i in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(records)
            steps = [r.iter_s for r in records[i:end] if r.event == "step" and r.iter_s is not None][1:]
            if len(steps) < 3:
                continue
            info = records[i].info
            plan = plan_from_dict(info["plan"]["plan"])
            shape = best_locality(testbed.device_type, plan.num_gpus, testbed.devices_per_node)
            predicted = perf.estimate(ModelRef.parse(info["model"]), info["global_batch"], shape, plan).iter_time_s
            ratios.append(statistics.median(steps) / predicted)
    return statistics.median(ratios) if ratios else float("nan")


def autogroup_nice(pid: int | str = "self") -> int | None:
    """The autogroup nice value of a process (None where the kernel has no autogroups)."""
    try:
        return int(Path(f"/proc/{pid}/autogroup").read_text().split("nice")[1])
    except (OSError, IndexError, ValueError):
        return None


def share_priority(parent: int, nice: int, stop: threading.Event) -> None:
    """Until ``stop``: give every child session of ``parent`` (the deployment's workers) the autogroup ``nice``."""
    done: set[int] = set()
    while not stop.wait(0.1):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                pid, ppid = int(name), int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == parent and pid not in done and autogroup_nice(pid) != nice:
                    Path(f"/proc/{pid}/autogroup").write_text(str(nice))
                    done.add(pid)
            except (OSError, ValueError, IndexError):
                continue  # the process exited meanwhile, or the kernel refused: leave it as it is


def deploy(
    policy: str, testbed: str, trace: str, perf: str, out: Path, timeout_s: float, share: bool = True
) -> dict[str, Any]:
    """One deployment as a subprocess; its figures from the results directory."""
    if out.exists():
        shutil.rmtree(out)
    cmd = [
        sys.executable,
        "-m",
        "arena_gym",
        "deploy",
        "--policy",
        policy,
        "--testbed",
        testbed,
        "--trace",
        trace,
        "--perf",
        perf,
        "--out",
        str(out),
        "--status-every",
        "30",
    ]
    print("$", " ".join(cmd[1:]), flush=True)
    t0 = time.monotonic()
    nice = autogroup_nice()
    with subprocess.Popen(
        cmd,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    ) as child:
        stop = threading.Event()
        watcher = threading.Thread(target=share_priority, args=(child.pid, nice, stop), daemon=True)
        if share and nice:
            watcher.start()
        try:
            stdout, stderr = child.communicate(timeout=timeout_s)
        finally:
            stop.set()
            if child.poll() is None:
                child.kill()
    proc = subprocess.CompletedProcess(cmd, child.returncode, stdout, stderr)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        error = next(
            (line for line in reversed(proc.stderr.strip().splitlines()) if line.startswith("error")),
            (proc.stderr.strip().splitlines() or ["?"])[-1],
        )
        print(f"FAILED ({proc.returncode}): {error}", flush=True)
        return {"policy": policy, "testbed": testbed, "wall_s": wall, "error": error}
    summary = [line for line in proc.stdout.splitlines() if not line.startswith("[")]
    print("\n".join(summary), flush=True)
    metrics = json.loads((out / "metrics.json").read_text())
    live = pd.read_csv(out / "live_jobs.csv")
    sim = json.loads((out / "sim_vs_live.json").read_text()) if (out / "sim_vs_live.json").exists() else {}
    return {
        "policy": policy,
        "testbed": testbed,
        "wall_s": wall,
        "jobs": int(metrics["jobs_total"]),
        "jobs_finished": int(metrics["jobs_finished"]),
        "avg_jct_s": metrics["avg_jct_s"],
        "makespan_s": metrics["makespan_s"],
        "reconfigurations": int(metrics["reconfigurations"]),
        "preemptions": int(metrics["preemptions"]),
        "failures": int(metrics["failures"]),
        "resumes": int(live["resumes"].sum()),
        "trajectories_ok": int(live["trajectory_ok"].sum()),
        "steps_beyond_target": int((live["final_step"] > live["target_step"]).sum()),
        "median_reconfiguration_s": metrics["median_reconfiguration_s"],
        "oversubscription": metrics["oversubscription"],
        "sim_avg_jct_s": sim.get("avg_jct_sim_s"),
        "sim_avg_jct_error": sim.get("avg_jct_error"),
        "sim_median_abs_job_error": sim.get("median_abs_job_jct_error"),
        "sim_start_s": sim.get("sim_start_s"),
        "pred_avg_jct_s": sim.get("avg_jct_pred_s"),
        "pred_avg_jct_error": sim.get("avg_jct_pred_error"),
        "pred_median_abs_job_error": sim.get("median_abs_job_pred_jct_error"),
        "live_to_model_step_ratio": step_time_ratio(out),
        "results": shown_path(out, REPO),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the deployments, print the table and the acceptance checks, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--perf", default="estimator", help="performance model of the sim-vs-live comparison")
    p.add_argument("--work", type=float, default=1.0, help="scale every job's iterations (0.25: a quick look)")
    p.add_argument(
        "--runs", default=",".join(f"{pol}@{bed}" for pol, bed, _ in RUNS), help="comma-separated POLICY@TESTBED runs"
    )
    p.add_argument("--out", type=Path, default=REPO / "results" / "bench_deploy.json")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed per deployment")
    p.add_argument(
        "--no-share-priority",
        dest="share_priority",
        action="store_false",
        help="leave the workers' sessions at the default autogroup priority",
    )
    args = p.parse_args(argv)
    trace = "live" if args.work == 1.0 else f"live:work={args.work:g}"
    runs = [tuple(r.split("@")) for r in args.runs.split(",") if r]
    started = time.time()
    rows = [
        deploy(
            pol,
            bed,
            trace,
            args.perf,
            REPO / "results" / "bench_deploy" / f"{pol}-{bed}",
            args.timeout,
            args.share_priority,
        )
        for pol, bed in runs
    ]
    failed = [r for r in rows if "error" in r]
    rows = [r for r in rows if "error" not in r]
    frame = pd.DataFrame(rows, columns=list(rows[0]) if rows else ["policy"])
    cols = [
        "policy",
        "testbed",
        "jobs_finished",
        "jobs",
        "avg_jct_s",
        "makespan_s",
        "reconfigurations",
        "preemptions",
        "failures",
        "resumes",
        "trajectories_ok",
        "median_reconfiguration_s",
        "sim_avg_jct_s",
        "sim_avg_jct_error",
        "pred_avg_jct_s",
        "pred_avg_jct_error",
        "live_to_model_step_ratio",
        "wall_s",
    ]
    print()
    print(frame[cols].to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    checks = [(f"{r['policy']}@{r['testbed']}: deploy ran ({r['error']})", False) for r in failed]
    for row in rows:
        checks.append(
            (
                f"{row['policy']}@{row['testbed']}: every job finished",
                row["jobs_finished"] == row["jobs"] and row["steps_beyond_target"] == 0,
            )
        )
        checks.append(
            (
                f"{row['policy']}@{row['testbed']}: every resumed job continued its loss trajectory",
                row["trajectories_ok"] == row["jobs"],
            )
        )
        if row["policy"] == "arena" and row["testbed"] == "cpu-4":
            checks.append(("arena@cpu-4: >= 1 resize or placement change", row["reconfigurations"] >= 1))
            checks.append(("arena@cpu-4: >= 1 preemption", row["preemptions"] >= 1))
        if row["policy"] == "arena" and row["testbed"] == "cpu-2":
            for who, prefix in (("twin", "sim_"), ("predicted", "pred_")):
                avg, job = row[f"{prefix}avg_jct_error"], row[f"{prefix}median_abs_job_error"]
                if avg is None or job is None:
                    continue
                checks.append(
                    (
                        f"arena@cpu-2: {who} vs live average-JCT error {100 * avg:+.1f}% ({args.perf}) within 10%",
                        abs(avg) <= 0.10,
                    )
                )
                checks.append((f"arena@cpu-2: {who} per-job JCT error median {100 * job:.1f}% within 15%", job <= 0.15))
    print()
    for text, ok in checks:
        print(f"{'PASS' if ok else 'MISS'}  {text}")
    write_json(
        args.out,
        {
            "config": {
                "perf": args.perf,
                "work": args.work,
                "trace": trace,
                "runs": args.runs,
                "share_priority": args.share_priority,
                "autogroup_nice": autogroup_nice(),
            },
            "code_version": code_version(),
            "machine": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "started": started,
            "runs": rows + failed,
            "checks": [{"check": t, "ok": ok} for t, ok in checks],
        },
    )
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
