"""The cluster state on a deployment's wall clock: seconds since the start, every operation journaled in order.

:class:`JournaledState` is what the live backend's parts share: the :class:`~arena_gym.core.ClusterState`,
the deployment's :class:`~real_runner.live.journal.Journal` (which holds the state's whole operation
log, :mod:`arena_gym.core.oplog`), and the clock, whose time never goes back and never runs behind
the last operation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from arena_gym.core import ClusterState
from arena_gym.core.oplog import Op
from real_runner.live.journal import Journal


class LiveError(RuntimeError):
    """A deployment cannot go on (a job failed more often than allowed, or its input is bad); it stays resumable."""


class JournaledState:
    """A cluster state every change of which is journaled, with the deployment's clock.

    ``clock``: epoch seconds; ``t0``: when the deployment began.
    """

    def __init__(self, state: ClusterState, journal: Journal, clock: Callable[[], float]) -> None:
        self.state, self.journal, self.clock = state, journal, clock
        self.t0 = math.nan
        self.t = 0.0  # seconds since the start, as last read
        self.op_t = 0.0  # time of the last operation applied and journaled
        self._journaled = 0

    def start(self, t0: float, op_t: float = 0.0) -> None:
        """Begin at epoch time ``t0`` with the state's log journaled up to here (a resume: up to ``op_t``)."""
        self.t0, self.op_t = t0, op_t
        self._journaled = self.state.n_ops
        self.t = max(op_t, self.clock() - t0)

    def now(self) -> float:
        """Seconds since the deployment began (never less than before)."""
        self.t = max(self.t, self.clock() - self.t0)
        return self.t

    def op(self, op: Op) -> None:
        """Apply one operation to the state and journal it (the same record replays it on resume)."""
        op.apply(self.state)
        self.journal_ops()
        self.op_t = op.t

    def journal_ops(self) -> None:
        """Journal the operations the state logged since the last call, in the caller's transaction."""
        for op in self.state.ops_since(self._journaled):
            self.journal.add_op(op)
        self._journaled = self.state.n_ops

    def wall_time(self, epoch_s: float, back_s: float = 0.0) -> float:
        """An epoch time (less ``back_s``) on the deployment's clock, never before the last operation nor ahead of now."""
        return min(self.now(), max(self.op_t, epoch_s - self.t0 - back_s))
