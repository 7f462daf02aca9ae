"""Real runner on CPU: iteration time per plan and reconfiguration time, gpt__tiny and gpt__mini on 2 ranks.

Every job is a fresh set of ``python -m real_runner.worker`` processes started by the local launcher
(ranks pinned to cores 0 and 1 when the machine has them). Printed and written as JSON:

* iteration time per plan (single process, DP2 with FSDP2, TP2, PP2 GPipe, PP2 1F1B): the median
  of the per-step times after ``--warmup`` steps, samples/s, and the job's start-up timings;
* reconfiguration time, stop -> save -> exit -> launch -> load -> first new step, along a chain of
  plans (DP2 -> TP2 -> PP2 1F1B -> DP2 ...), with its breakdown; the goal is under 15 s. Two modes:
  ``fresh`` launches the next generation after the previous one exited; ``prelaunch`` starts it
  (held, importing torch) before the stop and releases it after the exit.

Usage: ``python benchmarks/bench_runner.py [--models gpt__tiny,gpt__mini] [--reconfigs 3] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from arena_gym.harness.out_dirs import machine
from arena_gym.outputs import code_version, write_json
from arena_gym.types import PipeSchedule, Plan, StagePlan
from estimator.zoo import get_model
from real_runner.progress import ProgressRecord, ProgressTail
from real_runner.ranks import LocalJob, spawn_ranks
from real_runner.spec import WorkerSpec

REPO = Path(__file__).resolve().parents[1]
GOAL_S = 15.0


def plans(n_layers: int) -> dict[str, Plan]:
    """The benchmarked plans for a model with ``n_layers`` entries in its layer table."""
    half = n_layers // 2
    pp = (StagePlan(0, half, 1, 1), StagePlan(half, n_layers, 1, 1))
    return {
        "single": Plan((StagePlan(0, n_layers, 1, 1),), 1),
        "dp2 (fsdp2)": Plan((StagePlan(0, n_layers, 2, 1),), 1),
        "tp2": Plan((StagePlan(0, n_layers, 1, 2),), 1),
        "pp2 gpipe x4": Plan(pp, 4, PipeSchedule.GPIPE),
        "pp2 1f1b x4": Plan(pp, 4, PipeSchedule.ONE_F_ONE_B),
    }


def _launch(spec: WorkerSpec, work: Path, tag: str, hold: bool = False) -> LocalJob:
    path = work / f"{tag}.json"
    work.mkdir(parents=True, exist_ok=True)
    path.write_text(spec.to_json())
    cores = sorted(os.sched_getaffinity(0))
    ranks = spec.plan.num_gpus
    pin = cores[:ranks] if len(cores) >= ranks else None
    return spawn_ranks(path, ranks, env=os.environ, log_dir=work / f"logs-{tag}", pin_cores=pin, cwd=REPO, hold=hold)


def _wait_for(
    tail: ProgressTail, job: LocalJob, seen: list[ProgressRecord], predicate, timeout: float = 300.0
) -> ProgressRecord:
    """Poll the progress file into ``seen`` until a record appended from now on matches ``predicate``."""
    since, deadline = len(seen), time.monotonic() + timeout
    while True:
        seen += tail.poll()
        match = next((r for r in seen[since:] if predicate(r)), None)
        if match is not None:
            return match
        codes = job.poll()
        if any(c not in (None, 0) for c in codes):
            raise RuntimeError(f"a rank failed ({codes}): {job.log_tail(0)}")
        if time.monotonic() > deadline:
            job.kill()
            raise TimeoutError(f"no matching progress record within {timeout:.0f} s")
        time.sleep(0.02)


def bench_iterations(model: str, batch: int, steps: int, warmup: int, work: Path) -> list[dict]:
    """Run each plan for ``steps`` steps; per-step time statistics."""
    rows = []
    for name, plan in plans(len(get_model(model).layers)).items():
        tag = f"iter-{model}-{name.split()[0]}-{plan.schedule.value}"
        spec = WorkerSpec(tag, model, batch, plan, steps, str(work / tag / "ckpt"), str(work / tag / "progress.jsonl"))
        job, seen = _launch(spec, work, tag), []
        tail = ProgressTail(spec.progress_path)
        done = _wait_for(tail, job, seen, lambda r: r.event == "done")
        codes = job.wait(60)
        iters = [r.iter_s for r in seen if r.event == "step" and r.step > warmup]
        start = next(r for r in seen if r.event == "start")
        med = statistics.median(iters)
        rows.append(
            {
                "model": model,
                "plan": name,
                "ranks": plan.num_gpus,
                "global_batch": batch,
                "iter_ms_median": 1e3 * med,
                "iter_ms_min": 1e3 * min(iters),
                "iter_ms_max": 1e3 * max(iters),
                "samples_per_s": batch / med,
                "steps_timed": len(iters),
                "job_wall_s": done.t - job.launched_at,
                "startup": start.info["timings"],
                "final_loss": next(r.loss for r in reversed(seen) if r.event == "step"),
                "exit_codes": codes,
            }
        )
        print(
            f"  {model:10s} {name:14s} ranks={plan.num_gpus}  {rows[-1]['iter_ms_median']:8.1f} ms/iter  "
            f"{rows[-1]['samples_per_s']:7.1f} samples/s  job {rows[-1]['job_wall_s']:5.1f} s  "
            f"final loss {rows[-1]['final_loss']:.4f}",
            flush=True,
        )
    return rows


def bench_reconfigurations(model: str, batch: int, count: int, prelaunch: bool, work: Path) -> list[dict]:
    """A chain of ``count`` reconfigurations through DP2 -> TP2 -> PP2 1F1B -> ...; each one timed.

    With ``prelaunch`` the next generation is started (held) before the stop and released once the
    previous one has exited; otherwise it is launched after the exit.
    """
    table = plans(len(get_model(model).layers))
    order = ["dp2 (fsdp2)", "tp2", "pp2 1f1b x4"]
    mode = "prelaunch" if prelaunch else "fresh"
    base = work / f"reconf-{model}-{mode}"
    ckpt, progress = base / "ckpt", base / "progress.jsonl"
    tail, seen = ProgressTail(progress), []

    def spec(i: int) -> WorkerSpec:
        return WorkerSpec(
            f"reconf-{model}",
            model,
            batch,
            table[order[i % len(order)]],
            10**6,
            str(ckpt),
            str(progress),
            require_checkpoint=i > 0,
        )

    job = _launch(spec(0), base, "gen0")
    _wait_for(tail, job, seen, lambda r: r.event == "step" and r.step >= 3)
    rows = []
    for i in range(1, count + 1):
        nxt = None
        if prelaunch:
            nxt = _launch(spec(i), base, f"gen{i}", hold=True)
            deadline = time.monotonic() + 300
            while not nxt.held_ready():
                if time.monotonic() > deadline or any(c is not None for c in nxt.poll()):
                    raise RuntimeError(f"pre-launched generation {i} not ready: {nxt.log_tail(0)}")
                time.sleep(0.02)
        t_stop = time.time()
        codes = job.stop(grace_s=120)
        t_exit = time.time()
        if codes != [0] * len(codes):
            raise RuntimeError(f"stop of generation {i - 1} gave exit codes {codes}: {job.log_tail(0)}")
        if nxt is None:
            job = _launch(spec(i), base, f"gen{i}")
            t_go = job.launched_at
        else:
            job = nxt
            job.release()
            t_go = job.released_at
        seen += tail.poll()
        stopped = next(r for r in reversed(seen) if r.event == "stopped")
        saved = [r for r in seen if r.event == "checkpoint" and r.ckpt_step == stopped.ckpt_step]
        start = _wait_for(tail, job, seen, lambda r: r.event == "start")
        first = _wait_for(tail, job, seen, lambda r: r.event == "step")
        tm = start.info["timings"]
        ready_at = job.launched_at + tm["launch_to_ready_s"]
        row = {
            "model": model,
            "mode": mode,
            "from": order[(i - 1) % len(order)],
            "to": order[i % len(order)],
            "step": stopped.step,
            "total_s": first.t - t_stop,
            "breakdown_s": {
                "stop_and_save": stopped.t - t_stop,
                "save": saved[-1].info["save_s"] if saved else 0.0,
                "exit": t_exit - stopped.t,
                "relaunch_or_release": t_go - t_exit,
                "interpreter_start": 0.0 if prelaunch else tm["launch_to_main_s"],
                "verify_checkpoint": tm["prepare_s"],
                "import_torch": 0.0 if prelaunch else tm["import_s"],
                "rendezvous": tm["rendezvous_s"],
                "build": tm["build_s"],
                "load": tm["load_s"],
                "first_step": first.t - ready_at,
            },
        }
        rows.append(row)
        b = row["breakdown_s"]
        print(
            f"  {model:10s} {mode:9s} {row['from']:>12s} -> {row['to']:12s} total {row['total_s']:5.2f} s  "
            f"(stop+save {b['stop_and_save']:.2f}, exit {b['exit']:.2f}, start {b['interpreter_start']:.2f}, "
            f"verify {b['verify_checkpoint']:.2f}, import {b['import_torch']:.2f}, rendezvous "
            f"{b['rendezvous']:.2f}, build {b['build']:.2f}, load {b['load']:.2f}, first step "
            f"{b['first_step']:.2f})",
            flush=True,
        )
    job.stop(grace_s=120)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gpt__tiny,gpt__mini")
    parser.add_argument("--batch", type=int, default=16, help="global batch")
    parser.add_argument("--steps", type=int, default=12, help="steps per iteration-time job")
    parser.add_argument("--warmup", type=int, default=4, help="steps left out of the iteration time")
    parser.add_argument("--reconfigs", type=int, default=3, help="reconfigurations timed per model")
    parser.add_argument("--skip-iterations", action="store_true", help="time reconfigurations only")
    parser.add_argument("--out", default="results/bench_runner.json")
    args = parser.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    load_before = os.getloadavg()
    iteration, reconf = [], []
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        work = Path(tmp)
        if not args.skip_iterations:
            print("iteration time per plan (fresh worker processes; median after warm-up)")
            for model in models:
                iteration += bench_iterations(model, args.batch, args.steps, args.warmup, work)
        print(f"reconfiguration: stop -> save -> exit -> launch -> load -> first new step (goal < {GOAL_S:.0f} s)")
        for model in models:
            for prelaunch in (False, True):
                reconf += bench_reconfigurations(model, args.batch, args.reconfigs, prelaunch, work)
    summary = {}
    for m in models:
        for mode in ("fresh", "prelaunch"):
            totals = [r["total_s"] for r in reconf if r["model"] == m and r["mode"] == mode]
            summary[f"{m} {mode}"] = {"reconfig_s_median": statistics.median(totals), "reconfig_s_max": max(totals)}
    for key, s in summary.items():
        verdict = "meets" if s["reconfig_s_max"] < GOAL_S else "misses"
        print(
            f"{key:20s} reconfiguration median {s['reconfig_s_median']:5.2f} s, max {s['reconfig_s_max']:5.2f} s "
            f"({verdict} the {GOAL_S:.0f} s goal)"
        )
    out = write_json(
        Path(args.out),
        {
            "config": vars(args),
            "code_version": code_version(),
            "goal_s": GOAL_S,
            "machine": machine(load_before),
            "iteration": iteration,
            "reconfiguration": reconf,
            "summary": summary,
        },
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
