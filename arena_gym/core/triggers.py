"""When an episode's decisions are due, for both backends: the settings, their checks, and the triggers.

:class:`DecisionSchedule` is what the simulator's, the live backend's and the gym env's configs
share: decide on arrivals and completions (``event_decisions``), every ``round_s`` seconds (at
least :data:`MIN_ROUND_S`), until ``horizon_s``. Each config keeps its own fields and checks them
here (:meth:`DecisionSchedule.check`), so the three cannot drift apart. :class:`Triggers` is one
episode's decision clock on that schedule: which job arrives next and when, when the next round
is due and when rounds stop, and when the episode is over. Both backends drive one, so both
decide at the same times (SimPy's ``RealtimeEnvironment`` differs from its ``Environment`` only in
how it waits for the next event; so do the live backend and the simulator).
"""

from __future__ import annotations

import math
from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from arena_gym.fields import Problems
from arena_gym.types import JobId, JobSpec

if TYPE_CHECKING:
    from arena_gym.core.state import ClusterState

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
        cls.problems(round_s, event_decisions, horizon_s).raise_if_any(owner)

    @staticmethod
    def problems(round_s: float | None, event_decisions: bool, horizon_s: float) -> Problems:
        """What is wrong with these settings (none when nothing is): one phrase per problem, naming its field."""
        problems = Problems()
        if round_s is not None:
            problems.require(
                MIN_ROUND_S <= round_s < math.inf, f"round_s must be finite and >= {MIN_ROUND_S:g} s, got {round_s}"
            )
        elif not event_decisions:
            problems.add("with event_decisions off, round_s must be set (otherwise the policy is never asked)")
        problems.require(horizon_s > 0, f"horizon_s must be > 0, got {horizon_s}")
        return problems


class Triggers:
    """When one episode's next decisions are due, for either backend: arrivals, rounds, the stall rule, the horizon.

    The simulator puts what it says is due on its event heap; the live backend compares it with its
    wall clock. Arrivals come in submit order (ties in load order); each is a decision point with
    ``events`` on, as are completions and failures. Rounds fire every ``round_s`` from the first
    submission while a job is unfinished; a round in which no job holds GPUs and none is left to
    arrive is a stall, and after two stalled rounds in a row (the policy declined to start what
    waits) no round can change anything, so rounds stop and the episode ends instead of looping.
    Nothing after the horizon happens: the episode ends when its clock reaches it.
    """

    start: float  # the episode's first submission (or where it was restored)
    round_index: int  # rounds so far
    next_round: float  # when the next round is due (inf: none will be)
    _stalled: int  # stalled rounds in a row

    def __init__(self, schedule: DecisionSchedule) -> None:
        self.schedule = schedule
        self.events = schedule.event_decisions  # arrivals, completions and failures are decision points
        self.horizon = schedule.horizon_s
        self.reset(())

    def reset(self, jobs: Sequence[JobSpec]) -> None:
        """A new episode of ``jobs``: every one still to arrive, rounds from the first submission."""
        self._arrivals = tuple(sorted(jobs, key=_submit_time))
        self._next = 0
        self.start = self._arrivals[0].submit_time if self._arrivals else 0.0
        self._rounds_from(self.start if self._arrivals else math.inf)

    def restore(self, now: float, future: Sequence[JobSpec]) -> None:
        """Continue an episode from ``now`` with ``future`` still to arrive; rounds from ``now + round_s``."""
        self._arrivals = tuple(sorted(future, key=_submit_time))
        self._next = 0
        self.start = now
        self._rounds_from(now + self.schedule.round_s if self.schedule.round_s is not None else math.inf)

    def resume(self, now: float, submitted: Container[JobId]) -> None:
        """Take up an episode at ``now`` (after :meth:`reset` with its workload): ``submitted`` jobs have arrived,
        rounds go on from the first one due after ``now``, on the grid from the first submission."""
        self._arrivals = tuple(spec for spec in self._arrivals if spec.job_id not in submitted)
        round_s = self.schedule.round_s
        if round_s is not None and self.next_round <= now:
            passed = math.floor((now - self.next_round) / round_s) + 1
            self.round_index, self.next_round = passed, self.next_round + passed * round_s

    def fork(self) -> Triggers:
        """An independent copy (the arrivals, which never change, shared)."""
        new = Triggers.__new__(Triggers)
        new.__dict__.update(self.__dict__)
        return new

    # ------------------------------------------------------------------ arrivals
    @property
    def next_arrival(self) -> float:
        """The submit time of the next job to arrive (inf: none is left)."""
        return self._arrivals[self._next].submit_time if self._next < len(self._arrivals) else math.inf

    def take_arrival(self) -> JobSpec | None:
        """The next job to arrive, handed over to be submitted at its time (None: none is left)."""
        if self._next >= len(self._arrivals):
            return None
        self._next += 1
        return self._arrivals[self._next - 1]

    # ------------------------------------------------------------------ rounds
    def round_live(self, state: ClusterState) -> bool:
        """Whether a round still means something: a job is unfinished."""
        return state.unfinished > 0

    def count_round(self, state: ClusterState) -> None:
        """The round due at ``next_round`` happened (a decision point): count it and schedule the next, or stop
        rounds after the second stalled one in a row (``next_round`` is then inf)."""
        self.round_index += 1
        stalled = not state.active and state.unsubmitted == 0
        self._stalled = self._stalled + 1 if stalled else 0
        round_s = self.schedule.round_s
        self.next_round = self.next_round + round_s if round_s is not None and self._stalled < 2 else math.inf

    # ------------------------------------------------------------------ the end
    def over(self, t: float) -> bool:
        """Whether an episode whose clock reads ``t`` has reached its horizon (what was due by then has happened)."""
        return t >= self.horizon

    def idle(self, state: ClusterState) -> bool:
        """Nothing is left to happen: no job holds GPUs, none is left to arrive, and no round is due."""
        return not state.active and self._next >= len(self._arrivals) and not self._round_due(state)

    def next_due(self, state: ClusterState) -> float:
        """The earliest of the next arrival, the next round (while it means something) and the horizon."""
        return min(self.next_arrival, self.next_round if self._round_due(state) else math.inf, self.horizon)

    def _round_due(self, state: ClusterState) -> bool:
        return self.next_round < math.inf and self.round_live(state)

    def _rounds_from(self, first: float) -> None:
        self.round_index = 0
        self._stalled = 0
        self.next_round = first if self.schedule.round_s is not None else math.inf


def _submit_time(spec: JobSpec) -> float:
    return spec.submit_time
