"""The README's table of `make run` is what the Makefile's own command prints today (a stale table fails)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from arena_gym.harness.cli import main
from tests.conftest import REPO
from tests.helpers import load_script

SOURCE = "results/compare/leaderboard.csv"
docs = load_script("update_docs_tables")


def _make_run_argv(out: Path) -> list[str]:
    """The arguments of `make run`'s compare, read from the Makefile (the policies: compare's default)."""
    make = (REPO / "Makefile").read_text()
    cluster = re.search(
        r"compare \$\(if \$\(POLICIES\),--policies \$\(POLICIES\) \)--cluster (\S+) --out \$\(OUT\)", make
    )
    assert cluster, "the Makefile's run recipe changed: update this test"
    return ["compare", "--cluster", cluster.group(1), "--out", str(out)]


def _readme_rows() -> tuple[list[str], dict[str, list[str]]]:
    """The columns and the rows (policy -> cells as shown) of the README's generated table of :data:`SOURCE`."""
    blocks = [m for m in docs.BLOCK.finditer((REPO / "README.md").read_text()) if m.group(3) == SOURCE]
    assert blocks, f"README.md has no generated table of {SOURCE}"
    _, kind, _, raw, body, _ = blocks[0].groups()
    columns = docs._options(kind, raw, "README.md")["columns"].split(",")
    lines = [line.strip("|").split("|") for line in body.strip().splitlines()[2:]]
    return columns, {cells[0].strip(): [c.strip() for c in cells[1:]] for cells in lines}


def test_the_readme_table_matches_a_fresh_make_run(tmp_path: Path) -> None:
    out = tmp_path / "compare"
    assert main(_make_run_argv(out)) == 0
    columns, readme = _readme_rows()
    fresh = pd.read_csv(out / "leaderboard.csv").set_index("policy")
    assert sorted(readme) == sorted(fresh.index)
    stale = []
    for policy, cells in readme.items():
        for column, cell in zip(columns[1:], cells, strict=True):
            shown, now = float(cell.replace(",", "")), float(fresh.loc[policy, column])
            # 1 % (or half the last digit shown) absorbs floating-point differences between machines
            if not math.isclose(shown, now, rel_tol=0.01, abs_tol=0.5 if "." not in cell else 0.005):
                stale.append(f"{policy} {column}: README {cell}, make run {now:,.3f}")
    assert not stale, "README's make-run table is stale (make run, then scripts/update_docs_tables.py): " + "; ".join(
        stale
    )
