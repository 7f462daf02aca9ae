"""Rank processes on this machine: one ``python -m real_runner.worker`` per rank (a LocalLauncher generation).

``spawn_ranks`` picks a free port for the ``env://`` rendezvous, starts the ranks with ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT`` set, and sends each rank's
stdout and stderr to ``LOG_DIR/rank{r}.log``. The returned :class:`LocalJob` polls, waits, stops
gracefully (SIGTERM to every rank: the job checkpoints at the next step boundary and exits 0) and
kills. A reconfiguration with pre-launch::

    new = spawn_ranks(next_spec, n, env=os.environ, log_dir=logs, hold=True)  # imports torch meanwhile
    old.stop()                                                                  # checkpoint, exit 0
    new.release()                                                               # load, first step
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from real_runner.worker import ready_file

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class LocalJob:
    """The processes of one job generation started by :func:`spawn_ranks`."""

    def __init__(
        self,
        procs: Sequence[subprocess.Popen],
        logs: Sequence[Path],
        port: int,
        launched_at: float,
        release_file: Path | None = None,
    ) -> None:
        self.procs, self.logs, self.port, self.launched_at = list(procs), list(logs), port, launched_at
        self.release_file = release_file
        self.released_at: float | None = None

    def held_ready(self) -> bool:
        """True once every held rank has imported torch and waits for :meth:`release`."""
        if self.release_file is None:
            raise ValueError("this job was not launched with hold=True")
        return all(ready_file(self.release_file, r).exists() for r in range(len(self.procs)))

    def release(self) -> None:
        """Let held ranks (``spawn_ranks(..., hold=True)``) go on: read the checkpoint, form the group, train."""
        if self.release_file is None:
            raise ValueError("this job was not launched with hold=True")
        self.release_file.touch()
        self.released_at = time.time()

    @property
    def pids(self) -> list[int]:
        """Process ids, by rank."""
        return [p.pid for p in self.procs]

    def poll(self) -> list[int | None]:
        """Exit code of every rank, None while it runs."""
        return [p.poll() for p in self.procs]

    def wait(self, timeout: float) -> list[int]:
        """Wait until every rank exited; TimeoutError (the ranks keep running) after ``timeout`` s.

        A rank that fails makes the others fail too (their collectives break) within the group
        timeout, so waiting on all of them is bounded.
        """
        deadline = time.monotonic() + timeout
        codes = []
        for p in self.procs:
            try:
                codes.append(p.wait(max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"job ranks {self.pids} still running after {timeout:.0f} s") from None
        return codes

    def stop(self, grace_s: float = 60.0) -> list[int]:
        """SIGTERM every rank, wait up to ``grace_s`` for the checkpoint and exit, then kill; exit codes."""
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        try:
            return self.wait(grace_s)
        except TimeoutError:
            log.warning("ranks %s did not exit within %.0f s of SIGTERM; killing them", self.pids, grace_s)
            return self.kill()

    def kill(self) -> list[int]:
        """SIGKILL every rank still running; exit codes."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        return [p.wait() for p in self.procs]

    def log_tail(self, rank: int, max_bytes: int = 2000) -> str:
        """The end of a rank's log (where a failure's cause is)."""
        data = self.logs[rank].read_bytes() if self.logs[rank].exists() else b""
        return data[-max_bytes:].decode("utf-8", errors="replace")


def spawn_ranks(
    spec_path: str | Path,
    world_size: int,
    *,
    env: Mapping[str, str],
    log_dir: str | Path,
    pin_cores: Sequence[int] | None = None,
    python: str = sys.executable,
    cwd: str | Path | None = None,
    hold: bool = False,
    new_session: bool = False,
    module: str = "real_runner.worker",
) -> LocalJob:
    """Start ``world_size`` ranks of ``python -m module --spec spec_path`` (a training worker by
    default; the profiler starts its own worker module the same way).

    ``env`` is the base environment of the ranks (e.g. the caller's ``os.environ``); rank variables
    and ``OMP_NUM_THREADS=1`` are added. ``pin_cores[r]`` pins rank ``r`` to that core. With
    ``hold=True`` the ranks import torch and then wait for :meth:`LocalJob.release` (pre-launch: start
    the next generation while the previous one saves, release it once that one has exited). With
    ``new_session=True`` each rank runs in its own session, so a Ctrl-C in the caller's terminal does
    not reach it (a controller stops its ranks itself) and it outlives a crashed controller.
    """
    if world_size < 1:
        raise ValueError(f"world size must be >= 1, got {world_size}")
    if pin_cores is not None and len(pin_cores) != world_size:
        raise ValueError(f"pin_cores names {len(pin_cores)} cores for {world_size} ranks")
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    release_file = log_dir / "release" if hold else None
    if release_file is not None:
        for stale in (release_file, *(ready_file(release_file, r) for r in range(world_size))):
            stale.unlink(missing_ok=True)
    port = free_port()
    launched_at = time.time()
    procs, logs = [], []
    for rank in range(world_size):
        rank_env = {
            **env,
            "RANK": str(rank),
            "WORLD_SIZE": str(world_size),
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": str(world_size),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        cmd = [python, "-m", module, "--spec", str(spec_path), "--launched-at", repr(launched_at)]
        if pin_cores is not None:
            cmd += ["--pin-core", str(pin_cores[rank])]
        if release_file is not None:
            cmd += ["--hold-until", str(release_file)]
        path = log_dir / f"rank{rank}.log"
        with open(path, "ab") as fh:
            procs.append(
                subprocess.Popen(
                    cmd, env=rank_env, stdout=fh, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=new_session
                )
            )
        logs.append(path)
    log.info(
        "launched %d ranks of %s %s on port %d: pids %s", world_size, module, spec_path, port, [p.pid for p in procs]
    )
    return LocalJob(procs, logs, port, launched_at, release_file)
