"""``arena-gym estimate query | validate | calibrate | profile``: the estimator's command line.

This is CLI code: it prints. Handlers raise ValueError for bad input; ``arena-gym`` turns it
into one line on stderr and exit code 2, like every other command. Output files are checked
before any work and written atomically.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path

from arena_gym.harness.cli.common import bounded_int, out_file, text_type
from arena_gym.harness.cli.profile import configure as configure_profile
from arena_gym.harness.names import cluster_help
from arena_gym.outputs import atomic_write
from arena_gym.types import ClusterSpec, GpuType, Grid, ModelRef, ResourceShape

log = logging.getLogger(__name__)

REGENERATE = (
    "arena-gym estimate calibrate --measured ../shared/data/arena/measured_iter_time.csv "
    "--dp-memory ../shared/data/arena/dp_memory_gb.csv --out estimator/data/calibration.json"
)


def _global_batch(value: int) -> int:
    """The estimator's own batch check (its module imported only when a batch is read)."""
    from estimator.perfmodel import check_batch

    return check_batch(value)


def _grid(text: str) -> Grid:
    from estimator.hardware import get_gpu

    try:
        gpu_type, locality, stages = text.split(":")
        nodes, per_node = (int(x) for x in locality.lower().split("x"))
        get_gpu(gpu_type)
        if nodes * per_node > 1024:
            raise ValueError("at most 1024 GPUs")
        return Grid(ResourceShape(GpuType(gpu_type), nodes, per_node), int(stages))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected TYPE:NODESxGPUS:STAGES such as a100:2x4:2 ({exc})"
        ) from None


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``query``, ``validate``, ``calibrate`` and ``profile`` sub-subcommands to the ``estimate`` parser."""
    sub = parser.add_subparsers(dest="estimate_command", metavar="ACTION")
    parser.set_defaults(handler=_missing_action)

    q = sub.add_parser("query", help="print a job's grid table (best plan per shape and stage count)")
    q.add_argument("--model", required=True, help="family__size, e.g. gpt__1.3B")
    q.add_argument("--batch", type=text_type(int, check=_global_batch), required=True, help="global batch size")
    q.add_argument("--gpu-type", default=None, help="one GPU type (default: every type of the cluster)")
    q.add_argument(
        "--cluster",
        default="arena-1280",
        help=f"{cluster_help()}, optionally with node counts [TYPE=NODES,...] (default: arena-1280)",
    )
    q.add_argument("--params", default=None, help="estimator parameter JSON (default: the committed calibration)")
    q.add_argument(
        "--pareto",
        type=_grid,
        default=None,
        metavar="TYPE:NODESxGPUS:STAGES",
        help="also print the Pareto plan set of one grid, e.g. a100:2x4:2",
    )
    q.set_defaults(handler=_query)

    v = sub.add_parser("validate", help="predict a measured table and print the error (MAPE)")
    v.add_argument("--measured", required=True, help="CSV in the measured_iter_time.csv format")
    v.add_argument(
        "--out",
        type=out_file,
        default=None,
        help="write the predictions (input columns + predicted_iter_time_s, predicted_oom)",
    )
    v.add_argument(
        "--dp-memory",
        default=None,
        help="also check the DP view's memory need against a CSV in the dp_memory_gb.csv format",
    )
    v.add_argument("--params", default=None, help="estimator parameter JSON (default: the committed calibration)")
    v.set_defaults(handler=_validate)

    c = sub.add_parser(
        "calibrate",
        help="fit the efficiency parameters to a measured table, or one GPU type's to a profile of the runner on it",
    )
    source = c.add_mutually_exclusive_group(required=True)
    source.add_argument("--measured", help="CSV in the measured_iter_time.csv format")
    source.add_argument(
        "--profile",
        help="PROFILE.json of `estimate profile`: calibrate its device type's multipliers to its one-GPU step "
        "times (the other parameters and types keep the committed values); the file --out writes is read by "
        "--perf calibrated:FILE and `estimate query --params FILE`",
    )
    c.add_argument(
        "--models",
        type=text_type(tuple[str, ...]),
        default=None,
        help="with --profile: the comma-separated profiled models to fit (default: all)",
    )
    c.add_argument(
        "--dp-memory", default=None, help="also fit the DP view's memory need to a CSV in the dp_memory_gb.csv format"
    )
    c.add_argument(
        "--out", type=out_file, default=None, help="write the fitted parameters here (JSON; default: print them)"
    )
    c.add_argument("--max-evals", type=bounded_int(1, 100_000), default=30, help="solver iterations (default 30)")
    c.set_defaults(handler=_calibrate)

    p = sub.add_parser(
        "profile",
        help="profile a testbed (layers on one device, collective tables) into PROFILE.json "
        "for --perf profiled:PROFILE.json",
    )
    configure_profile(p)


def _missing_action(args: argparse.Namespace) -> int:
    raise ValueError("choose an action: query, validate, calibrate or profile")


def _params(path: str | None):
    from estimator.params import EstimatorParams, default_params

    return EstimatorParams.load(path) if path else default_params()


def _cluster(spec: str) -> ClusterSpec:
    from arena_gym.cluster import resolve_cluster

    return resolve_cluster(spec)


def _fmt(t: float) -> str:
    return f"{t:9.3f}" if math.isfinite(t) else "      inf"


def _query(args: argparse.Namespace) -> int:
    from estimator.perfmodel import EstimatorPerfModel
    from estimator.table import reason_text

    model = ModelRef.parse(args.model)
    cluster = _cluster(args.cluster)
    perf = EstimatorPerfModel(cluster, _params(args.params))
    arch = perf.arch(model)
    types = [args.gpu_type] if args.gpu_type else list(cluster.gpu_types)
    tables = [perf.table(model, args.batch, t) for t in types]
    from estimator.zoo import describe

    print(describe(arch))
    print(f"global batch {args.batch}; times in seconds per iteration; '*' marks the proxy plan of a shape")
    for table in tables:
        header = "shape".ljust(14) + "".join(f"   S={s:<6}" for s in table.stage_counts) + "  dp-only   proxy plan"
        print()
        print(header)
        for row, shape in enumerate(table.shapes):
            cells = []
            for col in range(len(table.stage_counts)):
                t = table.time[row, col]
                mark = "*" if math.isfinite(t) and col == table.best_stage[row] else " "
                cells.append(_fmt(t) + mark)
            plan = table.plan(row, table.best_stage[row], perf.config)
            why = "" if plan else "infeasible: " + reason_text(max(table.reason[row]))
            print(
                str(shape).ljust(14)
                + " ".join(cells)
                + " "
                + _fmt(table.dp_list[row])
                + "   "
                + (plan.describe() if plan else why)
            )
    if args.pareto:
        _print_pareto(perf, model, args.batch, args.pareto)
    return 0


def _print_pareto(perf, model: ModelRef, batch: int, grid: Grid) -> None:
    plans = perf.plan_grid(model, batch, grid)
    print()
    print(f"Pareto set of {grid.shape} with {grid.n_stages} stages (time vs memory per GPU):")
    if not plans.pareto:
        print("  no feasible plan")
    for est in plans.pareto:
        print(
            f"  {est.plan.describe():40s} {est.total_s:9.3f} s  compute {est.compute_s:.3f}  intra {est.intra_stage_comm_s:.3f}"
            f"  inter {est.inter_stage_comm_s:.3f}  bubble {est.bubble_s:.3f}  {est.memory_per_gpu_gb:6.1f} GiB/GPU"
        )


def _validate(args: argparse.Namespace) -> int:
    from estimator.calibration import Problem, load_points, validate
    from estimator.dpmemory import validate_dp_memory
    from estimator.measured import ARTIFACT_GPU_MEMORY_GB, DpMemoryTable

    params = _params(args.params)
    problem = Problem(load_points(args.measured))
    result = validate(problem, params)
    dp_check = (
        validate_dp_memory(DpMemoryTable.load(args.dp_memory).need_gb, params, ARTIFACT_GPU_MEMORY_GB.values())
        if args.dp_memory
        else None
    )
    _print_validation(result)
    if dp_check is not None:
        print(
            f"DP memory need: MAPE {dp_check.mape:.2f}% over {dp_check.rows} profiled rows; the DP memory rule "
            f"agrees on {dp_check.agree}/{dp_check.points} (row x GPU memory {', '.join(f'{m:g}' for m in ARTIFACT_GPU_MEMORY_GB.values())} GB) points"
        )
    if args.out:
        frame = result.frame.drop(columns=["ape"])
        frame["iter_time_s"] = [p.iter_time_s if not p.oom else math.nan for p in problem.points]
        atomic_write(args.out, lambda tmp: frame.to_csv(tmp, index=False))
        print(f"predictions written to {args.out}")
    return 0


def _print_validation(result) -> None:
    agree, total = result.oom_agreement()
    n = int(result.frame["ape"].notna().sum())
    print(f"MAPE {result.mape():.2f}% over {n} points feasible in both (median {result.median_ape():.2f}%)")
    print(f"OOM agreement: {agree}/{total} points")
    for column, label in (("num_gpus", "GPU count"), ("gpu_type", "GPU type"), ("family", "model family")):
        parts = ", ".join(f"{k}: {v:.2f}%" for k, v in result.mape(column).items())
        print(f"MAPE by {label}: {parts}")


def _calibrate(args: argparse.Namespace) -> int:
    if args.profile:
        return _calibrate_profile(args)
    if args.models:
        raise ValueError("--models selects profiled models: it needs --profile")
    from dataclasses import replace

    from estimator.calibration import Problem, fit, load_points, validate
    from estimator.dpmemory import fit_dp_memory
    from estimator.measured import DpMemoryTable
    from estimator.params import EstimatorParams

    problem = Problem(load_points(args.measured))
    dp_table = DpMemoryTable.load(args.dp_memory) if args.dp_memory else None
    params = fit(problem, EstimatorParams(), max_nfev=args.max_evals)
    if dp_table is not None:
        params = replace(params, dp_memory=fit_dp_memory(dp_table.need_gb))
        for kind, c in sorted(params.dp_memory.items()):
            print(
                f"DP memory of {kind}: {c.sharded_bytes:.2f} B/parameter sharded over the replicas, "
                f"activations x{c.act_factor:.2f}"
            )
    result = validate(problem, params)
    _print_validation(result)
    extra = {"fitted_on": Path(args.measured).name, "regenerate": REGENERATE, "mape_percent": round(result.mape(), 3)}
    if dp_table is not None:
        extra["dp_memory_fitted_on"] = Path(args.dp_memory).name
    if args.out:
        atomic_write(args.out, lambda tmp: params.save(tmp, extra))
        print(f"parameters written to {args.out}")
    else:
        json.dump({**params.to_dict(), **extra}, sys.stdout, indent=2)
        print()
    return 0


def _calibrate_profile(args: argparse.Namespace) -> int:
    from estimator.params import default_params
    from estimator.profile import load_profile
    from estimator.profile_calibration import calibrate_type, one_gpu_points

    profile = load_profile(args.profile)
    base = default_params()
    result = calibrate_type(one_gpu_points(profile, base, models=args.models), base, max_nfev=args.max_evals)
    before, after = result.errors_before(), result.errors_after()
    print(f"{result.gpu_type}: {len(result.points)} one-GPU plans of {args.profile}")
    print(f"{'model':<12} {'batch':>5} {'micro':>5} {'profiled s':>11} {'before s':>10} {'after s':>10} {'error':>7}")
    for p, b, a, e in zip(result.points, result.before_s, result.after_s, after):
        print(
            f"{p.model.name:<12} {p.batch:>5} {p.plan.micro_batches:>5} {p.profiled_s:>11.4f} {b:>10.4f} {a:>10.4f} "
            f"{100 * e:>+6.1f}%"
        )
    typ = result.params.gpu_type(result.gpu_type)
    print(
        f"multipliers of {result.gpu_type}: compute {typ.compute:.3g}, compute_fp32 {typ.compute_fp32:.3g}, "
        f"memory {typ.memory:.3g}, kernel {typ.kernel:.3g}; max |error| {100 * abs(before).max():.1f}% before, "
        f"{100 * abs(after).max():.1f}% after"
    )
    extra = {
        "calibrated_type": result.gpu_type,
        "calibrated_on": Path(args.profile).name,
        "max_abs_error_percent": {
            "before": round(100 * float(abs(before).max()), 2),
            "after": round(100 * float(abs(after).max()), 2),
        },
    }
    restarts = profile.restart_table()
    if restarts is not None:  # the measured (re)start costs travel with the parameters (calibrated: charges them)
        extra["restart"] = restarts.to_dict()
    if args.out:
        atomic_write(args.out, lambda tmp: result.params.save(tmp, extra))
        print(f"parameters written to {args.out} (use: --perf calibrated:{args.out})")
    else:
        json.dump({**result.params.to_dict(), **extra}, sys.stdout, indent=2)
        print()
    return 0
