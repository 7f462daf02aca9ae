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
from agents.belief.model import WorkBelief
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
        the last call, and finished jobs' rows are summed once (the weights are the same to the last bit).
        """
        grid = np.asarray(self.grid)
        log_post = -0.5 * (grid / self.prior_sd) ** 2 + (memo if memo is not None else Likelihoods()).total(self, seen)
        weights = np.exp(log_post - log_post.max())
        return weights / weights.sum()

    def counts(self, o: Observation) -> bool:
        """Whether an observation enters the likelihood: the job has work (or finished) and a reference time."""
        return (o.finished or o.work > 0) and (
            o.attributes.reference_s is not None or self.belief.references.knows(o.attributes)
        )


class Likelihoods:
    """Per job, its observation's log-likelihood row on one scale grid, kept while the observation is unchanged.

    The total is the sum of the finished jobs' rows (group by group in the groups' order, each group's
    rows in job-id order) plus the unfinished jobs' rows (in job-id order): whichever rows
    were computed when, the same observations give the same total to the last bit. Finished jobs' rows
    never change, so a posterior over a long episode computes and sums only the running jobs' rows
    anew. A memo for another grid starts empty.
    """

    def __init__(self) -> None:
        self._clear(None)

    def _clear(self, grid: tuple[float, ...] | None) -> None:
        self.grid = grid
        self.rows: dict[JobId, tuple[Observation, int, np.ndarray]] = {}
        self._seen: dict[JobId, Observation] = {}  # every observation looked at, counted or not
        self._skipped: dict[JobId, None] = {}  # the jobs whose observation does not count
        self._open: dict[JobId, None] = {}  # the jobs with an unfinished row
        self._finished: dict[int, dict[JobId, np.ndarray]] = {}  # per group, its finished jobs' rows
        self._sums: dict[int, np.ndarray] = {}  # per group, the sum of those rows
        self._done: np.ndarray | None = None  # the finished jobs' total

    def fork(self) -> Likelihoods:
        """A copy with its own maps (the rows, never written, shared)."""
        twin = Likelihoods()
        twin.grid, twin.rows, twin._open = self.grid, dict(self.rows), dict(self._open)
        twin._seen, twin._skipped = dict(self._seen), dict(self._skipped)
        twin._finished = {g: dict(rows) for g, rows in self._finished.items()}
        twin._sums, twin._done = dict(self._sums), self._done
        return twin

    def total(self, scale: EpisodeScale, seen: Mapping[JobId, Observation]) -> np.ndarray:
        """The summed log-likelihood rows of the observations in ``seen`` that count (:meth:`EpisodeScale.counts`)."""
        if self.grid != scale.grid:
            self._clear(scale.grid)
        rows, looked = self.rows, self._seen
        changed = [j for j, o in seen.items() if looked.get(j) is not o]
        stale: list[tuple[JobId, Observation]] = []
        for j in changed:
            o, held = seen[j], rows.get(j)
            looked[j] = o
            if held is not None and held[0] == o:
                rows[j] = (o, held[1], held[2])
            elif scale.counts(o):
                stale.append((j, o))
            else:
                self._forget(j)
                self._skipped[j] = None
        dirty: set[int] = set()
        if stale:
            groups, new = scale.belief.scale_likelihood_rows(
                [o.attributes for _, o in stale],
                [o.work for _, o in stale],
                [o.finished for _, o in stale],
                np.asarray(scale.grid),
            )
            new.flags.writeable = False
            for (j, o), g, row in zip(stale, groups.tolist(), new):
                held = rows.get(j)
                if held is not None and held[0].finished:
                    dirty |= self._forget(j)
                self._skipped.pop(j, None)
                rows[j] = (o, g, row)
                if o.finished:
                    self._open.pop(j, None)
                    self._finished.setdefault(g, {})[j] = row
                    dirty.add(g)
                else:
                    self._open[j] = None
        running = [j for j in self._open if j in seen]
        finished = len(seen) - len(self._skipped.keys() & seen.keys()) - len(running)
        if finished != sum(map(len, self._finished.values())):  # it holds jobs ``seen`` lacks: start afresh
            self._clear(scale.grid)
            return self.total(scale, seen)
        for g in dirty:
            group = self._finished.get(g)
            if group:
                self._sums[g] = np.stack([group[j] for j in sorted(group)]).sum(axis=0)
            else:
                self._finished.pop(g, None)
                self._sums.pop(g, None)
        if dirty or self._done is None:
            self._done = (
                np.stack([self._sums[g] for g in sorted(self._sums)]).sum(axis=0)
                if self._sums
                else np.zeros(len(scale.grid))
            )
        if not running:
            return self._done
        running.sort()
        return self._done + np.stack([rows[j][2] for j in running]).sum(axis=0)

    def _forget(self, job: JobId) -> set[int]:
        """Drop a job's row; the group whose finished rows it left (empty: none)."""
        held = self.rows.pop(job, None)
        self._open.pop(job, None)
        if held is None or not held[0].finished:
            return set()
        self._finished.get(held[1], {}).pop(job, None)
        return {held[1]}


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
            job, seen = view.job_id, self.seen.get(view.job_id)
            if seen is None:
                self.arrivals.setdefault(job, view.spec.submit_time)
                self.seen[job] = Observation(self._attributes(view, snapshot), view.iterations_done(now), False)
            elif (work := view.iterations_done(now)) != seen.work or seen.finished:  # else unchanged: memos skip it
                self.seen[job] = Observation(seen.attributes, work, False)
            self._last[job] = view

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
