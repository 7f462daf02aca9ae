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

import bisect
import copy
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from agents.belief.arrivals import JobAttributes
from agents.belief.model import WorkBelief
from agents.common import Estimates, requested
from arena_gym.types import JobId, JobView, Snapshot


class Observation(NamedTuple):
    """What the policy knows of one job's work: its attributes, the work attained (iterations), and whether it finished.

    A named tuple: a policy makes one for every running job at every decision, at half a frozen dataclass's cost.
    """

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

    def posterior(
        self,
        seen: Mapping[JobId, Observation],
        memo: Likelihoods | None = None,
        changed: Iterable[JobId] | None = None,
    ) -> np.ndarray:
        """Normalised posterior weights over ``grid`` given the observations (of jobs the belief has a reference for).

        With ``memo`` a job's likelihood row is computed only when its observation changed since
        the last call, and finished jobs' rows are summed once (the weights are the same to the last bit);
        ``changed`` names the jobs whose observation may have changed since then (None: any).
        """
        grid = np.asarray(self.grid)
        memo = memo if memo is not None else Likelihoods()
        log_post = -0.5 * (grid / self.prior_sd) ** 2 + memo.total(self, seen, changed)
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
    (``rows``) never change, so a posterior over a long episode computes and sums only the running jobs' rows
    anew, from each one's group and scale (kept: a job's attributes do not change). A memo for another grid
    starts empty.
    """

    def __init__(self) -> None:
        self._clear(None)

    def _clear(self, grid: tuple[float, ...] | None) -> None:
        self.grid = grid
        self.rows: dict[JobId, tuple[Observation, int, np.ndarray]] = {}  # the finished jobs' rows
        self._seen: dict[JobId, Observation] = {}  # every observation looked at, counted or not
        self._skipped: dict[JobId, None] = {}  # the jobs whose observation does not count
        self._open: dict[JobId, tuple[JobAttributes, int, float]] = {}  # per unfinished job, its group and scale
        # _open's jobs sorted, their groups and scales (lists and arrays never written: a job joins or leaves in a copy)
        self._order: tuple[list[JobId], np.ndarray, np.ndarray] = ([], np.zeros(0, np.int64), np.zeros(0))
        # per group, its finished jobs (sorted) and their rows stacked in that order; arrays and lists never written
        self._finished: dict[int, tuple[list[JobId], np.ndarray]] = {}
        self._sums: tuple[list[int], np.ndarray] = ([], np.zeros((0, 0 if grid is None else len(grid))))
        self._done: np.ndarray | None = None  # the finished jobs' total: the sum of ``_sums``' rows

    def fork(self) -> Likelihoods:
        """A copy with its own maps (the rows, never written, shared)."""
        twin = Likelihoods()
        twin.grid, twin.rows, twin._open, twin._order = self.grid, dict(self.rows), dict(self._open), self._order
        twin._seen, twin._skipped = dict(self._seen), dict(self._skipped)
        twin._finished, twin._sums, twin._done = dict(self._finished), self._sums, self._done
        return twin

    def total(
        self, scale: EpisodeScale, seen: Mapping[JobId, Observation], changed: Iterable[JobId] | None = None
    ) -> np.ndarray:
        """The summed log-likelihood rows of the observations in ``seen`` that count (:meth:`EpisodeScale.counts`).

        ``changed``: the jobs whose observation in ``seen`` may differ from the last call's (None: any), a job
        whose work only moved from one positive value to another, unfinished, aside: its row is computed anew
        at every call whatever ``changed`` says.
        """
        if self.grid != scale.grid:
            self._clear(scale.grid)
            changed = None
        rows, looked, slots = self.rows, self._seen, self._open
        if changed is None:
            changed = [j for j, o in seen.items() if looked.get(j) is not o]
        stale: list[tuple[JobId, Observation]] = []  # finished jobs whose row is computed anew
        dirty: set[int] = set()
        for j in changed:
            o = seen.get(j)
            if o is None or looked.get(j) is o:
                continue
            looked[j] = o
            held = rows.get(j)
            # a running job with work and its own reference time counts (the common case, checked cheaply)
            if held is not None or o.finished or not (o.work > 0 and o.attributes.reference_s is not None):
                if held is not None and held[0] == o:
                    rows[j] = (o, held[1], held[2])
                    continue
                if not scale.counts(o):
                    dirty |= self._forget(j)
                    self._skipped[j] = None
                    continue
                if o.finished:
                    stale.append((j, o))
                    continue
                if held is not None:
                    dirty |= self._forget(j)
            self._skipped.pop(j, None)
            slot = slots.get(j)
            if slot is None or slot[0] is not o.attributes:
                (g,), (unit,) = scale.belief.slots([o.attributes])
                self._open_slot(j, o.attributes, int(g), float(unit))
        grid = np.asarray(scale.grid)
        if stale:
            groups, new = scale.belief.scale_likelihood_rows(
                [o.attributes for _, o in stale], [o.work for _, o in stale], [True] * len(stale), grid
            )
            new.flags.writeable = False
            for (j, o), g, row in zip(stale, groups.tolist(), new):
                dirty |= self._forget(j)
                self._skipped.pop(j, None)
                rows[j] = (o, g, row)
                jobs, stacked = self._finished.get(g, ([], np.empty((0, grid.size))))
                at = bisect.bisect(jobs, j)
                self._finished[g] = ([*jobs[:at], j, *jobs[at:]], np.insert(stacked, at, row, axis=0))
                dirty.add(g)
        running, groups, units = self._order
        if not seen.keys() >= slots.keys():  # some unfinished job is not in ``seen``
            keep = [k for k, j in enumerate(running) if j in seen]
            running, groups, units = [running[k] for k in keep], groups[keep], units[keep]
        finished = len(seen) - len(self._skipped.keys() & seen.keys()) - len(running)
        if finished != len(rows):  # it holds jobs ``seen`` lacks: start afresh
            self._clear(scale.grid)
            return self.total(scale, seen)
        if dirty or self._done is None:
            self._done = self._summed(dirty, len(grid))
        if not running:
            return self._done
        work = np.array([seen[j].work for j in running], dtype=float)
        rows_now = scale.belief.scale_likelihood_rows_at(groups, units, work, np.zeros(len(running), bool), grid)
        return self._done + rows_now.sum(axis=0)

    def _summed(self, dirty: set[int], width: int) -> np.ndarray:
        """The finished jobs' total, the sums of the ``dirty`` groups' rows taken anew."""
        order, sums = self._sums
        for g in sorted(dirty):
            at, group = bisect.bisect_left(order, g), self._finished.get(g)
            present = at < len(order) and order[at] == g
            if group is not None and present:
                sums = sums.copy()
                sums[at] = group[1].sum(axis=0)
            elif group is not None:
                order, sums = [*order[:at], g, *order[at:]], np.insert(sums, at, group[1].sum(axis=0), axis=0)
            elif present:
                order, sums = [*order[:at], *order[at + 1 :]], np.delete(sums, at, axis=0)
        self._sums = (order, sums)
        return sums.sum(axis=0) if order else np.zeros(width)

    def _open_slot(self, job: JobId, attributes: JobAttributes, group: int, unit: float) -> None:
        """Keep an unfinished job's group and scale, in its place in the sorted order."""
        order, groups, units = self._order
        at = bisect.bisect_left(order, job)
        if job in self._open:  # new attributes for a job already open: its entry replaced
            groups, units = groups.copy(), units.copy()
            groups[at], units[at] = group, unit
        else:
            order, groups, units = (
                [*order[:at], job, *order[at:]],
                np.insert(groups, at, group),
                np.insert(units, at, unit),
            )
        self._open[job], self._order = (attributes, group, unit), (order, groups, units)

    def _forget(self, job: JobId) -> set[int]:
        """Drop a job's row or slot; the group whose finished rows it left (empty: none)."""
        held = self.rows.pop(job, None)
        if self._open.pop(job, None) is not None:
            order, groups, units = self._order
            at = bisect.bisect_left(order, job)
            self._order = ([*order[:at], *order[at + 1 :]], np.delete(groups, at), np.delete(units, at))
        if held is None:
            return set()
        jobs, stacked = self._finished[held[1]]
        at = jobs.index(job)
        if len(jobs) == 1:
            del self._finished[held[1]]
        else:
            self._finished[held[1]] = ([*jobs[:at], *jobs[at + 1 :]], np.delete(stacked, at, axis=0))
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
        self._changed: set[JobId] = set()  # jobs observed anew since :meth:`posterior` (not a running job's work alone)

    def reset(self) -> None:
        """Forget the episode."""
        self.arrivals, self.seen, self._last, self._changed = {}, {}, {}, set()
        self._estimates.clear()
        self.likelihoods = Likelihoods()

    def fork(self) -> EpisodeLog:
        """A copy that goes on independently: its own maps (their frozen entries shared) and the shared estimate memo.

        The memo of iteration times depends only on the belief model it is bound to, so
        sharing it changes no answer.
        """
        twin = copy.copy(self)
        twin.arrivals, twin.seen, twin._last = dict(self.arrivals), dict(self.seen), dict(self._last)
        twin.likelihoods, twin._changed = self.likelihoods.fork(), set(self._changed)
        return twin

    def posterior(self, scale: EpisodeScale) -> np.ndarray:
        """``scale``'s posterior given the jobs seen (:meth:`EpisodeScale.posterior` with the log's memo).

        Only the jobs observed anew since the last call are looked at again: the same weights to the last bit.
        """
        changed, self._changed = self._changed, set()
        return scale.posterior(self.seen, self.likelihoods, changed)

    def observe(self, snapshot: Snapshot) -> tuple[JobView, ...]:
        """Note the snapshot's departures, arrivals and every job's attained work; its pending and running views."""
        now, observed, last, changed = snapshot.now, self.seen, self._last, self._changed
        self._estimates.bind(snapshot.perf)
        for job in snapshot.departures:
            view, seen = last.pop(job, None), observed.get(job)
            if view is not None and seen is not None:
                observed[job] = Observation(seen.attributes, max(seen.work, view.iterations_done(now)), True)
                changed.add(job)
        views = (*snapshot.pending, *snapshot.running)
        for view in views:
            job = view.spec.job_id
            seen = observed.get(job)
            if seen is None:
                self.arrivals.setdefault(job, view.spec.submit_time)
                observed[job] = Observation(self._attributes(view, snapshot), view.iterations_done(now), False)
                changed.add(job)
            elif (work := view.iterations_done(now)) != seen.work or seen.finished:  # else unchanged: memos skip it
                observed[job] = Observation(seen.attributes, work, False)
                if seen.finished or not (work > 0 and seen.work > 0):  # else only a running job's work grew
                    changed.add(job)
            last[job] = view
        return views

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
