"""ArenaPolicy: Arena's heuristic scheduler (reference/arena.md §5) as a Policy."""

from __future__ import annotations

import logging

from agents.arena.config import ArenaConfig
from agents.arena.oracle import ThroughputOracle
from agents.arena.round import DecisionRound
from arena_gym.types import Decision, JobId, Snapshot

log = logging.getLogger(__name__)


class ArenaPolicy:
    """Arena: FIFO admission with elastic (GPU count) and heterogeneous (GPU type) search.

    Decides with: the belief's proxy-plan throughput, ``global_batch / perf.iter_time`` (or
    ``perf.dp_iter_time`` with ``dp_only``), greedily maximising the structured marginal gain
    of each step. On arrivals: ``fit_one_job`` per new job (migration search, then the
    downgrade BFS of shrinks and type changes), opportunistic backfill, then the upgrade
    trial. On departures: introspective migration, the pending restart trial (which may
    preempt opportunism jobs for their blockers), and the upgrade trial when nothing arrived.
    Periodic rounds without arrivals or departures change nothing (as in the artifact).

    Keyword switches are the artifact's ablations (see :class:`ArenaConfig`); pass ``config``
    instead to set the search constants too. Per-episode state: the ids of opportunism jobs
    (reconciled against every snapshot), of jobs already seen, and of jobs that can or can
    never start (no feasible configuration; such jobs block nobody).
    """

    def __init__(self, name: str = "arena", dp_only: bool = False, no_scaling: bool = False,
                 no_type_change: bool = False, no_opportunism: bool = False, deadline_aware: bool = False,
                 pruned: bool = True, config: ArenaConfig | None = None) -> None:
        switches = ArenaConfig(dp_only=dp_only, no_scaling=no_scaling, no_type_change=no_type_change,
                               no_opportunism=no_opportunism, deadline_aware=deadline_aware, pruned=pruned)
        if config is not None and switches != ArenaConfig():
            raise ValueError("ArenaPolicy: pass either config or the switch keywords, not both")
        self.config = config if config is not None else switches
        self.name = name
        self.ap_search = self.config.ap_search
        self.clairvoyant = self.config.deadline_aware  # only its deadline checks use the true remaining iterations
        self._oracle = ThroughputOracle(self.config)
        self._opportunism: tuple[JobId, ...] = ()
        self._seen: set[JobId] = set()
        self._runnable: dict[JobId, bool] = {}

    def reset(self) -> None:
        """Forget the opportunism tags, the jobs seen and the memoised throughputs."""
        self._opportunism = ()
        self._seen = set()
        self._runnable = {}
        self._oracle.reset()

    def decide(self, snapshot: Snapshot) -> Decision:
        """One scheduling round on ``snapshot``."""
        self._oracle.bind(snapshot)
        running = {v.job_id for v in snapshot.running}
        arrived = set(snapshot.arrivals)
        new = [v for v in snapshot.pending if v.job_id in arrived or v.job_id not in self._seen]
        self._seen.update(v.job_id for v in snapshot.pending)
        self._seen.update(running)
        opportunism = [j for j in self._opportunism if j in running]
        if not new and not snapshot.departures:
            self._opportunism = tuple(opportunism)
            return Decision()
        rnd = DecisionRound(self.config, snapshot, self._oracle, opportunism, self._runnable)
        if snapshot.departures:
            rnd.after_departures(upgrade=not new, arrivals={v.job_id for v in new})
        if new:
            rnd.admit(new)
        decision = rnd.decision()
        self._opportunism = tuple(rnd.opportunism)
        log.debug("t=%.0f: %d allocation(s), %d preemption(s)", snapshot.now, len(decision.allocations),
                  len(decision.preemptions))
        return decision
