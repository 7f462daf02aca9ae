"""``arena-gym deploy``: run a policy on a live testbed, with real training jobs, then compare with the simulator.

The same :class:`~arena_gym.protocols.Policy` object that runs in ``simulate`` and the gym schedules
real jobs through the same loop; the run writes the same results directory as a simulation plus the
live extras and a sim-vs-live table: the simulator's prediction and the twin charged the live
overheads, each against live (``docs/deploy.md``). Ctrl-C stops every job with a checkpoint;
``--resume DIR`` continues an interrupted (or crashed) deployment.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import signal
import threading
from contextlib import nullcontext
from pathlib import Path

from arena_gym.harness.cli.common import (
    add_replace_argument,
    bounded_int,
    finite_positive_float,
    out_dir,
    positive_float,
    seed_int,
)
from arena_gym.harness.deploy import (
    KIND,
    DeployConfig,
    Deployment,
    DeployResult,
    check_deploy_dir,
    finish,
    load_deployment,
    open_backend,
    prepare,
    write_results,
)
from arena_gym.harness.flags import flag
from arena_gym.harness.names import perf_help, policy_help
from arena_gym.harness.out_dirs import filled_dir
from arena_gym.harness.runlock import RunLock
from arena_gym.loop import run_episode
from real_runner.live.backend import LiveError, LiveStatus
from real_runner.testbed import LAUNCHERS
from real_runner.training_modes import PRECISION_CHOICES

#: Settings a resumed deployment takes from its journal (so they may not be given with --resume).
_SETTINGS = (
    "policy",
    "trace",
    "testbed",
    "time_scale",
    "launcher",
    "perf",
    "seed",
    "round_s",
    "horizon_s",
    "checkpoint_every_s",
    "stale_timeout_s",
    "max_retries",
    "precision",
    "profile_cache",
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the deploy arguments."""
    d = DeployConfig()
    parser.add_argument("--policy", default=None, help=f"{policy_help()} (default {d.policy})")
    parser.add_argument(
        "--trace",
        default=None,
        help=f"trace file or generator, e.g. live[:work=0.5] or synthetic:... (default {d.trace})",
    )
    parser.add_argument(
        "--testbed", default=None, help=f"preset (cpu-1, cpu-2, cpu-4) or JSON/TOML file (default {d.testbed})"
    )
    parser.add_argument(
        "--time-scale",
        dest="time_scale",
        type=finite_positive_float,
        default=None,
        help="multiply the trace's submit times (0.5: arrivals twice as dense; default 1)",
    )
    parser.add_argument(
        "--launcher",
        choices=sorted(LAUNCHERS),
        default=None,
        help="how ranks are started (default: the testbed's, local for the presets)",
    )
    parser.add_argument(
        "--ray-address",
        dest="ray_address",
        default=None,
        help="address of a running Ray cluster (ray launcher; default: start a local one)",
    )
    parser.add_argument(
        "--perf",
        default=None,
        help=f"{perf_help('performance model')}; or profile (profile the testbed on first use, cached)",
    )
    parser.add_argument("--seed", type=seed_int, default=None, help="random seed (0..2**32-1)")
    parser.add_argument(
        "--round",
        dest="round_s",
        type=finite_positive_float,
        default=None,
        help="also decide every ROUND seconds (>= 1)",
    )
    parser.add_argument(
        "--horizon",
        dest="horizon_s",
        type=positive_float,
        default=None,
        help="stop every job (with a checkpoint) after this many seconds",
    )
    parser.add_argument(
        "--checkpoint-every",
        dest="checkpoint_every_s",
        type=positive_float,
        default=None,
        help=f"seconds between the jobs' periodic checkpoints (default {d.checkpoint_every_s:g})",
    )
    parser.add_argument(
        "--stale-timeout",
        dest="stale_timeout_s",
        type=finite_positive_float,
        default=None,
        help=f"a job silent this long (or 20 steps, if longer) is hung (default {d.stale_timeout_s:g} s)",
    )
    parser.add_argument(
        "--max-retries",
        dest="max_retries",
        type=bounded_int(0, 100),
        default=None,
        help=f"relaunches per job after failures (default {d.max_retries})",
    )
    parser.add_argument(
        "--status-every",
        dest="status_every_s",
        type=finite_positive_float,
        default=None,
        help=f"seconds between status lines (default {d.status_every_s:g})",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISION_CHOICES,
        default=None,
        help="the jobs' compute precision: auto (the testbed's precision key, else fp32 on CPU and the model's "
        "dtype on CUDA, bf16 where the GPU has it), fp32, bf16 or fp16 (with a gradient scaler)",
    )
    parser.add_argument(
        "--profile-cache", dest="profile_cache", default=None, help="where --perf profile keeps profiles"
    )
    parser.add_argument(
        "--out",
        type=deploy_dir,
        default=Path("results/deploy"),
        help="results directory (holds the journal while the deployment runs)",
    )
    add_replace_argument(parser, KIND)
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="DIR",
        help="continue the interrupted deployment in DIR (its settings come from its journal)",
    )
    parser.add_argument("--strict", action="store_true", help="a job requesting another device type is an error")
    parser.add_argument("--no-sim", dest="sim", action="store_false", help="skip the sim-vs-live comparison")
    parser.add_argument("--no-plots", dest="plots", action="store_false", help="skip the PNG plots")
    parser.set_defaults(handler=handle)


def deploy_dir(text: str) -> Path:
    """argparse type: a results directory for a new deployment (never one that holds an unfinished deployment)."""
    try:
        check_deploy_dir(text, replace=True)  # another command's results: refused here; a finished deployment later
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--out ").removeprefix(f"{text}: ")) from None
    return out_dir(text)


def _config(args: argparse.Namespace) -> DeployConfig:
    given = {k: getattr(args, k) for k in (*_SETTINGS, "status_every_s") if getattr(args, k) is not None}
    return DeployConfig(**given, ray_address=args.ray_address, strict=args.strict, sim=args.sim, plots=args.plots)


def handle(args: argparse.Namespace) -> int:
    """Deploy (or resume), print the status while it runs and the results at the end.

    The results directory is locked for the whole run: a second deployment or a resume of it
    while this one lives is refused naming this one (:class:`arena_gym.harness.runlock.RunLock`)."""
    env = dict(os.environ)
    stop = threading.Event()

    def on_sigint(signum, frame) -> None:  # first Ctrl-C: stop gracefully at a safe point; a second one aborts
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    if args.resume is not None:
        extra = [flag(k) for k in _SETTINGS if getattr(args, k) is not None]
        if extra:
            raise ValueError(f"--resume takes the deployment's settings from its journal; drop {', '.join(extra)}")
        lock = RunLock(args.resume, "deploy", flag="--resume", create=False)
    else:
        lock = RunLock(args.out, "deploy")
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with lock:
            if args.resume is not None:
                out = args.resume.resolve()
                dep, run_dir = load_deployment(out, env, args.ray_address)
                dep = _with_display(dep, args)
            else:
                out, run_dir = check_deploy_dir(args.out, replace=args.replace), None
                dep = prepare(_config(args), env)
            try:
                with nullcontext(out) if args.resume is not None else filled_dir(out) as work:
                    # a replacing deployment runs aside (work): stopped, it is dropped and the earlier one kept
                    after = f"continue with: arena-gym deploy --resume {out}" if work == out else f"{out} is kept"
                    _header(dep, out, args.resume is not None)
                    backend = open_backend(
                        dep, work, env, run_dir=run_dir, on_status=_print_status, interrupt=stop.is_set
                    )
                    try:
                        record = run_episode(backend, dep.policy, dep.jobs)
                    except KeyboardInterrupt:
                        print("interrupted: stopping every job with a checkpoint ...", flush=True)
                        backend.stop_all()
                        print(f"stopped; {after}", flush=True)
                        raise
                    except LiveError as exc:
                        backend.stop_all()
                        print(f"arena-gym deploy: error: {exc}; {after}", flush=True)
                        raise _Failed from None
                    finally:
                        backend.close()
                    result = finish(dep, backend, record)
                    write_results(work, dep, result)
            except _Failed:
                return 1
            _report(dep, result, out)
            return 0
    finally:
        signal.signal(signal.SIGINT, previous)


class _Failed(Exception):
    """A live error, reported: leaves the results directory's block (a replacing deployment is dropped)."""


def _with_display(dep: Deployment, args: argparse.Namespace) -> Deployment:
    """Output-only flags that a resume may still change (status lines, comparison, plots)."""
    every = args.status_every_s if args.status_every_s is not None else dep.config.status_every_s
    return dataclasses.replace(
        dep,
        config=dataclasses.replace(
            dep.config, sim=args.sim and dep.config.sim, plots=args.plots and dep.config.plots, status_every_s=every
        ),
    )


def _header(dep: Deployment, out: Path, resumed: bool) -> None:
    bed = dep.testbed
    cores = len(os.sched_getaffinity(0))
    over = bed.oversubscription(cores)
    note = f", OVERSUBSCRIBED {over:.1f}x ({bed.total_devices} devices on {cores} cores)" if over > 1 else ""
    span = max((j.submit_time for j in dep.jobs), default=0.0)
    verb = "resuming" if resumed else "deploying"
    print(
        f"{verb} {dep.config.policy} on {bed.name} ({len(bed.nodes)} x {bed.devices_per_node} {bed.device_type}{note}) "
        f"with the {bed.launcher} launcher: {len(dep.jobs)} jobs arriving over {span:.0f} s; perf {dep.perf_spec}; "
        f"journal and results in {out}",
        flush=True,
    )


def _print_status(status: LiveStatus) -> None:
    running = " | ".join(
        f"{j.job_id} {j.step}/{j.target} {j.steps_per_s:.1f} it/s" for j in status.jobs if j.status == "running"
    )
    print(
        f"[{status.t:6.0f} s] {status.running} running, {status.reconfiguring} reconfiguring, {status.queued} queued, "
        f"{status.finished}/{status.total} done" + (f" | {running}" if running else ""),
        flush=True,
    )


def headline(name: str, m: dict[str, float]) -> str:
    """The leaderboard line of a run, as ``simulate`` prints it (seconds: live runs are short)."""
    return (
        f"{name}: {int(m['jobs_finished'])}/{int(m['jobs_submitted'])} jobs finished, avg JCT {m['avg_jct_s']:.1f} s, "
        f"p95 {m['p95_jct_s']:.1f} s, avg queue {m['avg_queue_s']:.1f} s, makespan {m['makespan_s']:.1f} s, "
        f"avg throughput {m['avg_throughput']:.1f} samples/s, {int(m['reconfigurations'])} reconfigurations, "
        f"{int(m['preemptions'])} preemptions, {int(m.get('failures', 0))} failures"
    )


def sim_vs_live_notes(m: dict[str, float], perf_spec: str) -> list[str]:
    """Why a deployment's sim-vs-live error may be large: an oversubscribed testbed, the estimator's nominal device."""
    if math.isnan(m.get("sim_avg_jct_error", math.nan)):
        return []
    notes = []
    if m["oversubscription"] > 1:
        notes.append(
            f"the testbed is oversubscribed {m['oversubscription']:.1f}x on this machine's cores: its live jobs slowed "
            "each other down, which the simulation does not model; compare on a testbed with a core per device"
        )
    if perf_spec == "estimator":
        notes.append("the estimator's nominal cpu device is a starting point: --perf profile measures this testbed")
    return notes


def _report(dep: Deployment, result: DeployResult, out: Path) -> None:
    m = result.metrics
    print(headline(f"{result.record.policy} (live)", m))
    print(
        f"  {int(m['trajectories_ok'])}/{len(dep.jobs)} jobs continued their loss trajectory across "
        f"{int(result.live_jobs['resumes'].sum())} resumes; median reconfiguration {m['median_reconfiguration_s']:.1f} s"
        + (f"; testbed oversubscribed {m['oversubscription']:.1f}x" if m["oversubscription"] > 1 else "")
    )
    if result.sim_metrics is not None and result.comparison is not None:
        cmp = result.comparison
        print(headline(f"{result.record.policy} (sim) ", result.sim_metrics))
        shares = ", ".join(f"{m} {100 * v:.1f}%" for m, v in sorted(cmp.overheads.save_share.items()))
        print(
            f"sim vs live ({dep.perf_spec}; charged as live: {cmp.overheads.start_s:.1f} s per start, checkpoint saves "
            f"{shares or 'none'} of step time): average JCT {cmp.avg_jct_sim_s:.1f} s simulated vs "
            f"{cmp.avg_jct_live_s:.1f} s live, error {100 * cmp.avg_jct_error:+.1f}%, "
            f"per-job median |error| {100 * float(cmp.jobs['jct_error'].abs().median()):.1f}%"
        )
        if result.pred_metrics is not None:
            print(headline(f"{result.record.policy} (pred)", result.pred_metrics))
            starts = ", ".join(f"{m} {v:.1f} s" for m, v in sorted(cmp.pred_start_s.items()))
            print(
                f"predicted vs live ({dep.perf_spec}; charged as the model predicts, first start and closing save "
                f"{starts or 'not known: 0 s'}, a save every {dep.config.checkpoint_every_s:g} s): "
                f"average JCT {cmp.avg_jct_pred_s:.1f} s predicted, "
                f"error {100 * cmp.avg_jct_pred_error:+.1f}%, "
                f"per-job median |error| {100 * float(cmp.jobs['pred_jct_error'].abs().median()):.1f}%"
            )
        print(f"{'job':<12} {'live JCT s':>10} {'sim JCT s':>10} {'error':>8} {'pred JCT s':>10} {'error':>8}")
        for row in cmp.jobs.itertuples(index=False):
            print(
                f"{row.job_id:<12} {row.live_jct_s:>10.1f} {row.sim_jct_s:>10.1f} {100 * row.jct_error:>+7.1f}% "
                f"{row.pred_jct_s:>10.1f} {100 * row.pred_jct_error:>+7.1f}%"
            )
    unfinished = len(dep.jobs) - int(m["jobs_finished"])
    if unfinished:
        print(f"{unfinished} job(s) did not finish (horizon, or the policy never started them)")
    for note in sim_vs_live_notes(m, dep.perf_spec):
        print(f"  ({note})")
    print(f"results: {out}")
