"""Every command that writes a run directory owns it while it runs: a second writer or a resume is refused
naming the owner, a dead owner's lock is taken over, and an unwritable place fails before any work."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from arena_gym.harness.cli import main
from arena_gym.harness.runlock import RunLock, lock_path
from tests.arena_gym.harness.test_runlock import HOLD
from tests.conftest import REPO

TRACE = "synthetic:n_jobs=3"
#: A command line per command that writes a run directory (OUT is replaced by the directory).
COMMANDS = {
    "simulate": ["simulate", "--trace", TRACE, "--cluster", "tiny", "--no-plots", "--out", "OUT"],
    "compare": ["compare", "--policies", "fcfs", "--trace", TRACE, "--cluster", "tiny", "--no-plots", "--out", "OUT"],
    "evaluate": ["evaluate", "--policies", "arena,fcfs", "--suite", "synthetic", "--limit", "1", "--out", "OUT"],
    "train": ["train", "--steps", "64", "--no-progress", "--out", "OUT"],
    "deploy": ["deploy", "--testbed", "cpu-1", "--trace", "live:n_jobs=1", "--out", "OUT"],
    "deploy --resume": ["deploy", "--resume", "OUT"],
    "train --resume": ["train", "--resume", "OUT"],
    "estimate profile": ["estimate", "profile", "--testbed", "cpu-1", "--models", "gpt__tiny", "--out", "OUT/p.json"],
}


def _argv(command: str, out: Path) -> list[str]:
    return [a.replace("OUT", str(out)) for a in COMMANDS[command]]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_second_writer_is_refused_in_one_line_naming_the_owner(tmp_path: Path, capsys, command: str) -> None:
    out = tmp_path / "run"
    out.mkdir()
    target = out / "p.json" if command == "estimate profile" else out  # the profile is a file
    with RunLock(target, "deploy"):
        assert main(_argv(command, out)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{target}: in use by arena-gym deploy (pid {os.getpid()}@{socket.gethostname()}, since " in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"] and not any(out.iterdir())


@pytest.mark.timeout(120)
def test_deploy_resume_takes_over_the_lock_of_a_killed_controller(tmp_path: Path, capsys) -> None:
    out = tmp_path / "deploy"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert main(["deploy", "--resume", str(out)]) == 2
        assert f"in use by arena-gym deploy (pid {holder.pid}@" in capsys.readouterr().err
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        assert main(["deploy", "--resume", str(out)]) == 2  # past the lock: now the missing journal is the problem
        assert "no deployment journal" in capsys.readouterr().err
        assert not lock_path(out).exists()
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_evaluate_on_a_read_only_place_fails_before_any_work(capsys) -> None:
    target = "/sys/arena-gym-evaluate"  # sysfs takes no new files, not even from root
    code = main(["evaluate", "--policies", "arena,fcfs", "--no-progress", "--out", target])
    err = capsys.readouterr().err.strip()
    if code == 0:
        pytest.skip("/sys takes new files here")
    assert code == 2 and err == f"arena-gym evaluate: error: --out {target}: cannot write to /sys: Permission denied"
