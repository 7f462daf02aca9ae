"""The local launcher: every rank a ``python -m real_runner.worker`` process on this machine.

Ranks run in their own session (a Ctrl-C in the controller's terminal does not reach them; the
controller stops them itself) and outlive a crashed controller, whose successor reattaches to
them by pid (:meth:`LocalLauncher.reattach`). CPU ranks are pinned to their core; on GPU
machines ``CUDA_VISIBLE_DEVICES`` lists the generation's devices in rank order and ``LOCAL_RANK``
indexes it.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from real_runner.launchers.base import LaunchRequest, release_file
from real_runner.ranks import LocalJob, spawn_ranks
from real_runner.worker import ready_file

log = logging.getLogger(__name__)

#: Host names that mean this machine.
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def check_local_hosts(hosts: Sequence[str]) -> None:
    """ValueError (one line) when a testbed names another machine, which the local launcher cannot reach."""
    remote = sorted({h for h in hosts if h not in LOCAL_HOSTS and h != os.uname().nodename})
    if remote:
        raise ValueError(
            f"the local launcher runs on this machine only, but the testbed names host(s) "
            f"{', '.join(remote)}; use the ray launcher (--launcher ray)"
        )


class LocalGeneration:
    """A generation this controller started (wraps :class:`real_runner.ranks.LocalJob`)."""

    def __init__(self, job: LocalJob) -> None:
        self.job = job

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids by rank."""
        return tuple(self.job.pids)

    def poll(self) -> list[int | None]:
        """Exit code of every rank, None while it runs."""
        return self.job.poll()

    def held_ready(self) -> bool:
        """True once every held rank waits for its release."""
        return self.job.held_ready()

    def release(self) -> None:
        """Release the held ranks."""
        self.job.release()

    def terminate(self) -> None:
        """SIGTERM every running rank."""
        for p in self.job.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL every running rank."""
        for p in self.job.procs:
            if p.poll() is None:
                p.kill()

    def signal_rank(self, rank: int, signum: int) -> None:
        """Send ``signum`` to one rank."""
        proc = self.job.procs[rank]
        if proc.poll() is None:
            proc.send_signal(signum)

    def log_tail(self, rank: int, max_bytes: int = 2000) -> str:
        """The end of a rank's log."""
        return self.job.log_tail(rank, max_bytes)

    def describe(self) -> dict[str, Any]:
        """Pids and logs, for a successor controller."""
        return {"pids": list(self.pids), "logs": [str(p) for p in self.job.logs]}

    def close(self) -> None:
        """Reap the ranks (all exited by now)."""
        for p in self.job.procs:
            if p.poll() is None:
                log.warning("closing generation with rank pid %d still running; killing it", p.pid)
                p.kill()
                p.wait()


def _alive(pid: int, marker: str) -> bool:
    """Whether ``pid`` runs (not a zombie) and its command line contains ``marker`` (no pid reuse)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and marker in cmdline


def find_processes(marker: str) -> list[int]:
    """Pids of this machine's running processes whose command line contains ``marker``, by rank (``RANK``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid() and _alive(int(entry.name), marker):
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            rank = next((int(v[5:]) for v in environ if v.startswith(b"RANK=") and v[5:].isdigit()), 0)
            found.append((rank, int(entry.name)))
    return [pid for _, pid in sorted(found)]


class ReattachedGeneration:
    """A generation a previous controller started: known by pid, exit codes unknown (its records tell)."""

    def __init__(self, pids: Sequence[int], logs: Sequence[Path], marker: str, release: Path) -> None:
        self._pids, self.logs, self.marker, self.release_path = tuple(pids), [Path(p) for p in logs], marker, release

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids by rank."""
        return self._pids

    def poll(self) -> list[int | None]:
        """None for a running rank, 0 for one that is gone (the exit code is not ours to read)."""
        return [None if _alive(pid, self.marker) else 0 for pid in self._pids]

    def held_ready(self) -> bool:
        """True once every held rank waits for its release."""
        return all(ready_file(self.release_path, r).exists() for r in range(len(self._pids)))

    def release(self) -> None:
        """Release the held ranks."""
        self.release_path.touch()

    def _send(self, pid: int, signum: int) -> None:
        if _alive(pid, self.marker):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        """SIGTERM every running rank."""
        for pid in self._pids:
            self._send(pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL every running rank."""
        for pid in self._pids:
            self._send(pid, signal.SIGKILL)

    def signal_rank(self, rank: int, signum: int) -> None:
        """Send ``signum`` to one rank."""
        self._send(self._pids[rank], signum)

    def log_tail(self, rank: int, max_bytes: int = 2000) -> str:
        """The end of a rank's log."""
        path = self.logs[rank] if rank < len(self.logs) else None
        data = path.read_bytes() if path is not None and path.exists() else b""
        return data[-max_bytes:].decode("utf-8", errors="replace")

    def describe(self) -> dict[str, Any]:
        """Pids and logs."""
        return {"pids": list(self._pids), "logs": [str(p) for p in self.logs]}

    def close(self) -> None:
        """Nothing to reap: the processes are not this controller's children."""


class LocalLauncher:
    """Starts generations as local processes (the default launcher)."""

    name = "local"

    def __init__(self, python: str = sys.executable, cwd: str | Path | None = None) -> None:
        self.python, self.cwd = python, cwd

    def launch(self, request: LaunchRequest) -> LocalGeneration:
        """Start the ranks of ``request``, each in its own session."""
        check_local_hosts([r.host for r in request.ranks])
        env = dict(request.env)
        pins: list[int] | None = None
        if request.cuda:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(r.device) for r in request.ranks)
        elif all(r.pin_core is not None for r in request.ranks):
            pins = [int(r.pin_core) for r in request.ranks]  # type: ignore[arg-type]
        job = spawn_ranks(
            request.spec_path,
            request.world_size,
            env=env,
            log_dir=request.log_dir,
            pin_cores=pins,
            python=self.python,
            cwd=self.cwd,
            hold=request.hold,
            new_session=True,
        )
        return LocalGeneration(job)

    def reattach(self, request: LaunchRequest, described: Mapping[str, Any]) -> ReattachedGeneration | None:
        """The generation's processes if any still runs (checked against the spec path), else None.

        Without journaled pids (a controller that crashed between a launch and its journal entry)
        the processes are looked up by their command line.
        """
        marker = str(request.spec_path)
        pids = [int(p) for p in described.get("pids", [])] or find_processes(marker)
        if not pids or not any(_alive(pid, marker) for pid in pids):
            return None
        logs = [Path(p) for p in described.get("logs", [])]
        return ReattachedGeneration(pids, logs, marker, release_file(request.log_dir))

    def close(self) -> None:
        """Nothing to release."""
