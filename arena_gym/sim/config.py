"""Simulator settings: reconfiguration overheads, decision triggers, horizon."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from arena_gym.core.triggers import MIN_ROUND_S, DecisionSchedule
from arena_gym.types import OverheadClass, OverheadModel

__all__ = ["MIN_ROUND_S", "SimConfig"]


@dataclass(frozen=True)
class SimConfig:
    """How the simulator runs.

    ``overhead`` prices a reconfiguration and ``overhead_class`` picks which of its classes
    the simulated policy pays (an :class:`~arena_gym.types.OverheadClass` or its name; set it
    from the policy: ``overhead_class=policy.ap_search``; Arena's ``pruned`` by default). ``round_s`` adds periodic decision rounds (Arena decides
    every 300 s; at least :data:`MIN_ROUND_S`); with ``event_decisions`` the policy is also
    called on arrivals and completions (the default, event-driven). ``horizon_s`` stops the
    episode (on the trace's clock). The last three are checked as a
    :class:`~arena_gym.core.triggers.DecisionSchedule`.
    """

    overhead: OverheadModel = field(default_factory=OverheadModel)
    round_s: float | None = None
    event_decisions: bool = True
    horizon_s: float = math.inf
    overhead_class: OverheadClass = OverheadClass.PRUNED

    def __post_init__(self) -> None:
        DecisionSchedule.check(self.round_s, self.event_decisions, self.horizon_s)
        # a policy's ``ap_search`` may be given as its string value: checked and converted here
        object.__setattr__(self, "overhead_class", OverheadClass.parse(self.overhead_class))

    @property
    def schedule(self) -> DecisionSchedule:
        """When the simulated policy is asked (rounds, event decisions, horizon)."""
        return DecisionSchedule(self.round_s, self.event_decisions, self.horizon_s)

    def overhead_s(self, num_gpus: int, restart_s: float | None = None) -> float:
        """The reconfiguration overhead of a (re)start on ``num_gpus`` GPUs (``restart_s``: its measured
        restart cost, in place of the checkpoint-resume constant)."""
        return self.overhead.seconds(self.overhead_class, num_gpus, restart_s)
