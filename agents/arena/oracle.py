"""ThroughputOracle: a job's belief throughput on a resource shape, as Arena scores its candidates."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from agents.arena.config import ArenaConfig
from agents.arena.index import halved_key
from agents.common import Estimates, ShapeKey, key_of
from arena_gym.types import ClusterSpec, JobId, JobSpec, JobView, ModelRef, Placement, Snapshot

#: Gains at or below this (samples/s) count as no gain (guards against float noise).
GAIN_EPS = 1e-9


class MoveBound(NamedTuple):
    """A change a running job may make (double, or move to another type), with its gain's upper bound."""

    gain: float
    gpu_type: str
    num_gpus: int
    doubles: bool


class Moves(NamedTuple):
    """What a running job may change from a placement it holds: its samples/s there, its GPU count, the changes
    (``bounds``), and those of them whose bound is a gain (``upgrades``: above ``GAIN_EPS``)."""

    held: float
    num_gpus: int
    bounds: tuple[MoveBound, ...]
    upgrades: tuple[MoveBound, ...]


class ThroughputOracle:
    """Samples/s of a job's (model, batch) on a shape, as the belief model says.

    Throughput is ``global_batch / iter_time`` of the proxy plan (``perf.iter_time``), or of
    the data-parallel view (``perf.dp_iter_time``) with ``dp_only``; relaxed localities get
    whatever the belief says for them (a table model applies the 0.9-per-halving rule itself).
    Iteration times come from :class:`agents.common.Estimates`, memoised for as long as the
    snapshot's ``perf`` object stays the same (one episode); so are the rates of the placements
    jobs hold, their halvings and their moves, per job and placement object and per (model,
    batch, shape) (the halvings only for one decision and per job when deadline-aware, as they
    depend on the time and the job). :meth:`bind` starts each decision.
    """

    def __init__(self, config: ArenaConfig) -> None:
        self.config = config
        self.estimates = Estimates(dp=config.dp_only)
        self._now = 0.0
        self._remaining: dict[JobId, float] = {}
        self._held: dict[JobId, tuple[Placement, float]] = {}
        # per job: its last two placements (objects) and their halvings' changes, the latest first
        self._halving: dict[JobId, tuple[Placement, float | None, Placement | None, float | None]] = {}
        self._moves: dict[JobId, tuple[Placement, Moves]] = {}
        self._cluster: ClusterSpec | None = None
        self._shape_halving: dict[tuple[ModelRef, int, ShapeKey], float | None] = {}
        self._shape_moves: dict[tuple[ModelRef, int, ShapeKey], Moves] = {}

    def fork(self) -> ThroughputOracle:
        """A copy for a policy that goes on in another world: the iteration times and the per-(model, batch, shape)
        memos shared, the per-job memos its own (a job id of one sampled world may name another job in the next)."""
        twin = copy.copy(self)
        twin._remaining, twin._held, twin._halving, twin._moves = (
            dict(self._remaining),
            dict(self._held),
            dict(self._halving),
            dict(self._moves),
        )
        return twin

    def reset(self) -> None:
        """Forget memoised numbers (a new episode may bring a new belief model)."""
        self.estimates.clear()
        self._remaining.clear()
        self._forget()

    def bind(self, snapshot: Snapshot) -> None:
        """Start a decision: keep the memo if the belief model and the cluster are unchanged, note the time."""
        if self.estimates.bind(snapshot.perf) or snapshot.cluster is not self._cluster:
            self._forget()
            self._cluster = snapshot.cluster
        elif self.config.deadline_aware:
            self._halving.clear()
        self._now = snapshot.now
        self._remaining = {}

    def _forget(self) -> None:
        self._cluster = None
        for memo in (self._held, self._halving, self._moves, self._shape_halving, self._shape_moves):
            memo.clear()

    def current(self, spec: JobSpec, key: ShapeKey) -> float:
        """Throughput of a configuration a job already holds (0 when the belief calls it infeasible)."""
        return spec.global_batch / self.estimates.time_at(spec, key)

    def held_rate(self, views: Mapping[JobId, JobView], job: JobId, placement: Placement) -> float:
        """Throughput of ``job`` on ``placement``, a placement it holds (memoised per placement object)."""
        memo = self._held.get(job)
        if memo is None or memo[0] is not placement:
            memo = self._held[job] = (placement, self.current(views[job].spec, key_of(placement)))
        return memo[1]

    def halving_change(self, views: Mapping[JobId, JobView], job: JobId, placement: Placement) -> float | None:
        """Throughput change of halving ``job`` in place on ``placement`` (see ``halved``), or None when infeasible."""
        memo = self._halving.get(job)
        if memo is not None:
            if memo[0] is placement:
                return memo[1]
            if memo[2] is placement:  # the placement held before the last one (a search undoing a halving)
                self._halving[job] = (placement, memo[3], memo[0], memo[1])
                return memo[3]
        view = views[job]
        shape = (view.spec.model, view.spec.global_batch, key_of(placement))
        if self.config.deadline_aware or shape not in self._shape_halving:
            rate = self.rate(view, halved_key(placement))
            change = None if rate is None else rate - self.held_rate(views, job, placement)
            if not self.config.deadline_aware:
                self._shape_halving[shape] = change
        else:
            change = self._shape_halving[shape]
        self._halving[job] = (placement, change, None, None) if memo is None else (placement, change, memo[0], memo[1])
        return change

    def moves(
        self, views: Mapping[JobId, JobView], job: JobId, placement: Placement, capacity: Mapping[str, int]
    ) -> Moves:
        """The changes ``job`` may make from ``placement``, a placement it holds, with their gains' upper bounds.

        First its doubling on its own type (unless ``no_scaling`` or beyond the config's ``grow_ceiling``),
        then its move at the same count to each other type of ``capacity`` (GPUs per node by
        type, in cluster order; unless ``no_type_change``), each where the belief calls some
        locality feasible: (best rate over the localities - the held rate, type, GPU count,
        doubles). Memoised per placement object.
        """
        memo = self._moves.get(job)
        if memo is None or memo[0] is not placement:
            spec = views[job].spec
            shape = (spec.model, spec.global_batch, key_of(placement))
            moves = self._shape_moves.get(shape)
            if moves is None:
                moves = self._shape_moves[shape] = self._bounds(spec, placement, capacity)
            memo = self._moves[job] = (placement, moves)
        return memo[1]

    def moves_of(
        self,
        views: Mapping[JobId, JobView],
        jobs: Sequence[JobId],
        placement: Mapping[JobId, Placement],
        capacity: Mapping[str, int],
    ) -> list[Moves]:
        """:meth:`moves` of each of ``jobs`` from the placement it holds."""
        memo, out = self._moves, []
        for job in jobs:
            p = placement[job]
            hit = memo.get(job)
            out.append(hit[1] if hit is not None and hit[0] is p else self.moves(views, job, p, capacity))
        return out

    def _bounds(self, spec: JobSpec, placement: Placement, capacity: Mapping[str, int]) -> Moves:
        cfg = self.config
        own, count = placement.gpu_type, placement.num_gpus
        old = self.current(spec, key_of(placement))
        bounds = []
        if not cfg.no_scaling and 2 * count <= cfg.grow_ceiling:
            ub = self.best_rate(spec, own, 2 * count, capacity[own])
            if ub is not None:
                bounds.append(MoveBound(ub - old, own, 2 * count, True))
        for t, cap in capacity.items() if not cfg.no_type_change else ():
            ub = self.best_rate(spec, t, count, cap) if t != own else None
            if ub is not None:
                bounds.append(MoveBound(ub - old, t, count, False))
        return Moves(old, count, tuple(bounds), tuple(b for b in bounds if b.gain > GAIN_EPS))

    def rate(self, view: JobView, key: ShapeKey) -> float | None:
        """Throughput of moving ``view`` to a new configuration, or None when that is infeasible.

        Infeasible: no plan fits (out of memory), or, deadline-aware, the job would finish
        after its deadline: ``now + restart overhead + remaining iterations * iter_time``.
        """
        spec = view.spec
        t = self.estimates.time_at(spec, key)
        if t == math.inf:
            return None
        if self.config.deadline_aware and spec.deadline is not None:
            remaining = self._remaining.get(spec.job_id)
            if remaining is None:
                remaining = self._remaining[spec.job_id] = view.remaining_iterations(self._now)
            finish = self._now + self.config.restart_overhead_s(key[1] * key[2]) + remaining * t
            if finish > spec.deadline:
                return None
        return spec.global_batch / t

    def best_rate(self, spec: JobSpec, gpu_type: str, num_gpus: int, capacity: int) -> float | None:
        """Highest throughput over every locality of ``num_gpus`` GPUs of a type (an upper bound), or None."""
        t = self.estimates.fastest(spec, gpu_type, num_gpus, capacity)
        return spec.global_batch / t if t < math.inf else None
