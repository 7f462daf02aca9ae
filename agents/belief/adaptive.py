"""The belief adapted to one episode: a common scale of the jobs' work, inferred from what the policy has seen.

Windows of one trace share a scale the pooled belief cannot know (Philly's jobs run about ten
times longer than the pool's, cluster08's a few times shorter). Within an episode a scheduler
sees jobs finish (their total work, exactly) and jobs run on (their attained work, a lower
bound), so it can infer that scale: the model is ``S = theta * S'`` with ``S'`` the belief's
work, ``log theta`` on a grid with a normal prior, the finished jobs' densities and the
unfinished ones' survival probabilities as the likelihood. A sampled world draws one
``log theta`` from the posterior, then every length given it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from agents.belief.arrivals import JobAttributes
from agents.belief.model import WorkBelief, sum_likelihood_rows
from agents.common import Estimates, requested
from arena_gym.types import JobId, JobView, Snapshot


@dataclass(frozen=True, slots=True)
class Observation:
    """What the policy knows of one job's work: its attributes, the work attained (iterations), and whether it finished."""

    attributes: JobAttributes
    work: float
    finished: bool


@dataclass(frozen=True)
class EpisodeScale:
    """The posterior over an episode's log work scale, on ``grid`` with a ``N(0, prior_sd^2)`` prior."""

    belief: WorkBelief
    prior_sd: float = 1.5
    grid: tuple[float, ...] = tuple(np.linspace(-5.0, 5.0, 81))

    def __post_init__(self) -> None:
        if not self.prior_sd > 0:
            raise ValueError(f"EpisodeScale.prior_sd must be > 0, got {self.prior_sd}")
        if len(self.grid) < 2:
            raise ValueError("EpisodeScale.grid needs at least two points")

    def posterior(self, seen: Mapping[JobId, Observation], memo: Likelihoods | None = None) -> np.ndarray:
        """Normalised posterior weights over ``grid`` given the observations (of jobs the belief has a reference for).

        With ``memo`` a job's likelihood row is computed only when its observation changed since
        the last call (the weights are the same to the last bit).
        """
        grid = np.asarray(self.grid)
        log_post = -0.5 * (grid / self.prior_sd) ** 2
        knows = self.belief.references.knows
        live = {
            j: o
            for j, o in seen.items()
            if (o.finished or o.work > 0) and (o.attributes.reference_s is not None or knows(o.attributes))
        }
        if live:
            log_post = log_post + (memo if memo is not None else Likelihoods()).total(self, live)
        weights = np.exp(log_post - log_post.max())
        return weights / weights.sum()


class Likelihoods:
    """Per job, its observation's log-likelihood row on one scale grid, kept while the observation is unchanged.

    Finished jobs' rows never change, so a posterior over a long episode computes only the
    running jobs' rows anew. A memo for another grid starts empty.
    """

    def __init__(self) -> None:
        self.grid: tuple[float, ...] | None = None
        self.rows: dict[JobId, tuple[Observation, int, np.ndarray]] = {}

    def fork(self) -> Likelihoods:
        """A copy with its own map (the rows, never written, shared)."""
        twin = Likelihoods()
        twin.grid, twin.rows = self.grid, dict(self.rows)
        return twin

    def total(self, scale: EpisodeScale, seen: Mapping[JobId, Observation]) -> np.ndarray:
        """The summed log-likelihood rows of ``seen`` (jobs with work) on ``scale``'s grid."""
        if self.grid != scale.grid:
            self.grid, self.rows = scale.grid, {}
        rows = self.rows
        stale = [(j, o) for j, o in seen.items() if (r := rows.get(j)) is None or r[0] != o]
        if stale:
            fresh = [o for _, o in stale]
            groups, new = scale.belief.scale_likelihood_rows(
                [o.attributes for o in fresh],
                [o.work for o in fresh],
                [o.finished for o in fresh],
                np.asarray(scale.grid),
            )
            for (j, o), g, row in zip(stale, groups, new):
                row.flags.writeable = False
                rows[j] = (o, int(g), row)
        held = [rows[j] for j in seen]
        return sum_likelihood_rows(
            np.fromiter((r[1] for r in held), dtype=np.int64, count=len(held)),
            [r[0].finished for r in held],
            np.stack([r[2] for r in held]),
            len(scale.grid),
        )


class EpisodeLog:
    """What a policy has seen of an episode's jobs: arrival times, attained work, the totals of those that finished.

    Call :meth:`observe` with every snapshot (it is the policy's own memory, built from
    snapshots only). A departed job's total is its last view's progress extrapolated to the
    departure (exact while its allocation did not change after that view). Each job's
    attributes carry its reference iteration time from the snapshot's belief model.
    """

    def __init__(self) -> None:
        self.arrivals: dict[JobId, float] = {}
        self.seen: dict[JobId, Observation] = {}
        self._last: dict[JobId, JobView] = {}
        self._estimates = Estimates(dp=False)
        self.likelihoods = Likelihoods()

    def reset(self) -> None:
        """Forget the episode."""
        self.arrivals, self.seen, self._last = {}, {}, {}
        self._estimates.clear()
        self.likelihoods = Likelihoods()

    def fork(self) -> EpisodeLog:
        """A copy that goes on independently: its own maps (their frozen entries shared) and the shared estimate memo.

        The memo of iteration times depends only on the belief model it is bound to, so
        sharing it changes no answer.
        """
        twin = copy.copy(self)
        twin.arrivals, twin.seen, twin._last = dict(self.arrivals), dict(self.seen), dict(self._last)
        twin.likelihoods = self.likelihoods.fork()
        return twin

    def observe(self, snapshot: Snapshot) -> None:
        """Note the snapshot's departures, arrivals and every job's attained work."""
        now = snapshot.now
        self._estimates.bind(snapshot.perf)
        for job in snapshot.departures:
            last, seen = self._last.pop(job, None), self.seen.get(job)
            if last is not None and seen is not None:
                self.seen[job] = Observation(seen.attributes, max(seen.work, last.iterations_done(now)), True)
        for view in (*snapshot.pending, *snapshot.running):
            self.arrivals.setdefault(view.job_id, view.spec.submit_time)
            seen = self.seen.get(view.job_id)
            attributes = seen.attributes if seen is not None else self._attributes(view, snapshot)
            self.seen[view.job_id] = Observation(attributes, view.iterations_done(now), False)
            self._last[view.job_id] = view

    def attributes(self, view: JobView) -> JobAttributes:
        """The attributes of a job seen in the last snapshot."""
        return self.seen[view.job_id].attributes

    def _attributes(self, view: JobView, snapshot: Snapshot) -> JobAttributes:
        """The job's attributes, with its reference time when its request is feasible on the cluster."""
        a = JobAttributes.of(view)
        gpu_type, n = requested(view.spec, snapshot)
        if gpu_type not in snapshot.cluster.gpu_types:
            return a
        reference = self._estimates.best(view.spec, gpu_type, n, snapshot.cluster.group(gpu_type).gpus_per_node)
        if not math.isfinite(reference):
            return a
        return JobAttributes(a.model, a.global_batch, a.gpu_type, a.num_gpus, reference)
