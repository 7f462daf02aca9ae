"""What a launcher is: it starts one generation of a job (one process per rank) and hands back a handle.

A *generation* is one launch of a job under one plan on one set of devices; a reconfiguration,
a resume and a relaunch after a failure each start a new one. Launchers start generations
*held* (pre-launch: the ranks import torch, then wait for :meth:`GenerationHandle.release`), so
the interpreter start and the torch import overlap with the previous generation's checkpoint.
No torch here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class RankSlot:
    """Where one rank runs: testbed node index and host, device id on that node, and the core to pin (CPU)."""

    node: int
    host: str
    device: int
    pin_core: int | None = None


@dataclass(frozen=True)
class LaunchRequest:
    """One generation to start: the worker spec file, a slot per rank, where its logs go.

    ``cuda``: the devices are CUDA devices (``CUDA_VISIBLE_DEVICES`` lists the job's devices on
    each node); otherwise every rank is a CPU process pinned to ``pin_core``. ``env`` is the base
    environment of the ranks. Paths must be readable by every node of the testbed.
    """

    job_id: str
    generation: int
    spec_path: Path
    ranks: tuple[RankSlot, ...]
    log_dir: Path
    env: Mapping[str, str]
    cuda: bool = False
    hold: bool = True

    @property
    def world_size(self) -> int:
        """Ranks of the generation."""
        return len(self.ranks)


class GenerationHandle(Protocol):
    """The running processes of one generation."""

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids by rank (on their own hosts)."""
        ...

    def poll(self) -> list[int | None]:
        """Exit code of every rank, None while it runs (0 where a reattached rank is gone: its records tell)."""
        ...

    def held_ready(self) -> bool:
        """True once every held rank has imported torch and waits for :meth:`release`."""
        ...

    def release(self) -> None:
        """Let the held ranks go on: select the checkpoint, form the group, train."""
        ...

    def terminate(self) -> None:
        """SIGTERM every rank still running (a graceful stop: checkpoint, then exit 0); returns at once."""
        ...

    def kill(self) -> None:
        """SIGKILL every rank still running, by pid; returns at once."""
        ...

    def signal_rank(self, rank: int, signum: int) -> None:
        """Send a signal to one rank (fault injection)."""
        ...

    def log_tail(self, rank: int, max_bytes: int = 2000) -> str:
        """The end of a rank's log."""
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-ready facts a later controller needs to reattach (pids, launcher ids)."""
        ...

    def close(self) -> None:
        """Free what the launcher holds for this generation once its ranks have exited."""
        ...


class Launcher(Protocol):
    """Starts generations on the testbed's machines."""

    name: str

    def launch(self, request: LaunchRequest) -> GenerationHandle:
        """Start the ranks of ``request`` (held when ``request.hold``)."""
        ...

    def reattach(self, request: LaunchRequest, described: Mapping[str, Any]) -> GenerationHandle | None:
        """The handle of a generation a previous controller started (``describe()``), or None if it is gone."""
        ...

    def close(self) -> None:
        """Release the launcher's own resources (not the generations')."""
        ...


def release_file(log_dir: Path) -> Path:
    """The file whose creation releases a held generation (shared by launch and reattach)."""
    return Path(log_dir) / "release"
