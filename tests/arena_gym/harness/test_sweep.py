"""run_tasks in this process and in local workers; a bad Ray address ends compare and evaluate in one line, before any work.

The sweep on a real two-node Ray cluster, one node killed mid-sweep, is tests/arena_gym/harness/test_ray_sweep.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from arena_gym.harness import sweep
from arena_gym.harness.cli import main
from arena_gym.harness.evaluate import EvalConfig
from arena_gym.harness.sweep import run_tasks


def _square(x: int) -> int:
    return x * x


def _spin(x: int) -> int:
    return sum(range(10**13)) + x  # one C call of hours: no Python signal handler runs inside it


#: A command's shape: SIGTERM raises in the main process (as the CLI sets it), two workers spin in C.
SPINNING = """
import sys
from arena_gym.harness.cli import _sigterm_as_interrupt
from arena_gym.harness.sweep import run_tasks
from tests.arena_gym.harness.test_sweep import _spin
with _sigterm_as_interrupt():
    try:
        run_tasks(_spin, [0, 1], workers=2)
    except KeyboardInterrupt:
        sys.exit(143)
"""


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _fail_on_three(x: int) -> int:
    if x == 3:
        raise ValueError("three is bad")
    return x


@pytest.mark.parametrize("workers", [1, 3])
def test_results_come_in_task_order_and_a_failure_propagates(workers: int) -> None:
    assert run_tasks(_square, list(range(7)), workers) == [x * x for x in range(7)]
    with pytest.raises(ValueError, match="three is bad"):
        run_tasks(_fail_on_three, list(range(6)), workers)


def _slow(x: int) -> int:
    time.sleep(0.5)
    return x


def test_the_bar_beats_while_workers_run(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sweep, "HEARTBEAT_S", 0.05)
    assert run_tasks(_slow, [1, 2, 3], workers=2, progress=True, unit="run") == [1, 2, 3]
    shown = capsys.readouterr().err
    assert "2 running" in shown and "1 running" in shown  # two at first, the last one alone
    last = [state for state in shown.split("\r") if "3/3" in state]  # the bar once every task is done
    assert last and "running" not in last[-1]  # the note goes when a task finishes


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", ["compare", "evaluate"])
@pytest.mark.parametrize("address, message", [("closed", "no Ray cluster answers there"), ("nohost", "HOST:PORT")])
def test_a_bad_ray_address_is_one_line_before_any_work(tmp_path, capsys, command, address, message) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    address = f"127.0.0.1:{_closed_port()}" if address == "closed" else address
    out = tmp_path / "out"
    args = {
        "compare": ["--policies", "fcfs", "--trace", "synthetic:n_jobs=5", "--cluster", "tiny", "--no-plots"],
        "evaluate": ["--policies", "arena,fcfs", "--no-progress", "--no-bounds"],
    }[command]
    assert main([command, *args, "--ray", address, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"arena-gym {command}: error: --ray") and message in err and len(err.splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("command", ["compare", "evaluate"])
def test_ray_and_local_workers_exclude_each_other(tmp_path, capsys, command) -> None:
    args = {"compare": ["--policies", "fcfs", "--cluster", "tiny"], "evaluate": ["--policies", "arena,fcfs"]}[command]
    assert main([command, *args, "--workers", "2", "--ray", "auto", "--out", str(tmp_path / "o")]) == 2
    assert "not both" in capsys.readouterr().err
    with pytest.raises(ValueError, match="not both"):
        EvalConfig(policies=("arena",), workers=2, ray="auto")


@pytest.mark.timeout(120)
def test_a_terminated_sweep_ends_its_workers_even_inside_a_long_c_call() -> None:
    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1"}
    run = subprocess.Popen([sys.executable, "-c", SPINNING], cwd=repo, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(workers := _children(run.pid)) < 2:
            assert time.monotonic() < deadline and run.poll() is None, "the workers did not start"
            time.sleep(0.1)
        time.sleep(1.0)  # inside the sum by now
        run.send_signal(signal.SIGTERM)  # the command alone, as `kill PID` sends it
        assert run.wait(timeout=30) == 143  # the pool's terminate did not wait on the spinning workers
        for pid in workers:
            assert not Path(f"/proc/{pid}").exists(), f"worker {pid} outlived the command"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
