"""Disaggregated profiler vs direct measurement: profiled-and-composed iteration times against the runner's.

For each model (``gpt__tiny``, ``gpt__mini``) on a CPU testbed (``cpu-2``: one core per device) this
runs ``--passes`` passes; each pass

1. profiles the testbed (``real_runner.profiler``: layers on one device, collective tables);
2. runs every benchmarked plan (DP with FSDP2, TP with DTensor, PP with GPipe and 1F1B, several
   micro-batch counts and splits) once in fresh worker processes: the pass's measured iteration time
   is the median seconds between consecutive step records after ``--warmup`` steps (what a job's
   progress sees);
3. composes every plan from that pass's profile (``profiled:PROFILE.json``, :mod:`estimator.profiled`).

A plan's measured time is the median over passes of its measured times, its predicted time the median
over passes of the predictions. Profiling next to the plans it predicts keeps the comparison about the
profiler: the single-thread speed of a shared VM host can drift by 2x within minutes, and a profile
taken before a long measurement phase then predicts a different machine. A host probe (the runner's
single-device gpt__tiny step in thread CPU time, in this process: :class:`StepTimer`) before each
profile and after each pass reports that drift. ``--profile FILE`` instead composes every pass from one given profile.

It prints per plan the measured and predicted times and the error, the MAPE (overall and per model),
the worst plan, whether each model's plans are ranked as measured wherever their measured times differ
by more than ``--rank-margin``, and the profiling cost of one profile against measuring the plans
directly (device-seconds). A last check times the runner's single-device step in thread CPU time in
this process against the last profile (the computation path alone, which a busy machine does not
distort). Results go to a JSON file with the config, code version and machine.

Only the plans the testbed holds are measured (at most its devices, tensor parallelism inside a node);
a testbed that holds none of them (one device: every plan has 2 ranks) is refused in one line before
any work.

Usage: ``python benchmarks/bench_profiler.py [--quick] [--profile FILE] [--measured FILE] [--out FILE]``.
``--measured`` reuses a previous result's measurements and re-composes them (from its per-pass profiles
unless ``--profile`` is given). Acceptance: MAPE <= 10 %, every plan <= 20 %, ranking kept.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from arena_gym.harness.out_dirs import machine
from arena_gym.outputs import code_version, write_json
from arena_gym.types import ModelRef, PipeSchedule, Plan, ResourceShape, StagePlan
from estimator.planner import PlannerConfig
from estimator.profile import load_profile
from estimator.profiled import ProfiledPerfModel, executable_plans
from estimator.table import shapes_for
from estimator.zoo import get_model
from real_runner.allocator import keep_freed_memory
from real_runner.plans import model_spec, plan_to_dict, resolve_plan
from real_runner.profiler.run import profile_testbed, write_profile
from real_runner.profiler.settings import ProfilerSettings
from real_runner.progress import ProgressTail
from real_runner.ranks import spawn_ranks
from real_runner.spec import WorkerSpec
from real_runner.testbed import load_testbed

REPO = Path(__file__).resolve().parents[1]
MAPE_GOAL, MAX_GOAL = 10.0, 20.0


def plans(n_layers: int, quick: bool) -> dict[str, Plan]:
    """The benchmarked plans for a model with ``n_layers`` entries in its layer table (2 ranks each)."""
    half = n_layers // 2
    even = (StagePlan(0, half, 1, 1), StagePlan(half, n_layers, 1, 1))
    late = (StagePlan(0, half + 1, 1, 1), StagePlan(half + 1, n_layers, 1, 1))
    table = {
        "dp2 x1": Plan((StagePlan(0, n_layers, 2, 1),), 1),
        "dp2 x4": Plan((StagePlan(0, n_layers, 2, 1),), 4),
        "tp2 x1": Plan((StagePlan(0, n_layers, 1, 2),), 1),
        "tp2 x2": Plan((StagePlan(0, n_layers, 1, 2),), 2),
        "pp2 gpipe x2": Plan(even, 2, PipeSchedule.GPIPE),
        "pp2 gpipe x8": Plan(even, 8, PipeSchedule.GPIPE),
        "pp2 1f1b x4": Plan(even, 4, PipeSchedule.ONE_F_ONE_B),
        "pp2 1f1b x4 late split": Plan(late, 4, PipeSchedule.ONE_F_ONE_B),
        "pp2 1f1b x16": Plan(even, 16, PipeSchedule.ONE_F_ONE_B),
    }
    if quick:
        return {k: table[k] for k in ("dp2 x1", "tp2 x1", "pp2 gpipe x2", "pp2 1f1b x4")}
    return table


def held_plans(table: dict[str, Plan], total_devices: int, devices_per_node: int) -> dict[str, Plan]:
    """The plans of ``table`` a testbed holds: at most its devices, tensor parallelism inside one node."""
    return {
        name: plan
        for name, plan in table.items()
        if plan.num_gpus <= total_devices and all(st.tp <= devices_per_node for st in plan.stages)
    }


def testbed_plans(testbed, model: str, quick: bool) -> dict[str, Plan]:
    """The benchmarked plans of ``model`` that ``testbed`` holds."""
    return held_plans(plans(len(get_model(model).layers), quick), testbed.total_devices, testbed.devices_per_node)


def measure(model: str, name: str, plan: Plan, batch: int, steps: int, warmup: int, work: Path) -> dict:
    """One fresh job of ``steps`` steps; per-step periods and iteration times after warm-up, device-seconds."""
    tag = f"{model}-{name.replace(' ', '_')}-{time.monotonic_ns()}"
    spec = WorkerSpec(tag, model, batch, plan, steps, str(work / tag / "ckpt"), str(work / tag / "progress.jsonl"))
    path = work / f"{tag}.json"
    path.write_text(spec.to_json())
    ranks = plan.num_gpus
    cores = sorted(os.sched_getaffinity(0))
    job = spawn_ranks(
        path,
        ranks,
        env=os.environ,
        log_dir=work / f"logs-{tag}",
        pin_cores=cores[:ranks] if len(cores) >= ranks else None,
        cwd=REPO,
    )
    try:
        codes = job.wait(1800)
    except BaseException:  # Ctrl-C or a timeout: leave no ranks behind
        job.kill()
        raise
    end = time.time()
    if codes != [0] * ranks:
        raise RuntimeError(f"{model} {name}: exit codes {codes}: {job.log_tail(0)}")
    records = [r for r in ProgressTail(spec.progress_path).poll() if r.event == "step"]
    times = {r.step: r.t for r in records}
    periods = [times[s] - times[s - 1] for s in sorted(times) if s > warmup + 1 and s - 1 in times]
    iters = [r.iter_s for r in records if r.step > warmup]
    return {
        "period_s": statistics.median(periods),
        "iter_s": statistics.median(iters),
        "device_s": (end - job.launched_at) * ranks,
        "steps_timed": len(periods),
    }


def measure_pass(models: list[str], args, testbed, work: Path, index: int) -> dict[tuple[str, str], dict]:
    """Every plan of every model that the testbed holds once: pass ``index``."""
    out = {}
    for m in models:
        for name, plan in testbed_plans(testbed, m, args.quick).items():
            r = measure(m, name, plan, args.batch, args.steps, args.warmup, work)
            out[(m, name)] = r
            print(
                f"  pass {index + 1}: {m:10s} {name:24s} {1e3 * r['period_s']:9.1f} ms/step "
                f"(iter {1e3 * r['iter_s']:8.1f} ms)",
                flush=True,
            )
    return out


class StepTimer:
    """The runner's single-device step of ``model`` (``micro`` micro-batches of ``batch``) in thread CPU time, in
    this process: the computation path alone, which a busy machine does not inflate."""

    def __init__(self, model: str, micro: int = 1, batch: int = 16) -> None:
        import torch  # noqa: PLC0415 - only these one-device timings run torch in the benchmark's process

        from real_runner.executor import Trainer  # noqa: PLC0415

        torch.set_num_threads(1)
        keep_freed_memory()  # as the runner's CPU ranks
        spec = model_spec(model)
        self.plan = Plan((StagePlan(0, spec.layers + 2, 1, 1),), micro)
        self.trainer = Trainer(
            spec,
            resolve_plan(spec, self.plan, batch, 1),
            rank=0,
            global_batch=batch,
            lr=1e-3,
            seed=0,
            device=torch.device("cpu"),
        )
        self.step = 0

    def __call__(self, steps: int = 12, warmup: int = 2) -> float:
        """Median thread-CPU seconds of ``steps`` steps after ``warmup``."""
        times = []
        for i in range(warmup + steps):
            t0 = time.thread_time()
            self.trainer.train_step(self.step)
            self.step += 1
            if i >= warmup:
                times.append(time.thread_time() - t0)
        return statistics.median(times)


def profile_once(testbed, models: list[str], args, work: Path, path: Path, layer_repeats: int = 1) -> Path:
    """Profile ``testbed`` for ``models`` into ``path``, printing the phases' progress."""
    settings = ProfilerSettings.quick() if args.quick else ProfilerSettings()
    settings = dataclasses.replace(settings, layer_repeats=layer_repeats)
    print(
        f"profiling {testbed.name} for {', '.join(models)} ({'quick' if args.quick else 'full'} settings, "
        f"layer repeats {layer_repeats})"
    )
    last: dict[str, int] = {}

    def show(phase: str, done: int, total: int) -> None:
        if last.get(phase) != done and (done == total or done % max(1, total // 4) == 0):
            print(f"  {phase}: {done}/{total}", flush=True)
        last[phase] = done

    profile = profile_testbed(testbed, models, settings, work, env=os.environ, cwd=REPO, on_progress=show)
    write_profile(profile, path)
    print(
        f"profile {path}: {profile.cost.get('device_s', 0):.0f} device-s "
        f"({profile.cost.get('wall_s', 0):.0f} s on {profile.cost.get('devices', 0):.0f} devices)"
    )
    return path


def compose_rows(rows: list[dict], batch: int) -> None:
    """Add each pass's prediction (from the profile named in the pass) and the plan's medians to every row."""
    perfs: dict[str, ProfiledPerfModel] = {}
    for row in rows:
        model = row["model"]
        plan = plans(len(get_model(model).layers), False)[row["plan"]]
        executed = resolve_plan(model_spec(model), plan, batch, plan.num_gpus).plan
        shape = ResourceShape("cpu", 1, plan.num_gpus)
        ests = []
        for p in row["passes"]:
            if p["profile"] not in perfs:
                perfs[p["profile"]] = ProfiledPerfModel(load_profile(p["profile"]))
            est = perfs[p["profile"]].estimate(ModelRef.parse(model), batch, shape, executed)
            p["predicted_s"] = est.total_s
            p["error_pct"] = 100.0 * (est.total_s - p["period_s"]) / p["period_s"]
            ests.append(est)
        mid = sorted(ests, key=lambda e: e.total_s)[(len(ests) - 1) // 2]
        periods = [p["period_s"] for p in row["passes"]]
        row["executed"] = plan_to_dict(executed)
        row["measured_s"] = statistics.median(periods)
        row["pass_spread"] = max(periods) / min(periods) - 1
        row["predicted_s"] = statistics.median(e.total_s for e in ests)
        row["breakdown_s"] = {  # of the pass whose prediction is the (lower) median
            "compute": mid.compute_s,
            "intra": mid.intra_stage_comm_s,
            "inter": mid.inter_stage_comm_s,
            "bubble": mid.bubble_s,
        }
        row["error_pct"] = 100.0 * (row["predicted_s"] - row["measured_s"]) / row["measured_s"]


def cpu_check(models: list[str], profile_path: Path, batch: int, steps: int, warmup: int) -> list[dict]:
    """The computation path alone, on one device and in thread CPU time (which a busy machine does not inflate):
    the runner's single-device step (forward, backward, AdamW, the batch) measured in this process against the
    profile's composition of the same plan."""
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    perf = ProfiledPerfModel(load_profile(profile_path))
    rows = []
    for model in models:
        for micro in (1, 4):
            timer = StepTimer(model, micro, batch)
            measured = timer(steps, warmup)
            est = perf.estimate(ModelRef.parse(model), batch, ResourceShape("cpu", 1, 1), timer.plan)
            rows.append(
                {
                    "model": model,
                    "plan": f"single x{micro}",
                    "cpu_s": measured,
                    "predicted_s": est.total_s,
                    "error_pct": 100 * (est.total_s - measured) / measured,
                }
            )
    return rows


def every_plan_cost(rows: list[dict], models: list[str], testbed, batch: int) -> dict:
    """Device-seconds to measure every executable plan of every shape of the testbed once, from each model's
    mean measured device-seconds per plan run and rank."""
    cfg = PlannerConfig()
    total, count = 0.0, 0
    for m in models:
        runs = [
            p["device_s"] / 2 for r in rows if r["model"] == m for p in r["passes"]
        ]  # benchmarked plans hold 2 ranks
        per_rank = statistics.fmean(runs) if runs else 0.0
        for shape in shapes_for(testbed.device_type, testbed.devices_per_node, testbed.total_devices, (1, 2, 4, 8, 16)):
            plans_here = executable_plans(get_model(m), batch, shape, cfg)
            count += len(plans_here)
            total += sum(per_rank * p.num_gpus for p in plans_here)
    return {"plans": count, "device_s": total}


def ranking(rows: list[dict], margin: float) -> dict:
    """Per model: pairs of plans whose measured times differ by more than ``margin``, and how many the profile orders alike."""
    out = {}
    for model in sorted({r["model"] for r in rows}):
        mine = [r for r in rows if r["model"] == model]
        pairs = agree = 0
        wrong = []
        for a, b in itertools.combinations(mine, 2):
            lo, hi = sorted((a, b), key=lambda r: r["measured_s"])
            if hi["measured_s"] <= lo["measured_s"] * (1 + margin):
                continue
            pairs += 1
            if lo["predicted_s"] < hi["predicted_s"]:
                agree += 1
            else:
                wrong.append(f"{lo['plan']} < {hi['plan']}")
        out[model] = {"pairs": pairs, "agree": agree, "misordered": wrong}
    return out


def variant_summary(rows: list[dict], args) -> dict | None:
    """The same measurements composed from the passes' variant profiles (``--variant-layer-repeats``), if any."""
    if not all("variant_profile" in p for r in rows for p in r["passes"]):
        return None
    alt = copy.deepcopy(rows)
    for r in alt:
        for p in r["passes"]:
            p["profile"] = p["variant_profile"]
    compose_rows(alt, args.batch)
    worst = max(alt, key=lambda r: abs(r["error_pct"]))
    return {
        "layer_repeats": args.variant_layer_repeats,
        "mape_pct": statistics.fmean(abs(r["error_pct"]) for r in alt),
        "worst": {"model": worst["model"], "plan": worst["plan"], "error_pct": worst["error_pct"]},
        "ranking": ranking(alt, args.rank_margin),
        "plans": [{k: r[k] for k in ("model", "plan", "measured_s", "predicted_s", "error_pct")} for r in alt],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="gpt__tiny,gpt__mini")
    parser.add_argument("--testbed", default="cpu-2")
    parser.add_argument("--batch", type=int, default=16, help="global batch")
    parser.add_argument("--steps", type=int, default=14, help="steps per measured job")
    parser.add_argument("--warmup", type=int, default=4, help="steps left out of the measurement")
    parser.add_argument("--passes", type=int, default=3, help="measurement passes (median over passes)")
    parser.add_argument("--rank-margin", type=float, default=0.10)
    parser.add_argument("--quick", action="store_true", help="4 plans per model, quick profile, 3 passes of 10 steps")
    parser.add_argument("--profile", default=None, help="reuse this PROFILE.json instead of profiling")
    parser.add_argument(
        "--variant-layer-repeats",
        type=int,
        default=0,
        help="also profile with this many layer repeats before each pass and report that profile's accuracy",
    )
    parser.add_argument("--measured", default=None, help="reuse the measurements of this result JSON")
    parser.add_argument(
        "--no-cpu-check", action="store_true", help="skip the one-device CPU-time check of the compute path"
    )
    parser.add_argument("--out", default="results/bench_profiler.json")
    args = parser.parse_args()
    if args.quick:
        args.steps = min(args.steps, 10)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    testbed = load_testbed(args.testbed)
    if not args.measured:
        held = {m: testbed_plans(testbed, m, args.quick) for m in models}
        if not any(held.values()):
            raise SystemExit(
                f"bench_profiler: testbed {testbed.name} has {testbed.total_devices} device(s), "
                f"{testbed.devices_per_node} per node: it holds none of the benchmarked plans (2 ranks each)"
            )
        for m in models:
            skipped = sorted(set(plans(len(get_model(m).layers), args.quick)) - set(held[m]))
            if skipped:
                print(f"{m}: {testbed.name} cannot hold {', '.join(skipped)}: not measured")
    load_before = os.getloadavg()
    out = Path(args.out)
    probes: list[dict] = []
    if args.measured:
        old = json.loads(Path(args.measured).read_text())
        rows = [{k: r[k] for k in ("model", "plan", "passes")} for r in old["plans"]]
        probes = old.get("host_probe", [])
        if args.profile:
            for r in rows:
                for p in r["passes"]:
                    p["profile"] = args.profile
        elif any("profile" not in p for r in rows for p in r["passes"]):
            raise SystemExit(f"{args.measured}: its passes name no profile; give one with --profile")
    else:
        print(f"{args.passes} passes of {args.steps} steps ({args.warmup} warm-up) per plan, profiling before each")
        probe = StepTimer("gpt__tiny")  # the host probe
        rows_by_key: dict[tuple[str, str], dict] = {}
        with tempfile.TemporaryDirectory(prefix="bench-profiler-") as tmp:
            work = Path(tmp)
            for index in range(args.passes):
                before = probe()
                if args.profile:
                    profile_path = Path(args.profile)
                else:
                    profile_path = out.with_name(f"{out.stem}-profile-pass{index + 1}.json")
                    profile_once(testbed, models, args, work / f"profile{index}", profile_path)
                variant_path = None
                if args.variant_layer_repeats:
                    variant_path = out.with_name(
                        f"{out.stem}-profile-pass{index + 1}-repeats{args.variant_layer_repeats}.json"
                    )
                    profile_once(
                        testbed, models, args, work / f"variant{index}", variant_path, args.variant_layer_repeats
                    )
                for key, r in measure_pass(models, args, testbed, work, index).items():
                    r["profile"] = str(profile_path)
                    if variant_path is not None:
                        r["variant_profile"] = str(variant_path)
                    rows_by_key.setdefault(key, {"model": key[0], "plan": key[1], "passes": []})["passes"].append(r)
                after = probe()
                probes.append({"pass": index + 1, "before_s": before, "after_s": after})
                print(
                    f"  host probe (gpt__tiny step, thread CPU): {1e3 * before:.1f} ms before the pass's profile, "
                    f"{1e3 * after:.1f} ms after its measurements ({100 * (after / before - 1):+.0f}%)",
                    flush=True,
                )
        rows = list(rows_by_key.values())
    compose_rows(rows, args.batch)
    variant = variant_summary(rows, args)
    profile_paths = sorted({p["profile"] for r in rows for p in r["passes"]})
    last_profile = Path(rows[0]["passes"][-1]["profile"])
    profile = load_profile(last_profile)
    checks = [] if args.no_cpu_check else cpu_check(models, last_profile, args.batch, 8, 3)
    print()
    print(
        f"{'model':10s} {'plan':24s} {'measured ms':>12s} {'spread':>7s} {'predicted ms':>13s} {'error':>7s}   "
        "compute / intra / inter / bubble (ms)"
    )
    for r in rows:
        b = r["breakdown_s"]
        print(
            f"{r['model']:10s} {r['plan']:24s} {1e3 * r['measured_s']:12.1f} {100 * r['pass_spread']:6.1f}% "
            f"{1e3 * r['predicted_s']:13.1f} {r['error_pct']:+6.1f}%   {1e3 * b['compute']:.1f} / {1e3 * b['intra']:.1f} / "
            f"{1e3 * b['inter']:.1f} / {1e3 * b['bubble']:.1f}"
        )
    if checks:
        print()
        print("computation path on one device, thread CPU time (not inflated by a busy machine):")
        for c in checks:
            print(
                f"{c['model']:10s} {c['plan']:24s} {1e3 * c['cpu_s']:12.1f} {'':7s} {1e3 * c['predicted_s']:13.1f} "
                f"{c['error_pct']:+6.1f}%"
            )
    errors = [abs(r["error_pct"]) for r in rows]
    mape = statistics.fmean(errors)
    per_model = {m: statistics.fmean(abs(r["error_pct"]) for r in rows if r["model"] == m) for m in models}
    worst = max(rows, key=lambda r: abs(r["error_pct"]))
    ranks = ranking(rows, args.rank_margin)
    passes = max(len(r["passes"]) for r in rows)
    per_pass = [
        statistics.fmean(abs(r["passes"][i]["error_pct"]) for r in rows if len(r["passes"]) > i) for i in range(passes)
    ]
    direct = sum(p["device_s"] for r in rows for p in r["passes"])
    one_pass = direct / passes
    prof_cost = statistics.fmean(load_profile(p).cost.get("device_s", 0.0) for p in profile_paths)
    every = every_plan_cost(rows, models, testbed, args.batch)
    print()
    print(
        f"MAPE {mape:.1f}% over {len(rows)} plans (goal <= {MAPE_GOAL:.0f}%): "
        + ", ".join(f"{m} {v:.1f}%" for m, v in per_model.items())
    )
    print("each pass against its own profile: MAPE " + ", ".join(f"{v:.1f}%" for v in per_pass))
    print(
        f"worst plan: {worst['model']} {worst['plan']} {worst['error_pct']:+.1f}% (goal: every plan within {MAX_GOAL:.0f}%)"
    )
    for m, rk in ranks.items():
        print(
            f"ranking {m}: {rk['agree']}/{rk['pairs']} pairs differing by > {100 * args.rank_margin:.0f}% ordered as "
            f"measured" + (f"; misordered: {', '.join(rk['misordered'])}" if rk["misordered"] else "")
        )
    print(
        f"cost: profiling {prof_cost:.0f} device-s (mean of {len(profile_paths)}) vs measuring these {len(rows)} plans once {one_pass:.0f} device-s "
        f"({one_pass / max(prof_cost, 1e-9):.1f}x), {passes} passes {direct:.0f} device-s "
        f"({direct / max(prof_cost, 1e-9):.1f}x)"
    )
    print(
        f"      measuring all {every['plans']} executable plans of {', '.join(models)} on {testbed.name} once: about "
        f"{every['device_s']:.0f} device-s ({every['device_s'] / max(prof_cost, 1e-9):.1f}x the profile; "
        "each model's mean measured device-s per plan and rank)"
    )
    if variant is not None:
        vr = variant["ranking"]
        print(
            f"variant, layer repeats {variant['layer_repeats']} (warm layer timing): MAPE {variant['mape_pct']:.1f}%, "
            f"worst {variant['worst']['model']} {variant['worst']['plan']} {variant['worst']['error_pct']:+.1f}%, "
            "ranking " + ", ".join(f"{m} {rk['agree']}/{rk['pairs']}" for m, rk in vr.items())
        )
    ok = mape <= MAPE_GOAL and abs(worst["error_pct"]) <= MAX_GOAL and all(not r["misordered"] for r in ranks.values())
    print(
        f"acceptance: {'met' if ok else 'missed'} (measured under load average "
        f"{load_before[0]:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    path = write_json(
        out,
        {
            "config": vars(args),
            "code_version": code_version(),
            "profiles": profile_paths,
            "host_probe": probes,
            "profile_cost": dict(profile.cost),
            "profile_device": profile.device.to_dict(),
            "machine": machine(load_before),
            "plans": rows,
            "mape_pct": mape,
            "mape_pct_by_model": per_model,
            "mape_pct_by_pass": per_pass,
            "worst": {"model": worst["model"], "plan": worst["plan"], "error_pct": worst["error_pct"]},
            "ranking": ranks,
            "direct_device_s": direct,
            "every_plan": every,
            "cpu_check": checks,
            "direct_one_pass_device_s": one_pass,
            "acceptance_met": ok,
            "variant": variant,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
