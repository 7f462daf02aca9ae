"""``arena-gym trace info | convert``."""

from __future__ import annotations

import argparse
import json

from arena_gym.cluster import load_cluster
from arena_gym.harness.cli.common import add_cache_arguments, add_model_arguments, cache_dir, out_file, seed_int
from arena_gym.harness.experiment import user_models
from arena_gym.harness.gpu_types import check_catalogue
from arena_gym.perf import trace_hooks
from arena_gym.registry import make_perf, own


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the trace sub-subcommands."""
    sub = parser.add_subparsers(dest="action", required=True)
    for name, help_text in (("info", "summarise a trace"), ("convert", "write a trace in the canonical CSV format")):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("trace", help="trace file or synthetic[:k=v,...]")
        p.add_argument("--cluster", default="testbed-64", help="cluster used to sample missing fields feasibly")
        p.add_argument("--perf", default="estimator", help="performance model used to sample missing fields")
        p.add_argument("--seed", type=seed_int, default=0, help="random seed (0..2**32-1)")
        add_model_arguments(p)
        add_cache_arguments(p)
        if name == "convert":
            p.add_argument("--out", type=out_file, required=True, help="canonical CSV to write (atomically)")
        p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Load the trace; print its summary or write it canonically."""
    what = f"trace {args.trace!r}"
    resolve_trace, save_trace = own("traces:resolve_trace", what), own("traces:save_trace", what)

    cluster = load_cluster(args.cluster)
    perf = make_perf(args.perf, cluster, cache_dir=cache_dir(args), models=user_models(args.model_spec))
    feasible, iter_time = trace_hooks(perf, cluster)
    trace = resolve_trace(args.trace, seed=args.seed, feasible=feasible, iter_time=iter_time)
    check_catalogue(trace.jobs, args.trace)
    if args.action == "info":
        print(json.dumps(trace.summary(), indent=2, default=str))
    else:
        save_trace(trace, args.out)
        print(f"wrote {len(trace.jobs)} jobs to {args.out}")
    return 0
