"""Simulator settings: reconfiguration overheads, decision triggers, horizon."""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OverheadModel:
    """Reconfiguration overhead ``min(per_gpu_s * gpus, cap_s)`` per AP-search class.

    Defaults are Arena's constants (reference/arena.md §5.6): pruned AP search 10 s per GPU
    capped at 40 s (Arena), unpruned AP search 150 s per GPU capped at 600 s (the baselines),
    plus a checkpoint-resume cost (0 s in the artifact's evaluation).
    """

    pruned_per_gpu_s: float = 10.0
    pruned_cap_s: float = 40.0
    full_per_gpu_s: float = 150.0
    full_cap_s: float = 600.0
    ckpt_resume_s: float = 0.0

    def seconds(self, ap_search: str, num_gpus: int) -> float:
        """Overhead paid when a job (re)starts on ``num_gpus`` GPUs."""
        if ap_search == "pruned":
            base = min(self.pruned_per_gpu_s * num_gpus, self.pruned_cap_s)
        elif ap_search == "full":
            base = min(self.full_per_gpu_s * num_gpus, self.full_cap_s)
        elif ap_search == "none":
            base = 0.0
        else:
            raise ValueError(f"unknown ap_search class {ap_search!r}; valid: pruned, full, none")
        return base + self.ckpt_resume_s


@dataclass(frozen=True)
class SimConfig:
    """How the simulator runs.

    ``round_s`` adds periodic decision rounds (Arena decides every 300 s); with
    ``event_decisions`` the policy is also called on arrivals and completions (the default,
    event-driven). ``horizon_s`` stops the episode (on the trace's clock).
    """

    overhead: OverheadModel = field(default_factory=OverheadModel)
    round_s: float | None = None
    event_decisions: bool = True
    horizon_s: float = math.inf

    def __post_init__(self) -> None:
        if self.round_s is not None and not self.round_s > 0:
            raise ValueError(f"round_s must be > 0, got {self.round_s}")
        if self.round_s is None and not self.event_decisions:
            raise ValueError("with event_decisions off, round_s must be set (otherwise the policy is never asked)")
        if not self.horizon_s > 0:
            raise ValueError(f"horizon_s must be > 0, got {self.horizon_s}")
