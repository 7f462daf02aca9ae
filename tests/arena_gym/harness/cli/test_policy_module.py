"""``--policy mymodule:MyPolicy`` finds a module in the current folder with the installed script too
(no ``PYTHONPATH=.``), and a local file named like one of the packages never shadows it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO


def test_a_policy_module_in_the_current_folder_is_found(tmp_path: Path) -> None:
    (tmp_path / "my_policies.py").write_text("from agents.fcfs import FCFS\n\n\nclass Mine(FCFS):\n    pass\n")
    # -P: the interpreter does not put the current folder on sys.path (as the arena-gym script does not)
    code = "import sys; from arena_gym.harness.cli import main; sys.exit(main())"
    args = ["simulate", "--policy", "my_policies:Mine", "--trace", "synthetic:n_jobs=4", "--cluster", "tiny"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-P", "-c", code, *args, "--out", str(out), "--no-plots"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "metrics.json").read_text())["jobs_finished"] == 4
