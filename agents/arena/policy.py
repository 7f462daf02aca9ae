"""ArenaPolicy: Arena's heuristic scheduler (docs/arena.md §5) as a Policy."""

from __future__ import annotations

import copy
import logging
import math
from typing import Any

from agents.arena.config import ArenaConfig
from agents.arena.oracle import ThroughputOracle
from agents.arena.priority import Priority
from agents.arena.round import DecisionRound
from agents.common import configure
from arena_gym.types import Decision, JobId, JobView, Snapshot

log = logging.getLogger(__name__)

#: The version of Arena's decisions, recorded by every results directory: it changes when Arena decides otherwise.
ARENA_VERSION = 1


class ArenaPolicy:
    """Arena: FIFO admission with elastic (GPU count) and heterogeneous (GPU type) search.

    Decides with: the belief's proxy-plan throughput, ``global_batch / perf.iter_time`` (or
    ``perf.dp_iter_time`` with ``dp_only``), greedily maximising the structured marginal gain
    of each step. On arrivals: ``fit_one_job`` per new job (migration search, then the
    downgrade BFS of shrinks and type changes), opportunistic backfill, then the upgrade
    trial. On departures: introspective migration, the pending restart trial (which may
    preempt opportunism jobs for their blockers), and the upgrade trial when nothing arrived.
    Periodic rounds without arrivals or departures change nothing (as in the artifact).

    Settings are one :class:`ArenaConfig` (``config``) with keyword overrides applied on top
    (``ArenaPolicy(no_scaling=True)`` is the artifact's ``crius-ns`` ablation; an unknown keyword
    raises, naming the valid ones). ``priority`` replaces the FIFO queue order by its keys
    (:class:`agents.arena.priority.Priority`: e.g. a Gittins index, or the clairvoyant
    shortest remaining time); the policy is clairvoyant when the priority or the deadline checks
    read the true remaining work. Per-episode state: the ids of opportunism jobs
    (reconciled against every snapshot), of jobs that can or can never start (no feasible
    configuration; such jobs block nobody), and the time up to which every submitted job was
    seen (new jobs are the pending ones submitted after it, plus the snapshot's arrivals, so a
    decision reads the queue only as far as the round's steps need it).
    """

    def __init__(
        self, name: str = "arena", config: ArenaConfig | None = None, priority: Priority | None = None, **overrides: Any
    ) -> None:
        self.config = configure(type(self).__name__, ArenaConfig, config, overrides)
        self.name = name
        self.ap_search = self.config.ap_search
        self.priority = priority
        self._weighted = self.config.weighted_upgrades or self.config.weighted_fits
        if self._weighted and priority is None:
            raise ValueError(
                f"{name}: weighted_upgrades and weighted_fits need a priority (its urgency weighs the gains)"
            )
        # the deadline checks and a clairvoyant priority read the true remaining iterations
        self.clairvoyant = self.config.deadline_aware or bool(priority is not None and priority.clairvoyant)
        self._oracle = ThroughputOracle(self.config)
        self._opportunism: tuple[JobId, ...] = ()
        self._runnable: dict[JobId, bool] = {}
        self._seen_until = -math.inf

    def reset(self) -> None:
        """Forget the opportunism tags, the time seen up to and the memoised throughputs."""
        self._opportunism = ()
        self._runnable = {}
        self._seen_until = -math.inf
        self._oracle.reset()
        if self.priority is not None:
            self.priority.reset()

    def decide(self, snapshot: Snapshot) -> Decision:
        """One scheduling round on ``snapshot``."""
        self._oracle.bind(snapshot)
        new = self._new_jobs(snapshot)
        opportunism = [j for j in self._opportunism if snapshot.running.get(j) is not None]
        if not new and not snapshot.departures:
            self._opportunism = tuple(opportunism)
            return Decision()
        order = self.priority.keys(snapshot) if self.priority is not None else None
        urgency = self.priority.urgency(snapshot) if self.priority is not None and self._weighted else None
        targets = self.priority.targets(snapshot) if self.priority is not None else None
        rnd = DecisionRound(self.config, snapshot, self._oracle, opportunism, self._runnable, order, urgency, targets)
        if snapshot.departures:
            rnd.after_departures(upgrade=not new, arrivals={v.job_id for v in new})
        if new:
            rnd.admit(new)
        decision = rnd.decision()
        self._opportunism = tuple(rnd.opportunism)
        log.debug(
            "t=%.0f: %d allocation(s), %d preemption(s)",
            snapshot.now,
            len(decision.allocations),
            len(decision.preemptions),
        )
        return decision

    def fork(self) -> ArenaPolicy:
        """A copy with this episode's state that goes on independently.

        The oracle's iteration times and per-(model, batch, shape) memos are shared: they depend
        only on the belief model, the cluster and the shape, and every decision rebinds them to
        its snapshot (forgetting them for another belief model or cluster). Its per-job memos are
        copied: a sampled world's job id may name a different job in another world.
        """
        twin = copy.copy(self)
        twin._oracle = self._oracle.fork()
        twin._runnable = dict(self._runnable)
        twin.priority = self.priority.fork() if self.priority is not None else None
        return twin

    def at_scale(self, log_scale: float) -> ArenaPolicy:
        """A fork whose priority, if it infers the episode's work scale, takes ``exp(log_scale)`` as known.

        What a search rolls forward in a world sampled at that scale (see
        :meth:`agents.arena.gittins.GittinsPriority.at_scale`); otherwise the same as :meth:`fork`.
        """
        twin = self.fork()
        pin = getattr(self.priority, "at_scale", None)
        if pin is not None:
            twin.priority = pin(log_scale)
        return twin

    def _new_jobs(self, snapshot: Snapshot) -> list[JobView]:
        """Pending jobs this policy has not seen: the arrivals, and any submitted after the last snapshot it saw.

        Every job submitted by the time of a snapshot is in it (pending, running or done), so
        only the queue's tail, submitted after that time, can hold jobs not seen before.
        """
        pending = snapshot.pending
        new = {v.job_id: v for v in map(pending.get, snapshot.arrivals) if v is not None}
        for view in reversed(pending):
            if view.spec.submit_time <= self._seen_until:
                break
            new.setdefault(view.job_id, view)
        self._seen_until = max(self._seen_until, snapshot.now)
        return list(new.values())
