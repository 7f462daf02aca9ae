"""Where each job of a deployment stands: its generations (launches) and its runtime (directories, progress, retries).

A :class:`Generation` is one launch of a job under one plan on one set of device slots. Phases:
planned (journaled, not launched), held (launched, waiting for its release), released (training),
stopping (SIGTERM sent), exited. Its journal entry is :meth:`Generation.facts`, read back by
:meth:`Generation.from_row`. A :class:`LiveJob` holds a job's generations, its progress channel and
its retries.
"""

from __future__ import annotations

import math
from collections import deque
from pathlib import Path
from typing import Any

from arena_gym.types import Allocation, JobId, JobSpec
from real_runner.checkpoint_files import JobIdentity
from real_runner.launchers.base import GenerationHandle, RankSlot
from real_runner.live.journal import GenerationRow
from real_runner.live.json_forms import alloc_from_dict, alloc_to_dict, slots_from_list, slots_to_list
from real_runner.plans import ExecutedPlan, plan_from_dict
from real_runner.progress import ProgressTail


class Generation:
    """One generation of a job: its allocation, slots, plan, spec and processes, and where it stands."""

    def __init__(
        self,
        job_id: JobId,
        number: int,
        alloc: Allocation,
        slots: tuple[RankSlot, ...],
        executed: ExecutedPlan,
        directory: Path,
    ) -> None:
        self.job_id, self.number, self.alloc, self.slots, self.executed = job_id, number, alloc, slots, executed
        self.dir = directory
        self.spec_path = directory / "spec.json"
        self.handle: GenerationHandle | None = None
        self.phase = "planned"
        self.launched_at = self.released_at = self.stop_at = self.last_record_at = math.nan
        self.end: str | None = None  # done / stopped / error record seen after its release
        self.failing: str | None = None  # why it is being killed as failed
        self.iter_times: deque[float] = deque(maxlen=20)

    @staticmethod
    def from_row(row: GenerationRow) -> Generation:
        """A generation as the journal lists it (phase and handle aside: the caller takes it over)."""
        data = row.data
        plan = data["plan"]
        executed = ExecutedPlan(plan_from_dict(plan["requested"]), plan_from_dict(plan["plan"]), tuple(plan["notes"]))
        gen = Generation(
            JobId(row.job_id),
            row.gen,
            alloc_from_dict(data["alloc"]),
            slots_from_list(data["slots"]),
            executed,
            Path(data["dir"]),
        )
        gen.end = data.get("end")
        return gen

    @property
    def alive(self) -> bool:
        """Launched and not every rank has exited."""
        return self.phase in ("held", "released", "stopping")

    @property
    def keys(self) -> set[tuple[int, int]]:
        """Its device slots as (node, device)."""
        return {(s.node, s.device) for s in self.slots}

    def facts(self) -> dict[str, Any]:
        """The journal's record of it."""
        return {
            "alloc": alloc_to_dict(self.alloc),
            "slots": slots_to_list(self.slots),
            "plan": self.executed.to_dict(),
            "dir": str(self.dir),
            "handle": self.handle.describe() if self.handle is not None else None,
            "launched_at": _num(self.launched_at),
            "released_at": _num(self.released_at),
            "end": self.end,
        }


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


class LiveJob:
    """A job's runtime: its directories, progress tail, generations, retries and last reports."""

    def __init__(self, spec: JobSpec, directory: Path, identity: JobIdentity) -> None:
        self.spec = spec
        self.dir = directory
        self.identity = identity
        self.ckpt_dir = directory / "ckpt"
        self.progress_path = directory / "progress.jsonl"
        self.tail = ProgressTail(self.progress_path)
        self.gens: list[Generation] = []
        self.current: Generation | None = None
        self.number = 0
        self.retries = 0
        self.step = 0
        self.ckpt_step: int | None = None
        self.win = (math.nan, 0)  # (time, step) of the last rate reported (a PROGRESS operation)

    @property
    def reader(self) -> Generation | None:
        """The released generation whose records the progress channel carries now (at most one)."""
        for gen in self.gens:
            if gen.phase in ("released", "stopping") and not math.isnan(gen.released_at):
                return gen
        return None


def dirname(job_id: str) -> str:
    """A job id as a directory name."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id) or "job"
