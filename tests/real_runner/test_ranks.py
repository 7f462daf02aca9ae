"""The local launcher: rank processes, exit codes, logs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from real_runner.ranks import free_port, spawn_ranks

REPO = Path(__file__).resolve().parents[2]


def test_ranks_start_and_their_exit_codes_and_logs_are_reported(tmp_path):
    job = spawn_ranks(tmp_path / "missing.json", 2, env=os.environ, log_dir=tmp_path / "logs", cwd=REPO)
    assert len(job.pids) == 2 and len(set(job.pids)) == 2
    assert job.wait(timeout=60) == [2, 2]
    assert job.poll() == [2, 2]
    assert "error: job spec" in job.log_tail(1) and "does not exist" in job.log_tail(0)
    assert job.stop() == [2, 2] and job.kill() == [2, 2]


def test_invalid_launches_are_refused(tmp_path):
    assert 0 < free_port() < 65536
    with pytest.raises(ValueError, match="world size must be >= 1"):
        spawn_ranks(tmp_path / "s.json", 0, env={}, log_dir=tmp_path)
    with pytest.raises(ValueError, match="pin_cores names 1 cores for 2 ranks"):
        spawn_ranks(tmp_path / "s.json", 2, env={}, log_dir=tmp_path, pin_cores=[0])
