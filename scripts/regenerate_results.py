"""Re-run committed evaluations at the current code, in place: each directory's recorded config, its tables rewritten.

Every documented evaluation table is a directory written by ``arena-gym evaluate`` (its
``config.json`` records the config, the workloads and the code version). This script re-runs
each one from the repository root with the config it records (the progress bar on, ``--workers`` local processes:
the tables do not depend on it) and then regenerates the generated blocks of the pages that
read them (``scripts/update_docs_tables.py``); prose that quotes a figure is the author's to
update. ``tests/test_committed_results.py`` re-runs a sample of
every such directory and fails when a committed figure no longer follows from the code.

Usage::

    python scripts/regenerate_results.py                       # every evaluation under benchmarks/results
    python scripts/regenerate_results.py benchmarks/results/search/real-test --workers 2
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import subprocess
import sys
from pathlib import Path

from arena_gym.harness.evaluate import evaluate, recorded_config

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


def evaluation_dirs(root: Path = RESULTS) -> list[Path]:
    """Every directory under ``root`` holding an evaluation's ``config.json``, sorted."""
    found = []
    for path in sorted(root.rglob("config.json")):
        try:
            recorded_config(path.parent)
        except ValueError:
            continue
        found.append(path.parent)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path, help="evaluation directories (default: all committed ones)")
    parser.add_argument("--workers", type=int, default=1, help="local worker processes")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    dirs = [d.resolve() for d in args.dirs] or evaluation_dirs()
    os.chdir(REPO)  # the recorded configs name the data folder and models relative to the repository
    try:
        configs = [recorded_config(d) for d in dirs]  # every directory checked before any work
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    outs = [d.relative_to(REPO) if d.is_relative_to(REPO) else d for d in dirs]
    for out, config in zip(outs, configs):
        config = dataclasses.replace(config, out_dir=str(out), workers=max(1, args.workers), progress=True)
        result = evaluate(config)
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
