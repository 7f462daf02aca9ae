"""The interrupt soak: its refusals, and a short real run whose stops all keep the command line's contract."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import run_benchmark

REPO = Path(__file__).resolve().parents[2]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_benchmark("interrupt_soak", *args, timeout=timeout)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--stops", "0"], "--stops must be >= 1"),
        (["--window", "2", "1"], "0 < FROM < TO"),
        (["--data-dir", "no-such-folder"], "has no itp/ folder"),
        (["--checkout", "docs"], "is not a checkout of this project"),
    ],
)
def test_bad_arguments_are_refused_before_any_stop(tmp_path: Path, args: list[str], message: str) -> None:
    done = run(*args, "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and message in done.stderr.splitlines()[-1], done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.timeout(300)
def test_a_short_soak_stops_every_run_within_the_contract(shared_data: Path, tmp_path: Path) -> None:
    done = run("--stops", "2", "--seed", "3", "--window", "0.6", "1.6", "--data-dir", str(shared_data),
               "--checkout", str(REPO), "--checkout", str(REPO), "--out", str(tmp_path), timeout=280)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads((tmp_path / "interrupts.json").read_text())
    stops = result["stops"]
    assert [r["checkout"] for r in stops] == [0, 1, 1, 0]  # each planned stop on both, the order alternating
    assert [r["after_s"] for r in stops[:2]] == [stops[0]["after_s"]] * 2
    assert [r["outcome"] for r in stops] == ["kept"] * 4
    assert all(r["exit"] == {"SIGINT": 130, "SIGTERM": 143}[r["signal"]] and r["signal_to_exit_s"] > 0 for r in stops)
    assert [c["broken"] for c in result["checkouts"]] == [0, 0] and result["config"]["stops"] == 2
