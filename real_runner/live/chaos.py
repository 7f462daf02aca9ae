"""A seeded fault schedule for chaos runs of a live deployment (``benchmarks/chaos_soak.py``).

The schedule fixes, from the seed alone, when each fault comes, of which kind, for how long, and
which of the candidates it picks (a number in [0, 1) that the injector maps onto the candidates it
finds at that moment, e.g. the rank processes sorted by pid). Kinds come in shuffled rounds of all
four, so every kind occurs once a run has as many faults as kinds:

* ``rank_kill``: kill -9 of one rank process;
* ``controller_kill``: kill -9 of the controller, then ``deploy --resume``;
* ``rank_stop``: SIGSTOP of one rank for ``hold_s``, then SIGCONT (longer than the stale timeout: a hang);
* ``disk_full``: the checkpoint folder's filesystem full for ``hold_s``, then freed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

T = TypeVar("T")

#: The fault kinds, in a fixed order (the schedule shuffles them).
KINDS = ("rank_kill", "controller_kill", "rank_stop", "disk_full")


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: at ``t`` seconds after the start, ``kind``, lasting ``hold_s`` (stop, full disk), on the
    candidate at fraction ``pick`` of the list the injector finds."""

    t: float
    kind: str
    hold_s: float
    pick: float


@dataclass(frozen=True)
class ChaosConfig:
    """When faults come: the first after ``warmup_s``, then gaps drawn from [``min_gap_s``, ``max_gap_s``], none after
    ``duration_s``; ``stop_s`` and ``full_s``: the ranges of SIGSTOP and full-disk durations; ``kinds``: which occur."""

    duration_s: float
    warmup_s: float = 20.0
    min_gap_s: float = 15.0
    max_gap_s: float = 35.0
    stop_s: tuple[float, float] = (3.0, 30.0)
    full_s: tuple[float, float] = (5.0, 20.0)
    kinds: tuple[str, ...] = KINDS

    def __post_init__(self) -> None:
        if not self.duration_s > 0:
            raise ValueError(f"ChaosConfig.duration_s must be > 0, got {self.duration_s}")
        if not 0 < self.min_gap_s <= self.max_gap_s:
            raise ValueError(f"ChaosConfig gaps must satisfy 0 < min <= max, got {self.min_gap_s}, {self.max_gap_s}")
        unknown = sorted(set(self.kinds) - set(KINDS))
        if unknown or not self.kinds:
            raise ValueError(f"ChaosConfig.kinds: unknown or none {unknown}; valid: {', '.join(KINDS)}")


def fault_schedule(config: ChaosConfig, seed: int) -> list[Fault]:
    """The faults of a run, in time order: the same for the same config and seed."""
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    faults: list[Fault] = []
    t = config.warmup_s
    kinds: list[str] = []
    while t < config.duration_s:
        if not kinds:
            kinds = [config.kinds[i] for i in rng.permutation(len(config.kinds))]
        kind = kinds.pop(0)
        lo, hi = config.stop_s if kind == "rank_stop" else config.full_s if kind == "disk_full" else (0.0, 0.0)
        faults.append(Fault(round(t, 3), kind, round(float(rng.uniform(lo, hi)), 3), float(rng.random())))
        t += float(rng.uniform(config.min_gap_s, config.max_gap_s))
    return faults


def pick(candidates: Sequence[T], fraction: float) -> T | None:
    """The candidate at ``fraction`` (in [0, 1)) of the list; None when it is empty."""
    return candidates[min(len(candidates) - 1, int(fraction * len(candidates)))] if candidates else None
