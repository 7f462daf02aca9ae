"""Settings of the live backend: polling, progress reporting, failure detection, checkpoints, decisions."""

from __future__ import annotations

import math
from dataclasses import dataclass

from arena_gym.core.triggers import DecisionSchedule
from real_runner.training_modes import check_precision, check_remat


@dataclass(frozen=True)
class LiveConfig:
    """How the live backend runs a deployment.

    Timing: the controller polls every ``poll_s``; a running job's measured rate enters the
    event log (PROGRESS) at most every ``progress_every_s``. Failures: a generation whose
    progress stays silent longer than ``max(stale_timeout_s, stale_steps x its median step
    time)`` is hung, one that shows no record ``start_timeout_s`` after its launch (torch
    import, rendezvous, checkpoint load) is stuck; either is killed and, like one whose
    process exits non-zero, relaunched from its latest checkpoint on the same devices, at most
    ``max_retries`` times per job. A gracefully stopped generation gets ``stop_grace_s`` to
    checkpoint and exit before it is killed. Workers checkpoint every ``checkpoint_every_s``
    seconds and/or ``checkpoint_every_steps`` steps (0 = off) and bound each collective by
    ``group_timeout_s``. Decisions: on arrivals, completions and failures
    (``event_decisions``) and every ``round_s`` seconds if set; ``horizon_s`` ends the run (the three
    are checked as a :class:`~arena_gym.core.triggers.DecisionSchedule`).
    ``seed`` and ``lr`` are the jobs' training settings; ``device`` the workers' device
    (``auto``, ``cpu``, ``cuda``), ``precision`` and ``remat`` their compute precision and
    recomputation (:mod:`real_runner.training_modes`; ``auto``: the testbed's precision, else the
    model spec's on CUDA and fp32 on CPU). ``status_every_s``: how often the status callback is called.
    """

    poll_s: float = 0.1
    progress_every_s: float = 2.0
    stale_timeout_s: float = 60.0
    stale_steps: float = 20.0
    start_timeout_s: float = 300.0
    stop_grace_s: float = 60.0
    max_retries: int = 3
    checkpoint_every_s: float = 10.0
    checkpoint_every_steps: int = 0
    group_timeout_s: float = 60.0
    round_s: float | None = None
    event_decisions: bool = True
    horizon_s: float = math.inf
    seed: int = 0
    lr: float = 1e-3
    device: str = "auto"
    precision: str = "auto"
    remat: str = "auto"
    status_every_s: float = 5.0

    def __post_init__(self) -> None:
        positive = (
            "poll_s",
            "progress_every_s",
            "stale_timeout_s",
            "stale_steps",
            "start_timeout_s",
            "stop_grace_s",
            "group_timeout_s",
            "status_every_s",
        )
        for name in positive:
            value = getattr(self, name)
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"LiveConfig.{name} must be finite and > 0, got {value}")
        if self.max_retries < 0:
            raise ValueError(f"LiveConfig.max_retries must be >= 0, got {self.max_retries}")
        if self.checkpoint_every_s < 0 or self.checkpoint_every_steps < 0:
            raise ValueError("LiveConfig checkpoint intervals must be >= 0 (0 = off)")
        check_precision(self.precision, "LiveConfig")
        check_remat(self.remat, "LiveConfig")
        DecisionSchedule.check(self.round_s, self.event_decisions, self.horizon_s, "LiveConfig")

    @property
    def schedule(self) -> DecisionSchedule:
        """When the deployed policy is asked (rounds, event decisions, horizon)."""
        return DecisionSchedule(self.round_s, self.event_decisions, self.horizon_s)
