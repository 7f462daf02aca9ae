"""Re-run committed evaluations at the current code, in place: each directory's recorded config, its tables rewritten.

Every documented evaluation table is a directory written by ``arena-gym evaluate`` (its
``config.json`` records the config, the workloads and the code version). This script re-runs
each one from the repository root with the config it records (the progress bar on, ``--workers`` local processes:
the tables do not depend on it) and then regenerates the generated blocks of the pages that
read them (``scripts/update_docs_tables.py``); prose that quotes a figure is the author's to
update. ``tests/test_committed_results.py`` re-runs a sample of
every such directory and fails when a committed figure no longer follows from the code.
Each directory's ``.gitignore`` (the large files that are not committed) is kept, as every results writer
keeps it. ``make regenerate`` runs this with the other commands whose committed tables follow from policy runs.
Directories of a frozen suite (``frozen-test``) are left out of both unless named: re-running
one is a new look at the test set, and ``evaluate`` records it in the ledger.

``--tables-only`` re-runs no policy: it rewrites each directory's ``summary.csv``,
``summary.md``, ``by_trace.csv`` and plots from its committed ``per_workload.csv`` (and
``jobs.csv`` for ``cdf.png``, which is kept as it is when the file is not committed), with
evaluate's own summarising function (:func:`arena_gym.harness.evaluate.write_summaries`), for
directories whose policies' decisions did not change but whose tables did (a new statistic).
It is no run on the suite, so it adds no ledger row.

Usage::

    python scripts/regenerate_results.py                       # every evaluation under benchmarks/results
    python scripts/regenerate_results.py benchmarks/results/search/real-test --workers 2
    python scripts/regenerate_results.py --tables-only         # every evaluation's tables, from its per_workload.csv
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from arena_gym.harness.cli import OneLineParser, guarded
from arena_gym.harness.cli.common import bounded_int
from arena_gym.harness.evaluate import EvalConfig, evaluate, recorded_config, write_summaries
from arena_gym.harness.suites import FROZEN_SUITES

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
PROG = "regenerate_results"


def evaluation_dirs(root: Path = RESULTS, frozen: bool = False) -> list[Path]:
    """Every directory under ``root`` holding an evaluation's ``config.json``, sorted; one of a frozen suite only with
    ``frozen`` (re-running it is a new look at the test set: name it, and the run goes into the ledger)."""
    found = []
    for path in sorted(root.rglob("config.json")):
        try:
            config = recorded_config(path.parent)
        except ValueError:
            continue
        if frozen or config.suite not in FROZEN_SUITES:
            found.append(path.parent)
    return found


def recorded_suite(directory: Path) -> tuple[str, str]:
    """The suite name and description an evaluation directory's ``config.json`` records; one-line ValueError when it
    records none or the directory has no ``per_workload.csv``."""
    path = directory / "config.json"
    try:
        suite = json.loads(path.read_text(encoding="utf-8"))["suite"]
        name, description = str(suite["name"]), str(suite["description"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: records no suite ({err})") from None
    if not (directory / "per_workload.csv").is_file():
        raise ValueError(f"{directory}: no per_workload.csv to rewrite the tables from")
    return name, description


def rewrite_tables(directory: Path, config: EvalConfig) -> pd.DataFrame:
    """Rewrite an evaluation directory's summaries and plots from its ``per_workload.csv`` (no policy runs)."""
    suite, description = recorded_suite(directory)
    table = pd.read_csv(directory / "per_workload.csv")
    jobs = pd.read_csv(directory / "jobs.csv") if (directory / "jobs.csv").is_file() else None
    return write_summaries(directory, table, jobs, config, suite, description)


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and regenerate; bad input -> one line and exit code 2, Ctrl-C -> 130."""
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path, help="evaluation directories (default: all committed ones)")
    parser.add_argument("--workers", type=bounded_int(1, 256), default=1, help="local worker processes (1..256)")
    parser.add_argument(
        "--tables-only",
        action="store_true",
        help="re-run no policy: rewrite the summaries, by_trace.csv and plots from the committed per_workload.csv",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return guarded(PROG, lambda: regenerate(args.dirs, args.workers, args.tables_only))


def regenerate(dirs: list[Path], workers: int, tables_only: bool) -> int:
    """Re-run (or with ``tables_only`` re-summarise) ``dirs`` (default: every committed evaluation), then the pages."""
    dirs = [d.resolve() for d in dirs] or evaluation_dirs(frozen=tables_only)
    os.chdir(REPO)  # the recorded configs name the data folder and models relative to the repository
    configs = [recorded_config(d) for d in dirs]  # every directory checked before any work
    if tables_only:
        for d in dirs:
            recorded_suite(d)
    outs = [d.relative_to(REPO) if d.is_relative_to(REPO) else d for d in dirs]
    for directory, out, config in zip(dirs, outs, configs):
        if tables_only:
            summary = rewrite_tables(directory, config)
            logging.info("%s: tables of %d policies rewritten", out, len(summary))
            continue
        config = dataclasses.replace(config, out_dir=str(out), workers=workers, progress=True)
        result = evaluate(
            config, replace=True
        )  # in place (keeping its .gitignore): the committed directories record no kind
        logging.info("%s: %d rows in %.0f s", out, len(result.per_workload), result.wall_s)
    pages = [p for p in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))) if _reads(p, outs)]
    if not pages:
        return 0
    return subprocess.call([sys.executable, str(REPO / "scripts" / "update_docs_tables.py"), *map(str, pages)])


def _reads(page: Path, outs: list[Path]) -> bool:
    """Whether a documentation page has a generated block reading one of the directories."""
    text = page.read_text(encoding="utf-8")
    return any(f":{out.as_posix()}/" in text for out in outs)


if __name__ == "__main__":
    sys.exit(main())
