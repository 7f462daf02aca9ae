"""The chaos soak of the live runner, for 3 minutes: every job finishes, every trajectory continues, no step lost or
counted twice. Marker ``slow`` (real deployments under faults; about 5-15 minutes on a loaded 2-core host)."""

from __future__ import annotations

import json

import pytest

from real_runner.launchers.local import find_processes
from tests.helpers import run_benchmark

pytestmark = [pytest.mark.slow, pytest.mark.distributed, pytest.mark.timeout(2400)]


def test_a_three_minute_soak_loses_and_doubles_no_step(tmp_path) -> None:
    done = run_benchmark(
        "chaos_soak",
        *["--minutes", "3", "--seed", "0", "--out", str(tmp_path), "--drain-minutes", "25"],
        *["--work", "2"],  # busy through the faults on a fast host
        timeout=2300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    result = json.loads((tmp_path / "chaos_soak_seed0_3min.json").read_text())
    totals = result["totals"]
    assert result["ok"] and totals["jobs"] >= 6
    assert totals["finished"] == totals["trajectories_ok"] == totals["accounted_ok"] == totals["jobs"]
    assert totals["steps_lost"] == 0 and totals["steps_doubled"] == 0
    assert totals["steps_kept"] == totals["steps_target"]
    assert sum(result["faults_injected"].values()) >= 4 and result["recoveries"]["resumes"] >= 1
    assert "faults injected:" in done.stdout and "0 lost, 0 counted twice" in done.stdout
    assert find_processes(str(tmp_path)) == []
