"""When an episode's decisions are due, for both backends: the settings and their checks.

:class:`DecisionSchedule` is what the simulator's, the live backend's and the gym env's configs
share: decide on arrivals and completions (``event_decisions``), every ``round_s`` seconds (at
least :data:`MIN_ROUND_S`), until ``horizon_s``. Each config keeps its own fields and checks them
here (:meth:`DecisionSchedule.check`), so the three cannot drift apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: The shortest decision round accepted, in seconds. A round fires a decision whether or not
#: anything changed, so a shorter period only multiplies the work (a 0.01 s round over a day-long
#: trace is millions of policy calls) without a scheduling benefit.
MIN_ROUND_S = 1.0


@dataclass(frozen=True)
class DecisionSchedule:
    """When the policy is asked: on every arrival and completion (``event_decisions``), every
    ``round_s`` seconds from the first submission if set, and never after ``horizon_s``.

    ValueError (every problem, each naming its field) when the policy would never be asked, a
    round is shorter than :data:`MIN_ROUND_S` or not finite, or the horizon is not positive.
    """

    round_s: float | None = None
    event_decisions: bool = True
    horizon_s: float = math.inf

    def __post_init__(self) -> None:
        self.check(self.round_s, self.event_decisions, self.horizon_s)

    @classmethod
    def check(cls, round_s: float | None, event_decisions: bool, horizon_s: float, owner: str = "") -> None:
        """ValueError naming every problem of these settings (after ``owner: `` when given); nothing otherwise."""
        problems = cls.problems(round_s, event_decisions, horizon_s)
        if problems:
            raise ValueError((f"{owner}: " if owner else "") + "; ".join(problems))

    @staticmethod
    def problems(round_s: float | None, event_decisions: bool, horizon_s: float) -> list[str]:
        """What is wrong with these settings (empty when nothing is): one phrase per problem, naming its field."""
        problems = []
        if round_s is not None and not (MIN_ROUND_S <= round_s < math.inf):
            problems.append(f"round_s must be finite and >= {MIN_ROUND_S:g} s, got {round_s}")
        if round_s is None and not event_decisions:
            problems.append("with event_decisions off, round_s must be set (otherwise the policy is never asked)")
        if not horizon_s > 0:
            problems.append(f"horizon_s must be > 0, got {horizon_s}")
        return problems
