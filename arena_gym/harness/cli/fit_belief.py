"""``arena-gym fit-belief``: refit the packaged beliefs over unknown work (:mod:`arena_gym.harness.belief_fit`).

Prints, for the real belief, the held-out log-likelihood of every (unit, levels) candidate on
the validation split (the fit keeps the best one), and what each file holds.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from agents.belief import DATA_DIR, KINDS, WorkBelief, save_belief
from arena_gym import REAL_DATA_DIR


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``fit-belief`` arguments and the handler."""
    parser.add_argument("--kind", choices=(*KINDS, "all"), default="all", help="which belief to fit (default: all)")
    parser.add_argument("--data-dir", default=REAL_DATA_DIR, help=f"the real data folder (default {REAL_DATA_DIR})")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="output folder (default: the package data folder)")
    parser.set_defaults(handler=handle)


def describe(belief: WorkBelief, path: Path) -> str:
    """What a fitted file holds, for the terminal."""
    p = belief.provenance
    levels = " > ".join((*belief.levels, "pooled"))
    prior = belief.arrivals.rate_shape / belief.arrivals.rate_s * 3600
    lines = [
        f"{path.name}: {path.stat().st_size / 1024:.1f} KiB, {p.jobs} jobs of {p.env} ({p.split} split)",
        f"  unit {belief.unit}, groups {levels}: {len(belief.groups)} groups (at least {belief.min_group_jobs} jobs)",
        f"  arrivals: rate prior Gamma(shape {belief.arrivals.rate_shape:g}, rate {belief.arrivals.rate_s:g} s), "
        f"mean {prior:.2f} jobs/h from {belief.arrivals.windows} windows; mix of {len(belief.arrivals.mix)} configurations",
        f"  {len(belief.references.entries)} reference iteration times; code {p.code_version}",
    ]
    if belief.selection:
        lines.append(f"  held-out log-likelihood of total iterations ({belief.selection[0].jobs} jobs, nats per job):")
        lines.append(f"    {'unit':<20} {'levels':<22} {'loglik':>9} {'se of diff':>10}")
        for c in belief.selection:
            lines.append(f"    {c.unit:<20} {' > '.join(c.levels) or 'pooled':<22} {c.loglik:>9.4f} {c.se:>10.4f}")
    return "\n".join(lines)


def handle(args: argparse.Namespace) -> int:
    """Fit each kind asked for and write it; a missing data folder (the real belief needs it) fails first."""
    from arena_gym.harness.belief_fit import fit_belief

    kinds = KINDS if args.kind == "all" else (args.kind,)
    if "real" in kinds and not os.path.isdir(args.data_dir):
        raise ValueError(f"--data-dir {args.data_dir}: no such folder (the real belief needs the traces)")
    for kind in kinds:
        belief = fit_belief(kind, args.data_dir)
        print(describe(belief, save_belief(belief, args.out / f"belief-{kind}.json")))
    return 0
