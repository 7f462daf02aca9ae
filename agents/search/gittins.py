"""Arena ordered by the belief's Gittins index: the non-clairvoyant baseline every search or learned policy must beat.

The Gittins index of a job at its attained iterations (:meth:`WorkBelief.gittins_index`, per
second of service at its reference iteration time) is the best ratio of the chance to finish
within a further quantum of service to the service that quantum costs: serving the highest
index first minimises the mean completion time for the belief's size distribution. Arena's
admission and pending-restart trial walk the queue by it instead of by submission time.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from agents.arena import ArenaPolicy
from agents.search.adaptive import EpisodeLog, EpisodeScale
from agents.search.belief import KINDS, WorkBelief, default_belief
from arena_gym.types import JobId, JobView, Snapshot


class GittinsPriority:
    """Queue keys ``(-Gittins index, submit time, job id)`` from a belief (non-clairvoyant: attained work only).

    Each job's index is read at its reference iteration time from the snapshot's belief model
    (its requested shape). With ``adapt`` the belief is rescaled to the episode: the index is read at the attained work
    divided by the posterior mean of the episode's work scale (:mod:`agents.search.adaptive`),
    inferred from the jobs seen so far (finished ones' totals, running ones' attained work).
    """

    clairvoyant = False

    def __init__(self, belief: WorkBelief, adapt: bool = False) -> None:
        self.belief = belief
        self.adapt = adapt
        self._scale = EpisodeScale(belief)
        self._log = EpisodeLog()

    def reset(self) -> None:
        """Forget the episode."""
        self._log.reset()

    def fork(self) -> GittinsPriority:
        """A copy with its own copy of the episode seen so far."""
        twin = copy.copy(self)
        twin._log = copy.deepcopy(self._log)
        return twin

    def keys(self, snapshot: Snapshot) -> Callable[[JobView], tuple]:
        """Every waiting and running job's key, computed in one vectorised call for the snapshot."""
        now, log = snapshot.now, self._log
        log.observe(snapshot)  # the jobs' reference times, and with adapt the episode's scale
        shrink = math.exp(-float(np.dot(self._scale.posterior(log.seen), self._scale.grid))) if self.adapt else 1.0
        views = [*snapshot.pending, *snapshot.running]
        attained = [v.iterations_done(now) * shrink for v in views]
        index = np.atleast_1d(self.belief.gittins_index([log.attributes(v) for v in views], attained)) if views else ()
        memo: dict[JobId, tuple] = {v.job_id: (-float(g), v.spec.submit_time, v.job_id) for v, g in zip(views, index)}

        def key(view: JobView) -> tuple:
            found = memo.get(view.job_id)
            if found is None:  # a view the snapshot did not list (the round's own bookkeeping)
                attributes = log.seen[view.job_id].attributes if view.job_id in log.seen else view
                g = float(self.belief.gittins_index(attributes, view.iterations_done(now) * shrink))
                found = memo[view.job_id] = (-g, view.spec.submit_time, view.job_id)
            return found

        return key


def arena_gittins(
    name: str = "arena-gittins", belief: str = "real", adapt: bool = False, **overrides: Any
) -> ArenaPolicy:
    """Arena admitting and restarting by the Gittins index of ``belief`` (a packaged kind or a belief file)."""
    model = default_belief(belief) if belief in KINDS else WorkBelief.load(belief)
    return ArenaPolicy(name, priority=GittinsPriority(model, adapt), **overrides)
