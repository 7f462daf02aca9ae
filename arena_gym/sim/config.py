"""Simulator settings: reconfiguration overheads, decision triggers, horizon."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from arena_gym.types import OverheadClass, OverheadModel

#: The shortest decision round the simulator accepts, in seconds. A round fires a decision
#: whether or not anything changed, so a shorter period only multiplies the work (a 0.01 s
#: round over a day-long trace is millions of policy calls) without a scheduling benefit.
MIN_ROUND_S = 1.0


@dataclass(frozen=True)
class SimConfig:
    """How the simulator runs.

    ``overhead`` prices a reconfiguration and ``overhead_class`` picks which of its classes
    the simulated policy pays (an :class:`~arena_gym.types.OverheadClass` or its name; set it
    from the policy: ``overhead_class=policy.ap_search``; Arena's ``pruned`` by default). ``round_s`` adds periodic decision rounds (Arena decides
    every 300 s; at least :data:`MIN_ROUND_S`); with ``event_decisions`` the policy is also
    called on arrivals and completions (the default, event-driven). ``horizon_s`` stops the
    episode (on the trace's clock).
    """

    overhead: OverheadModel = field(default_factory=OverheadModel)
    round_s: float | None = None
    event_decisions: bool = True
    horizon_s: float = math.inf
    overhead_class: OverheadClass = OverheadClass.PRUNED

    def __post_init__(self) -> None:
        if self.round_s is not None and not (MIN_ROUND_S <= self.round_s < math.inf):
            raise ValueError(f"round_s must be finite and >= {MIN_ROUND_S:g} s, got {self.round_s}")
        if self.round_s is None and not self.event_decisions:
            raise ValueError("with event_decisions off, round_s must be set (otherwise the policy is never asked)")
        if not self.horizon_s > 0:
            raise ValueError(f"horizon_s must be > 0, got {self.horizon_s}")
        # a policy's ``ap_search`` may be given as its string value: checked and converted here
        object.__setattr__(self, "overhead_class", OverheadClass.parse(self.overhead_class))

    def overhead_s(self, num_gpus: int) -> float:
        """The reconfiguration overhead of a (re)start on ``num_gpus`` GPUs."""
        return self.overhead.seconds(self.overhead_class, num_gpus)
