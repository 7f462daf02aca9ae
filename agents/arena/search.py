"""Arena's searches on a workspace (docs/arena.md §5.3-5.4).

``place`` is the migration search (best locality, RHD bubble migration, relaxed locality);
``fit`` is ``fit_one_job`` with its downgrade BFS (elastic shrink and hardware-type change);
``upgrade`` is the running-jobs upgrade trial; ``improve_locality`` the introspective
migration. Every candidate is scored by its structured marginal gain: the sum over modified
jobs of new minus old samples/s, plus the new job's samples/s; infeasible candidates are
never recorded (the artifact's -1e9).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from functools import partial
from typing import NamedTuple

import numpy as np

from agents.arena.config import ArenaConfig
from agents.arena.index import Shrink, ShrinkIndex, halved
from agents.arena.oracle import GAIN_EPS, ThroughputOracle
from agents.common import Change, Workspace, key_of, shape_key
from arena_gym.placement import place_shape
from arena_gym.types import JobId, JobView, Placement, ResourceShape, best_locality, localities


class Candidate(NamedTuple):
    """A candidate outcome of a search: the workspace edits it makes and its structured marginal gain."""

    gain: float
    changes: tuple[Change, ...]


class _Move(NamedTuple):
    """A tried move of one job: its gain, where it went and the workspace edits it took."""

    gain: float
    job: JobId
    gpu_type: str
    num_gpus: int
    changes: tuple[Change, ...]
    placement: Placement
    relaxed: bool


class _Branch(NamedTuple):
    """A downgrade-search state: edits so far, their gain, and the target's current request."""

    changes: tuple[Change, ...]
    gain: float
    gpu_type: str
    num_gpus: int


def _net(changes: tuple[Change, ...]) -> tuple[tuple[JobId, Placement | None], ...]:
    final: dict[JobId, Placement | None] = {}
    for job, _, new in changes:
        final[job] = new
    return tuple(sorted(final.items(), key=lambda kv: kv[0]))


class ArenaSearch:
    """The search steps of one decision over a shared workspace and throughput oracle."""

    def __init__(
        self,
        config: ArenaConfig,
        workspace: Workspace,
        oracle: ThroughputOracle,
        views: Mapping[JobId, JobView],
        urgency: Callable[[JobView], float] | None = None,
        targets: Callable[[JobView], int] | None = None,
    ) -> None:
        self.config = config
        self.urgency = urgency
        self.targets = targets
        self._targets: dict[JobId, int] = {}
        self.ws = workspace
        self.oracle = oracle
        self.views = views
        self._weigh_fits = config.weighted_fits and urgency is not None
        self._urgencies: dict[JobId, float] = {}
        self._unit = 1.0  # the urgency of the job being fitted (weighted fits score in its samples/s)
        change = partial(oracle.halving_change, views)
        self._shrinks = ShrinkIndex(workspace, self._weighted(change) if self._weigh_fits else change)
        self._own_halving: dict[tuple[JobId, str, int], float | None] = {}

    def _urgency(self, job: JobId) -> float:
        """The job's urgency (memoised for the decision; at least 1e-30, so that it can divide); 1 without one."""
        if self.urgency is None:
            return 1.0
        found = self._urgencies.get(job)
        if found is None:
            found = self._urgencies[job] = max(self.urgency(self.views[job]), 1e-30)
        return found

    def _size_target(self, job: JobId) -> int:
        """The most GPUs the upgrade trial may grow ``job`` to: its sizing target, at most the ceiling (memoised)."""
        assert self.targets is not None
        found = self._targets.get(job)
        if found is None:
            found = self._targets[job] = min(self.targets(self.views[job]), self.config.grow_ceiling)
        return found

    def _weighted(
        self, change: Callable[[JobId, Placement], float | None]
    ) -> Callable[[JobId, Placement], float | None]:
        """``change`` times the job's urgency (the index keeps victims in that order across fits)."""

        urgencies = self._urgencies

        def weighted(job: JobId, placement: Placement) -> float | None:
            raw = change(job, placement)
            if raw is None:
                return None
            found = urgencies.get(job)  # :meth:`_urgency`'s memo, read here first
            return raw * (found if found is not None else self._urgency(job))

        return weighted

    def held_rate(self, job: JobId, placement: Placement) -> float:
        """Samples/s ``job`` makes on ``placement``, a configuration it holds (memoised)."""
        return self.oracle.held_rate(self.views, job, placement)

    def runnable(self, job: JobView, gpu_type: str, num_gpus: int) -> bool:
        """Whether ``job`` (requesting ``num_gpus`` of ``gpu_type``) could ever start: some count it may get
        (the request or, with scaling, a halving of it) is feasible on some type it may use (any, with type change).
        """
        cfg, ws = self.config, self.ws
        counts = [num_gpus]
        while not cfg.no_scaling and counts[-1] > 1:
            counts.append(counts[-1] // 2)
        for t in ws.types:
            if cfg.no_type_change and t != gpu_type:
                continue
            cap = ws.capacity[t]
            for count in counts:
                if count > min(cfg.max_job_gpus, cap * ws.nodes[t]):
                    continue
                if any(self.oracle.rate(job, shape_key(s)) is not None for s in localities(t, count, cap)):
                    return True
        return False

    # ------------------------------------------------------------ migration search
    def place(
        self, job: JobView, gpu_type: str, num_gpus: int, limit: int | None = None
    ) -> tuple[Placement | None, bool]:
        """Put ``job`` (holding no GPUs) on ``num_gpus`` GPUs of ``gpu_type``; returns (placement, relaxed).

        At most ``limit`` GPUs (default ``max_job_gpus``; a grow may go up to the config's ``grow_ceiling``).
        Best locality first (best-fit nodes); if fragmentation blocks it, RHD bubble migration
        rounds repack other jobs; otherwise the most packed relaxed locality that fits, as long
        as every level is feasible. Fails if the best locality itself is infeasible.
        """
        ws = self.ws
        cap = ws.capacity.get(gpu_type)
        if (
            cap is None
            or ws.total_free[gpu_type] < num_gpus
            or num_gpus > (limit or self.config.max_job_gpus)
            or num_gpus > cap * ws.nodes[gpu_type]
        ):
            return None, False
        shapes = localities(gpu_type, num_gpus, cap)
        if self.oracle.rate(job, shape_key(shapes[0])) is None:
            return None, False
        free = ws.free[gpu_type]
        placement = place_shape(free, shapes[0])
        if placement is None:
            placement = self._migrate_and_place(shapes[0])
        if placement is not None:
            ws.set(job.job_id, placement)
            return placement, False
        for shape in shapes[1:]:
            if self.oracle.rate(job, shape_key(shape)) is None:
                break
            placement = place_shape(free, shape)
            if placement is not None:
                ws.set(job.job_id, placement)
                return placement, True
        return None, False

    def _migrate_and_place(self, shape: ResourceShape) -> Placement | None:
        """RHD bubble migration: pair the fullest partial node with the emptiest and repack, until ``shape`` fits."""
        ws = self.ws
        gpu_type = shape.gpu_type
        cap, free = ws.capacity[gpu_type], ws.free[gpu_type]
        mark = ws.checkpoint()
        for _ in range(self.config.max_migration_rounds):
            partial = np.flatnonzero((free > 0) & (free < cap))
            if len(partial) < 2:
                break
            order = partial[np.argsort(free[partial], kind="stable")]  # fewest bubbles first
            moved = False
            for i in range(len(order) // 2):
                if self._pack(gpu_type, int(order[-1 - i]), int(order[i])):
                    moved = True
                    placement = place_shape(free, shape)
                    if placement is not None:
                        return placement
            if not moved:
                break
        ws.rollback(mark)
        return None

    def _pack(self, gpu_type: str, src: int, dst: int) -> bool:
        """Move job parts from node ``src`` into the bubbles of node ``dst``, largest first.

        If all of ``src`` fits, the node empties; otherwise ``dst`` fills up. A cross-node job
        moves only if ``dst`` does not hold it already (uniform locality is preserved).
        """
        ws = self.ws
        room = int(ws.free[gpu_type][dst])
        moved = False
        for job, gpus in sorted(ws.occupants(gpu_type, src).items(), key=lambda kv: (-kv[1], kv[0])):
            if gpus > room:
                continue
            p = ws.placement[job]
            if dst in p.nodes:
                continue
            nodes = tuple(sorted(dst if n == src else n for n in p.nodes))
            ws.set(job, Placement(p.gpu_type, nodes, p.gpus_per_node))
            room -= gpus
            moved = True
            if room == 0:
                break
        return moved

    # ------------------------------------------------------------ fit_one_job
    def fit(self, job: JobView, gpu_type: str, num_gpus: int) -> bool:
        """``fit_one_job``: start ``job`` on its request, or on the best downgrade candidate; True if started.

        The edits of the chosen candidate stay in the workspace; nothing changes on failure. A
        downgrade candidate (or a relaxed placement) is taken only with a positive total gain.
        """
        ws = self.ws
        if self._weigh_fits:
            self._unit = self._urgency(job.job_id)
        base = ws.checkpoint()
        placement, relaxed = self.place(job, gpu_type, num_gpus)
        if placement is not None and not relaxed:
            return True
        candidates: list[Candidate] = []
        if placement is not None:
            candidates.append(Candidate(self._rate(job, placement), ws.changes_since(base)))
            ws.rollback(base)
        if not (self.config.no_scaling and self.config.no_type_change):
            candidates.extend(self._downgrade(job, gpu_type, num_gpus, base))
        best = None
        for candidate in candidates:
            if best is None or candidate.gain > best.gain:
                best = candidate
        if best is None or best.gain <= GAIN_EPS:
            return False
        ws.redo(best.changes)
        return True

    def _rate(self, job: JobView, placement: Placement) -> float:
        rate = self.oracle.rate(job, key_of(placement))
        assert rate is not None, "place() returned an infeasible placement"
        return rate

    def _downgrade(self, job: JobView, gpu_type: str, num_gpus: int, base: int) -> list[Candidate]:
        """BFS over single-job modifications (shrink by halving; hardware-type change)."""
        ws = self.ws
        candidates: list[Candidate] = []
        frontier = [_Branch((), 0.0, gpu_type, num_gpus)]
        seen: set[tuple] = set()
        depth = self.config.depth(len(ws.placement))
        for level in range(1, depth + 1):
            children: list[_Branch] = []
            for branch in frontier:
                ws.rollback(base)
                ws.redo(branch.changes)
                if not self.config.no_scaling:
                    for t in ws.types:
                        self._shrink(job, branch, t, base, candidates, children, last=level == depth)
                if not self.config.no_type_change:
                    self._retype(job, branch, base, candidates, children)
            if level == depth:
                break  # the last level's children are never searched
            frontier = []
            for child in children:
                signature = (_net(child.changes), child.gpu_type, child.num_gpus)
                if signature not in seen:
                    seen.add(signature)
                    frontier.append(child)
        ws.rollback(base)
        return candidates

    def _settle(
        self,
        job: JobView,
        child: _Branch,
        base: int,
        candidates: list[Candidate],
        children: list[_Branch],
        try_place: bool,
    ) -> None:
        """Record a candidate if the target now fits; keep searching from ``child`` unless it fit at best locality."""
        if try_place:
            ws = self.ws
            mark = ws.checkpoint()
            placement, relaxed = self.place(job, child.gpu_type, child.num_gpus)
            if placement is not None:
                candidates.append(Candidate(child.gain + self._rate(job, placement), ws.changes_since(base)))
                ws.rollback(mark)
                if not relaxed:
                    return
        children.append(child)

    def _shrink(
        self,
        job: JobView,
        branch: _Branch,
        gpu_type: str,
        base: int,
        candidates: list[Candidate],
        children: list[_Branch],
        last: bool = False,
    ) -> None:
        """Halve the big job of ``gpu_type`` that loses least (the target's own request counts).

        On the ``last`` level a halving of another type's job only leaves a child never searched:
        the victim is relinked as the halving and its rollback would leave it.
        """
        choice = self._shrink_choice(job, branch, gpu_type)
        if choice is None:
            return
        delta, victim = choice
        ws = self.ws
        if last and victim is not None and gpu_type != branch.gpu_type:
            ws.relink(victim, halved(ws.placement[victim]))
            return
        mark = ws.checkpoint()
        if victim is None:
            child = _Branch(branch.changes, branch.gain, gpu_type, branch.num_gpus // 2)
        else:
            ws.set(victim, halved(ws.placement[victim]))
            child = _Branch(ws.changes_since(base), branch.gain + delta, branch.gpu_type, branch.num_gpus)
        self._settle(job, child, base, candidates, children, try_place=gpu_type == child.gpu_type)
        ws.rollback(mark)

    def _shrink_choice(self, job: JobView, branch: _Branch, gpu_type: str) -> Shrink | None:
        """(throughput change, job) of the best halving among jobs holding >= half the type's largest count.

        The job is None when the best choice is to halve the target's own request.
        """
        ws = self.ws
        n = branch.num_gpus
        target_here = branch.gpu_type == gpu_type
        top = max(ws.largest(gpu_type), n if target_here else 0)
        if top < 2:
            return None
        best: Shrink | None = None
        scale = self._unit if self._weigh_fits else 1.0  # the index holds urgency-weighted changes
        if target_here and n >= 2 and 2 * n >= top:
            change = self._halving_own(job, gpu_type, n)
            if change is not None:
                best = (change * scale, None)
        found = self._shrinks.best(gpu_type, top, best)
        return found if found is None or scale == 1.0 else (found[0] / scale, found[1])

    def _halving_own(self, job: JobView, gpu_type: str, n: int) -> float | None:
        """Throughput change of the target taking half its ``n`` GPUs of ``gpu_type`` (best localities), memoised."""
        key = (job.job_id, gpu_type, n)
        if key not in self._own_halving:
            oracle, cap = self.oracle, self.ws.capacity[gpu_type]
            half = oracle.rate(job, shape_key(best_locality(gpu_type, n // 2, cap)))
            self._own_halving[key] = (
                None if half is None else half - oracle.current(job.spec, shape_key(best_locality(gpu_type, n, cap)))
            )
        return self._own_halving[key]

    def _retype(
        self, job: JobView, branch: _Branch, base: int, candidates: list[Candidate], children: list[_Branch]
    ) -> None:
        """Hardware-type change: move the job of the target's type (or the target) that gains most to a type with idle GPUs."""
        ws, oracle = self.ws, self.oracle
        home, n = branch.gpu_type, branch.num_gpus
        room = max((free for t, free in ws.total_free.items() if t != home), default=0)
        if room < 1:
            return  # no other type has an idle GPU: no move exists
        cap = ws.capacity.get(home)
        target_old = oracle.current(job.spec, shape_key(best_locality(home, n, cap))) if cap else 0.0
        # a job holding more GPUs than any other type has idle cannot move
        movers = [j for c, jobs in ws.by_count.get(home, {}).items() if c <= room for j in jobs]
        move = self._best_move(movers, exclude_type=home, target=(job, n, target_old))
        if move is None:
            return
        mark = ws.checkpoint()
        ws.redo(move.changes)
        if move.job == job.job_id:
            candidates.append(Candidate(branch.gain + self._rate(job, move.placement), ws.changes_since(base)))
            if move.relaxed:
                children.append(_Branch(branch.changes, branch.gain, move.gpu_type, move.num_gpus))
        else:
            self._settle(
                job,
                _Branch(ws.changes_since(base), branch.gain + move.gain, home, n),
                base,
                candidates,
                children,
                try_place=True,
            )
        ws.rollback(mark)

    def _best_move(
        self,
        movers: list[JobId],
        exclude_type: str | None,
        grow: bool = False,
        target: tuple[JobView, int, float] | None = None,
    ) -> _Move | None:
        """The best move of ``target`` or one of ``movers`` to another type (never ``exclude_type``).

        ``movers`` hold GPUs; ``target`` (the job being fitted: its view, GPU count and current
        samples/s) holds none and comes first. With ``grow`` a job may also double on its own
        type, up to its sizing target where ``targets`` are given. Candidates are tried in order
        of their gain's upper bound (best locality), so the search stops as soon as no untried
        move can beat the best found. Growing with an ``urgency``, each mover's gains are weighted
        by its urgency (a grow must still gain).
        """
        ws, oracle, cfg = self.ws, self.oracle, self.config
        if grow:
            weigh, unit = self.urgency is not None and cfg.weighted_upgrades, 1.0
        else:
            weigh, unit = self._weigh_fits, self._unit
        free = ws.total_free
        # (-gain bound, mover order, order made (within the mover), job, type, GPU count, current samples/s): in
        # their order, the search tries the highest bound first, ties in mover order, then in the order they were made
        candidates: list[tuple[float, int, int, JobId, str, int, float]] = []
        if target is not None and not cfg.no_type_change:
            view, count, old = target
            for t in ws.types:
                if t == exclude_type or free[t] < count:
                    continue
                ub = oracle.best_rate(view.spec, t, count, ws.capacity[t])
                if ub is not None and (not grow or ub - old > GAIN_EPS):
                    candidates.append((-(ub - old), 0, len(candidates), view.job_id, t, count, old))
        moves = oracle.moves_of(self.views, movers, ws.placement, ws.capacity)
        unsized = self.targets is None  # no sizing targets: a grow is bounded by the config's ceiling alone
        weights: dict[JobId, float] = {}
        append = candidates.append
        for order, (j, (old, count, bounds, upgrades)) in enumerate(zip(movers, moves), start=1):
            w = weights[j] = self._urgency(j) / unit if weigh else 1.0
            for made, (gain, t, num_gpus, doubles) in enumerate(upgrades if grow else bounds):  # growing: gains only
                if free[t] >= count and (
                    grow and (unsized or num_gpus <= self._size_target(j)) if doubles else t != exclude_type
                ):
                    append((-gain * w, order, made, j, t, num_gpus, old))
        heapq.heapify(candidates)  # read lowest first: a search that stops early sorts only what it reads
        best: _Move | None = None
        while candidates:
            neg_ub, _, _, j, t, count, old = heapq.heappop(candidates)
            if best is not None and -neg_ub <= best.gain:
                break
            mark = ws.checkpoint()
            ws.set(j, None)  # a no-op for the target, which holds no GPUs yet
            placement, relaxed = self.place(self.views[j], t, count, cfg.grow_ceiling)  # a grown job may move
            if placement is not None:
                delta = self._rate(self.views[j], placement) - old
                score = delta * weights.get(j, 1.0)
                if (best is None or score > best.gain) and (not grow or delta > GAIN_EPS):
                    best = _Move(score, j, t, count, ws.changes_since(mark), placement, relaxed)
            ws.rollback(mark)
        return best

    # ------------------------------------------------------------ upgrade trial
    def upgrade(self) -> int:
        """Upgrade trial: up to ``max_upgrade_steps`` times apply the best positive-gain grow (x2) or move to a faster idle type."""
        ws, cfg = self.ws, self.config
        steps = 0
        while steps < cfg.max_upgrade_steps:
            free = ws.total_free
            if max(free.values(), default=0) == 0:
                break
            movers = [
                j for t in ws.types for c, jobs in ws.by_count[t].items() if self._may_upgrade(t, c, free) for j in jobs
            ]
            move = self._best_move(movers, exclude_type=None, grow=True)
            if move is None:
                break
            ws.redo(move.changes)
            steps += 1
        return steps

    def _may_upgrade(self, gpu_type: str, count: int, free: Mapping[str, int]) -> bool:
        """Whether a job holding ``count`` GPUs of ``gpu_type`` has any grow or move with enough idle GPUs."""
        cfg = self.config
        if not cfg.no_scaling and 2 * count <= cfg.grow_ceiling and free[gpu_type] >= count:
            return True
        return not cfg.no_type_change and any(f >= count for t, f in free.items() if t != gpu_type)

    # ------------------------------------------------------------ introspective migration
    def improve_locality(self) -> int:
        """Introspective migration: re-place spread (relaxed-locality) jobs at a better locality when one is free."""
        ws = self.ws
        moved = 0
        for j, p in list(ws.placement.items()):
            if p.gpus_per_node >= min(p.num_gpus, ws.capacity[p.gpu_type]):
                continue
            view = self.views[j]
            old = self.held_rate(j, p)
            mark = ws.checkpoint()
            ws.set(j, None)
            placement, _ = self.place(view, p.gpu_type, p.num_gpus, self.config.grow_ceiling)  # it may have grown
            if placement is None or self._rate(view, placement) <= old + GAIN_EPS:
                ws.rollback(mark)
            else:
                moved += 1
        return moved
