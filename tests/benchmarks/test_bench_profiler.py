"""bench_profiler measures only the plans a testbed holds, and refuses a testbed that holds none in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from arena_gym.types import PipeSchedule, Plan, StagePlan
from tests.helpers import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_profiler.py"


def bench():
    return load_script("bench_profiler", "benchmarks")


def test_held_plans_fit_the_devices_and_keep_tensor_parallelism_in_a_node():
    table = {
        "one": Plan((StagePlan(0, 6, 1, 1),), 1),
        "dp2": Plan((StagePlan(0, 6, 2, 1),), 1),
        "tp2": Plan((StagePlan(0, 6, 1, 2),), 1),
        "pp2": Plan((StagePlan(0, 3, 1, 1), StagePlan(3, 6, 1, 1)), 2, PipeSchedule.GPIPE),
    }
    held = bench().held_plans
    assert set(held(table, 1, 1)) == {"one"}
    assert set(held(table, 2, 1)) == {"one", "dp2", "pp2"}  # two one-device nodes: no tensor parallelism
    assert set(held(table, 2, 2)) == set(table)


def test_a_one_device_testbed_is_refused_in_one_line():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--testbed", "cpu-1", "--models", "gpt__tiny", "--no-cpu-check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().count("\n") == 0 and "holds none of the benchmarked plans" in done.stderr
