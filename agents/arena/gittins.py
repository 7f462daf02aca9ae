"""Arena ordered by the belief's Gittins index: the non-clairvoyant baseline every search or learned policy must beat.

The Gittins index of a job at its attained iterations (:meth:`WorkBelief.gittins_index`, per
second of service at its reference iteration time) is the best ratio of the chance to finish
within a further quantum of service to the service that quantum costs: serving the highest
index first minimises the mean completion time for the belief's size distribution. Arena's
admission and pending-restart trial walk the queue by it instead of by submission time.
"""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from agents.arena import ArenaPolicy
from agents.belief import JobLike, WorkBelief, load_belief
from agents.belief.adaptive import EpisodeLog, EpisodeScale
from arena_gym.types import JobId, JobView, Snapshot

log = logging.getLogger(__name__)


class GittinsPriority:
    """Queue keys ``(-Gittins index, submit time, job id)`` from a belief (non-clairvoyant: attained work only).

    Each job's index is read at its reference iteration time from the snapshot's belief model
    (its requested shape). With ``adapt`` the belief is rescaled to the episode: the index is read at the attained work
    divided by the posterior mean of the episode's work scale (:mod:`agents.belief.adaptive`),
    inferred from the jobs seen so far (finished ones' totals, running ones' attained work).
    A job the belief has no reference time for (infeasible at its request, and not in the belief's
    table) gets index 0 and urgency 0: it is ordered last, and named once in the log.
    """

    clairvoyant = False

    def __init__(self, belief: WorkBelief, adapt: bool = False) -> None:
        self.belief = belief
        self.adapt = adapt
        self._scale = EpisodeScale(belief)
        self._log = EpisodeLog()
        self._for: Snapshot | None = None  # the snapshot the memoised indexes are of
        self._memo: dict[JobId, float] = {}
        self._listed: list[JobView] = []  # that snapshot's pending and running views of known jobs, in its order
        self._shrink = 1.0
        self._pinned: float | None = None  # a log work scale taken as known (see at_scale)
        self._unknown: set[JobId] = set()  # jobs without a reference time (ordered last)
        self._known: set[JobId] = set()  # jobs with one (a job's attributes never change once seen)
        self._slots: dict[JobId, tuple[int, float, float]] = {}  # a known job's group, scale and reference time

    def reset(self) -> None:
        """Forget the episode."""
        self._log.reset()
        self._for, self._memo, self._listed = None, {}, []
        self._unknown, self._known, self._slots = set(), set(), {}

    def fork(self) -> GittinsPriority:
        """A copy with its own copy of the episode seen so far."""
        twin = copy.copy(self)
        twin._log = self._log.fork()
        twin._for, twin._memo, twin._listed = None, {}, []
        twin._unknown, twin._known, twin._slots = set(self._unknown), set(self._known), dict(self._slots)
        return twin

    def at_scale(self, log_scale: float) -> GittinsPriority:
        """A fork that reads the index at the work scale ``exp(log_scale)`` instead of inferring it.

        For a rollout in a world sampled at that scale: the order an adaptive priority converges to
        there, without a posterior per decision. A priority that does not adapt is only forked.
        """
        twin = self.fork()
        if self.adapt:
            twin._pinned = log_scale
        return twin

    def keys(self, snapshot: Snapshot) -> Callable[[JobView], tuple]:
        """Every waiting and running job's key, computed in one vectorised call for the snapshot."""
        indexes, now = self._indexes(snapshot), snapshot.now

        def key(view: JobView) -> tuple:
            spec = view.spec
            found = indexes.get(spec.job_id)  # :meth:`_index`'s answer for a listed job, read here first
            return -(found if found is not None else self._index(indexes, view, now)), spec.submit_time, spec.job_id

        return key

    def targets(self, snapshot: Snapshot) -> Callable[[JobView], int] | None:
        """No sizing targets: the config's ceiling."""
        return None

    def urgency(self, snapshot: Snapshot) -> Callable[[JobView], float]:
        """The index per sample of service: index x reference iteration time / global batch."""
        indexes, now, unknown = self._indexes(snapshot), snapshot.now, self._unknown

        def weight(view: JobView) -> float:
            spec = view.spec
            if spec.job_id in unknown:
                return 0.0
            found = indexes.get(spec.job_id)
            index = found if found is not None else self._index(indexes, view, now)
            return index * self._reference(view) / spec.global_batch

        return weight

    def _indexes(self, snapshot: Snapshot) -> dict[JobId, float]:
        """The index of every job the snapshot lists (computed once per snapshot, in one vectorised call)."""
        if self._for is snapshot:
            return self._memo
        log = self._log
        views = log.observe(snapshot)  # the jobs' reference times, and with adapt the episode's scale
        if self._pinned is not None:
            self._shrink = math.exp(-self._pinned)
        elif self.adapt:
            self._shrink = math.exp(-float(np.dot(log.posterior(self._scale), self._scale.grid)))
        else:
            self._shrink = 1.0
        known, seen, slots, shrink = self._known, log.seen, self._slots, self._shrink
        listed = [v for v in views if v.spec.job_id in known or self.known(v)]
        jobs = [v.spec.job_id for v in listed]
        memo = dict.fromkeys(self._unknown, 0.0)
        if jobs:
            if new := [j for j in jobs if j not in slots]:
                self._slot(new)
            n = len(jobs)
            groups = np.fromiter((slots[j][0] for j in jobs), dtype=np.int64, count=n)
            scales = np.fromiter((slots[j][1] for j in jobs), dtype=float, count=n)
            references = np.fromiter((slots[j][2] for j in jobs), dtype=float, count=n)
            attained = [seen[j].work * shrink for j in jobs]  # the work observed is the views' attained work now
            memo.update(zip(jobs, self.belief.gittins_index_at(groups, scales, references, attained).tolist()))
        self._for, self._memo, self._listed = snapshot, memo, listed
        return self._memo

    def _slot(self, jobs: list[JobId]) -> None:
        """Keep the group, scale and reference time of known jobs the log has seen."""
        attributes = [self._log.seen[j].attributes for j in jobs]
        groups, scales = self.belief.slots(attributes)
        references = [self.belief.reference_time(a) for a in attributes]
        self._slots.update(zip(jobs, zip(groups.tolist(), scales.tolist(), references)))

    def known(self, view: JobView) -> bool:
        """Whether the belief has a reference time for the job (a job without one is named once, then ordered last)."""
        if view.job_id in self._known:
            return True
        if view.job_id in self._unknown:
            return False
        if self.belief.references.knows(self._attributes(view)):
            self._known.add(view.job_id)
            return True
        self._unknown.add(view.job_id)
        log.warning(
            "job %s: no reference iteration time for %s batch %d at its request (infeasible there, "
            "and not in the belief's table); it is ordered last",
            view.job_id,
            view.spec.model,
            view.spec.global_batch,
        )
        return False

    def _index(self, indexes: dict[JobId, float], view: JobView, now: float) -> float:
        found = indexes.get(view.job_id)
        if found is None and not self.known(view):
            found = indexes[view.job_id] = 0.0
        if found is None:  # a view the snapshot did not list (the round's own bookkeeping)
            found = indexes[view.job_id] = float(
                self.belief.gittins_index(self._attributes(view), view.iterations_done(now) * self._shrink)
            )
        return found

    def _reference(self, view: JobView) -> float:
        """The job's reference seconds per iteration: kept for a listed known job, else the belief's."""
        slot = self._slots.get(view.spec.job_id)
        return slot[2] if slot is not None else self.belief.reference_time(self._attributes(view))

    def _attributes(self, view: JobView) -> JobLike:
        """What the episode log knows of the job (its reference time included), else the view itself."""
        seen = self._log.seen.get(view.job_id)
        return seen.attributes if seen is not None else view


def arena_gittins(
    name: str = "arena-gittins", belief: str = "real", adapt: bool = False, **overrides: Any
) -> ArenaPolicy:
    """Arena admitting and restarting by the Gittins index of ``belief`` (a packaged kind or a belief file)."""
    model = load_belief(belief)
    return ArenaPolicy(name, priority=GittinsPriority(model, adapt), **overrides)
