"""Measured (re)start costs of a model on the runner: what a job pays beyond its steps when it starts,
resumes or moves (a profile's figures, ``docs/profiler.md``), and which of those a (re)start pays.

The simulator charges them in place of the checkpoint-resume constant of the
:class:`~arena_gym.types.OverheadModel` when its ground-truth performance model has them
(:class:`RestartCosts`); the overhead class's plan-search term is charged as before.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields
from typing import Protocol, runtime_checkable

from arena_gym.types import ModelRef


class RestartKind(enum.Enum):
    """How an allocation starts a job: its first start, a resume from the queue (its checkpoint was
    saved when it was preempted), or a move of a job that holds GPUs (resize, migration, type change)."""

    FIRST = "first"
    RESUME = "resume"
    MOVE = "move"


@dataclass(frozen=True)
class RestartCost:
    """Seconds one model's training process pays on the runner, measured on one device.

    ``start_s``: a fresh process from its launch to its first step at steady speed (interpreter, torch
    import, process group where it has several ranks, model build, and what the first step takes beyond a steady one), without a
    checkpoint; ``held_s``: the part of it a pre-launched generation spends before its release
    (interpreter and torch import, overlapped with the previous generation's save); ``save_s``: a
    checkpoint save; ``load_s``: a checkpoint load.
    """

    start_s: float
    held_s: float
    save_s: float
    load_s: float

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"RestartCost.{f.name} must be a finite number >= 0, got {value!r}")
        if self.held_s > self.start_s:
            raise ValueError(f"RestartCost.held_s ({self.held_s:g}) must not exceed start_s ({self.start_s:g})")

    def seconds(self, kind: RestartKind) -> float:
        """What a (re)start of ``kind`` pays: the start; a resume adds the load; a move waits for the old
        generation's save, overlapped with the new one's pre-launch (``held_s``), and loads.

        Every generation ends with a checkpoint save (its last one, or the one a preemption asks for),
        which the simulator cannot charge at its end (it frees the GPUs at once): a first start and a
        resume pay it up front. A move pays none beyond its wait: the old generation's save was paid at
        its start, and the wall time it adds here stands for the new generation's own."""
        if kind is RestartKind.FIRST:
            return self.start_s + self.save_s
        if kind is RestartKind.RESUME:
            return self.start_s + self.load_s + self.save_s
        return max(self.save_s, self.held_s) + self.start_s - self.held_s + self.load_s


@runtime_checkable
class RestartCosts(Protocol):
    """A performance model that knows measured (re)start costs (e.g. from a profile of the testbed)."""

    def restart_cost(self, model: ModelRef, gpu_type: str) -> RestartCost | None:
        """The measured costs of ``model`` on ``gpu_type``, or None (the overhead model's constants apply)."""
        ...
