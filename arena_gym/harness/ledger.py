"""The ledger of a frozen suite: one committed row per ``evaluate`` run on it, appended, never rewritten.

A frozen suite (:data:`arena_gym.harness.suites.FROZEN_SUITES`) is read only to report a
finished result; its ledger, ``benchmarks/results/frozen-test/LEDGER.csv`` in the repository
that holds this package, records every run: when (UTC), the code version, the suite, the
policies, the results directory, the config in its reproducible form (JSON, as
:func:`arena_gym.harness.evaluate.recorded_config` reads it) and the number of workloads.
A run is recorded when it starts, after every check and before any policy runs, so a run
that fails or is interrupted counts too. A package outside a git checkout writes the ledger
next to the results directory instead, with a warning.

The existing ledger is checked before any work (:func:`check_ledger`: a malformed one is a
one-line ValueError); a row is appended with one write in append mode, flushed and synced.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from dataclasses import astuple, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

from arena_gym.harness.out_dirs import check_out_file
from arena_gym.outputs import jsonable

log = logging.getLogger(__name__)

#: The ledger's place in the repository.
LEDGER_PATH = Path("benchmarks") / "results" / "frozen-test" / "LEDGER.csv"


@dataclass(frozen=True)
class LedgerRow:
    """One run on a frozen suite (the ledger's columns, in order)."""

    utc: str
    code_version: str
    suite: str
    policies: str
    out_dir: str
    config: str
    workloads: int


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(LedgerRow))


def repository_root() -> Path | None:
    """The git checkout holding the ``arena_gym`` package (its parent folder, when that has ``.git``), else None."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / ".git").exists() else None


def default_ledger(out_dir: str | os.PathLike[str]) -> Path:
    """The repository's ledger; outside a git checkout ``LEDGER.csv`` next to ``out_dir`` (logged as a warning)."""
    root = repository_root()
    if root is not None:
        return root / LEDGER_PATH
    path = Path(os.path.abspath(out_dir)).parent / LEDGER_PATH.name
    log.warning("the package is not inside a git checkout: the frozen suite's ledger is %s", path)
    return path


def check_ledger(path: str | os.PathLike[str]) -> Path:
    """The ledger's absolute path, checked: absent (it will be created), or a CSV of :data:`COLUMNS` whose every row
    has one cell per column; anything else is a one-line ValueError."""
    ledger = check_out_file(path, "ledger")
    if not ledger.exists():
        return ledger
    try:
        text = ledger.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"ledger {ledger}: cannot read it ({err})") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or tuple(rows[0]) != COLUMNS:
        found = ",".join(rows[0]) if rows else "an empty file"
        raise ValueError(f"ledger {ledger}: malformed: its header is {found}, expected {','.join(COLUMNS)}")
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(COLUMNS):
            raise ValueError(f"ledger {ledger}: malformed: row {number} has {len(row)} cells, expected {len(COLUMNS)}")
    return ledger


def ledger_row(
    suite: str, policies: tuple[str, ...], out_dir: str, config: object, workloads: int, code_version: str
) -> LedgerRow:
    """The row of a run starting now (``config``: a dataclass, written as sorted compact JSON)."""
    return LedgerRow(
        datetime.now(timezone.utc).isoformat(timespec="seconds"),
        code_version,
        suite,
        ",".join(policies),
        out_dir,
        json.dumps(jsonable(config), sort_keys=True, separators=(",", ":")),
        workloads,
    )


def append_row(path: str | os.PathLike[str], row: LedgerRow) -> Path:
    """Append ``row`` to the ledger (checked first; created with its header when absent): one write, flushed, synced."""
    ledger = check_ledger(path)
    ledger.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    with open(ledger, "ab+") as handle:  # append mode: every write goes to the end, whatever was read
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            writer.writerow(COLUMNS)
        else:
            handle.seek(size - 1)
            if handle.read(1) != b"\n":  # a last row without its line end: end it, never join it
                buffer.write("\n")
        writer.writerow(astuple(row))
        handle.write(buffer.getvalue().encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    log.info("recorded in the ledger %s", ledger)
    return ledger
