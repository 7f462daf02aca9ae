"""RunLock: one owner per run directory, refusals that name it, stale locks taken over, heartbeats."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena_gym.harness.runlock import RunDirInUse, RunLock, lock_path
from tests.conftest import REPO

HOLD = (
    "import sys, time\n"
    "from arena_gym.harness.runlock import RunLock\n"
    "lock = RunLock(sys.argv[1], 'deploy')\n"
    "lock.acquire()\n"
    "print('held', flush=True)\n"
    "time.sleep(60)\n"
)


def test_the_owner_is_recorded_and_a_second_writer_is_refused_naming_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with RunLock(out, "simulate") as lock:
        assert lock.held and lock_path(out) == tmp_path / ".run.lock"
        owner = json.loads(lock_path(out).read_text())
        assert (owner["pid"], owner["host"], owner["command"]) == (os.getpid(), socket.gethostname(), "simulate")
        with pytest.raises(RunDirInUse) as refused:
            RunLock(out, "deploy", flag="--resume").acquire()
        message = str(refused.value)
        assert message.startswith(
            f"--resume {out}: in use by arena-gym simulate (pid {os.getpid()}@{socket.gethostname()}, since "
        )
        assert len(message.splitlines()) == 1
    assert not lock_path(out).exists()
    with RunLock(out, "deploy"):  # free again once released
        pass


@pytest.mark.parametrize("where", ["_check_writable", "release"])
def test_ctrl_c_while_the_lock_is_taken_or_let_go_leaves_no_lock_file(
    tmp_path: Path, monkeypatch, ctrl_c_raises, where: str
) -> None:
    target = tmp_path / "new" / "run"
    real = getattr(RunLock, where)

    def stopped(lock: RunLock) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives midway; the rest must still run
        real(lock)

    monkeypatch.setattr(RunLock, where, stopped)
    with pytest.raises(KeyboardInterrupt), RunLock(target, "simulate"):
        pass
    assert not os.path.lexists(lock_path(target)) and list(tmp_path.iterdir()) == []  # no lock, no parents


def test_missing_parents_are_created_and_removed_again(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "run"
    with RunLock(out, "compare"):
        assert lock_path(out).is_file()
    assert not (tmp_path / "a").exists()


def test_a_lock_whose_owner_was_killed_is_taken_over(tmp_path: Path) -> None:
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirInUse, match=rf"in use by arena-gym deploy \(pid {holder.pid}@"):
            RunLock(out, "deploy", flag="--resume").acquire()
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
        with RunLock(out, "deploy", flag="--resume") as lock:
            assert lock.taken_over is not None and lock.taken_over.pid == holder.pid
            assert json.loads(lock_path(out).read_text())["pid"] == os.getpid()
    finally:
        holder.kill()
        holder.wait(timeout=30)


def _foreign_lock(out: Path, heartbeat_age_s: float) -> None:
    path = lock_path(out)
    record = {"command": "deploy", "pid": 4242, "host": "other-host", "started": time.time() - 3600}
    path.write_text(json.dumps(record))
    beat = time.time() - heartbeat_age_s
    os.utime(path, (beat, beat))


def test_an_owner_on_another_host_is_alive_while_its_heartbeat_is_fresh(tmp_path: Path) -> None:
    out = tmp_path / "run"
    _foreign_lock(out, heartbeat_age_s=5)
    with pytest.raises(RunDirInUse, match=r"pid 4242@other-host, since .*, heartbeat \d+ s ago"):
        RunLock(out, "deploy", stale_after_s=60).acquire()
    _foreign_lock(out, heartbeat_age_s=600)
    with RunLock(out, "deploy", stale_after_s=60) as lock:
        assert lock.taken_over is not None and lock.taken_over.host == "other-host"


def test_the_heartbeat_is_refreshed_while_the_owner_runs(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with RunLock(out, "train", heartbeat_s=0.05):
        old = time.time() - 1000
        os.utime(lock_path(out), (old, old))
        deadline = time.monotonic() + 10
        while lock_path(out).stat().st_mtime < time.time() - 100:
            assert time.monotonic() < deadline, "no heartbeat"
            time.sleep(0.05)


def test_an_unwritable_place_or_a_missing_resume_directory_fails_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"--resume .*nowhere: no such file or directory"):
        RunLock(tmp_path / "nowhere", "train", flag="--resume", create=False).acquire()
    lock = RunLock("/sys/arena-out", "evaluate")  # sysfs takes no new files, not even from root
    try:
        lock.acquire()
    except ValueError as exc:
        assert str(exc).startswith("--out /sys/arena-out: cannot write to /sys: ")
    else:
        lock.release()
        pytest.skip("/sys takes new files here")
