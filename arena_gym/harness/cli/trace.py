"""``arena-gym trace info | convert``.

``info`` prints :meth:`traces.Trace.summary` as JSON (with ``deadline_sources``: none, declared,
derived or mixed) plus the jobs ``--cluster`` can never run; ``convert`` writes the canonical
CSV, each deadline's source included.
"""

from __future__ import annotations

import argparse
import json
import logging

from arena_gym.harness.cli.common import add_cache_arguments, add_model_arguments, cache_dir, out_file, seed_int
from arena_gym.harness.experiment import check_trace_name, user_models
from arena_gym.harness.gpu_types import check_catalogue
from arena_gym.perf import describe_unschedulable, trace_hooks, unschedulable_reason
from arena_gym.registry import own
from arena_gym.scenario import build_scenario

log = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the trace sub-subcommands."""
    sub = parser.add_subparsers(dest="action", required=True)
    for name, help_text in (("info", "summarise a trace"), ("convert", "write a trace in the canonical CSV format")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("trace", help="trace file or synthetic[:k=v,...]")
        p.add_argument(
            "--cluster",
            default="testbed-64",
            help="cluster used to sample missing fields feasibly (info: and to list the jobs it can never run)",
        )
        p.add_argument("--perf", default="estimator", help="performance model used to sample missing fields")
        p.add_argument("--seed", type=seed_int, default=0, help="random seed (0..2**32-1)")
        add_model_arguments(p)
        add_cache_arguments(p)
        if name == "convert":
            p.add_argument("--out", type=out_file, required=True, help="canonical CSV to write (atomically)")
        p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Load the trace; print its summary (with the jobs ``--cluster`` can never run) or write it canonically."""
    what = f"trace {args.trace!r}"
    resolve_trace, save_trace = own("traces:resolve_trace", what), own("traces:save_trace", what)

    models = user_models(args.model_spec, args.allow_shadowing)
    scenario = build_scenario(
        args.cluster, args.perf, cache_dir=cache_dir(args), models=models, allow_shadowing=args.allow_shadowing
    )
    cluster, perf = scenario.cluster, scenario.truth
    feasible, iter_time = trace_hooks(perf, cluster)
    spec = check_trace_name(args.trace, args.allow_shadowing)
    trace = resolve_trace(spec, seed=args.seed, feasible=feasible, iter_time=iter_time)
    check_catalogue(trace.jobs, args.trace)
    if args.action == "info":
        reasons = {j.job_id: why for j in trace.jobs if (why := unschedulable_reason(j, perf, cluster)) is not None}
        summary = {**trace.summary(), "unschedulable": {"cluster": cluster.name, "jobs": reasons}}
        print(json.dumps(summary, indent=2, default=str))
        if reasons:
            log.warning(
                "%d job(s) can never run on %s: %s", len(reasons), cluster.name, describe_unschedulable(reasons)
            )
    else:
        save_trace(trace, args.out)
        print(f"wrote {len(trace.jobs)} jobs to {args.out} (deadlines: {trace.deadline_sources})")
    return 0
