"""DecisionRound: one call of Arena's scheduler, from a snapshot to a Decision (docs/arena.md §5.2, §5.5)."""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence

from agents.arena.config import ArenaConfig
from agents.arena.oracle import ThroughputOracle
from agents.arena.search import ArenaSearch
from agents.common import Workspace, order_key, requested
from arena_gym.placement import allocation
from arena_gym.types import Decision, JobId, JobView, Snapshot

log = logging.getLogger(__name__)


class FifoMerge:
    """Several queues of views walked as one, in submission order; a dropped queue is not read again."""

    def __init__(self, queues: Mapping[Hashable, Iterable[JobView]]) -> None:
        self._heap: list[tuple[tuple[float, str], int, Hashable, JobView, Iterator[JobView]]] = []
        self._dropped: set[Hashable] = set()
        for seq, (name, views) in enumerate(queues.items()):
            it = iter(views)
            first = next(it, None)
            if first is not None:
                self._heap.append((order_key(first), seq, name, first, it))
        heapq.heapify(self._heap)

    def drop(self, name: Hashable) -> None:
        """Stop reading queue ``name`` (the view just returned from it was its last)."""
        self._dropped.add(name)

    def __iter__(self) -> Iterator[JobView]:
        heap = self._heap
        while heap:
            _, seq, name, view, it = heapq.heappop(heap)
            yield view
            if name not in self._dropped:
                nxt = next(it, None)
                if nxt is not None:
                    heapq.heappush(heap, (order_key(nxt), seq, name, nxt, it))


class DecisionRound:
    """Arena's per-round procedure on a private workspace.

    The decision queue holds waiting jobs and opportunism jobs (started ahead of a waiting job
    that comes first, a "blocker") in queue order; it is rebuilt from the snapshot plus the
    set of opportunism job ids the policy carries between calls. The queue order is submission
    order (Arena's FIFO), or ``order``'s keys when given (lowest first: a priority order);
    ``urgency`` weighs the upgrade trial's and the downgrade search's gains
    (``ArenaConfig.weighted_upgrades``, ``weighted_fits``); ``targets`` bound the GPUs the upgrade
    trial may grow each job to (:meth:`agents.arena.priority.Priority.targets`).
    """

    def __init__(
        self,
        config: ArenaConfig,
        snapshot: Snapshot,
        oracle: ThroughputOracle,
        opportunism: Iterable[JobId],
        runnable: dict[JobId, bool],
        order: Callable[[JobView], tuple] | None = None,
        urgency: Callable[[JobView], float] | None = None,
        targets: Callable[[JobView], int] | None = None,
    ) -> None:
        self.config = config
        self.snapshot = snapshot
        self.key = order or order_key
        self.fifo = order is None
        self.ws = Workspace(snapshot, index=True)  # the searches walk the indexes in order
        self.views = self.ws.views
        self.search = ArenaSearch(config, self.ws, oracle, self.views, urgency, targets)
        self.opportunism: dict[JobId, None] = dict.fromkeys(opportunism)
        self.preempted: dict[JobId, None] = {}
        self._runnable = runnable
        self._keys: dict[JobId, tuple] = {}  # queue-order keys read so far

    def _order(self, job: JobId) -> tuple:
        """The job's queue-order key (memoised for the round)."""
        key = self._keys.get(job)
        if key is None:
            key = self._keys[job] = self.key(self.views[job])
        return key

    def _in_order(self, views: Iterable[JobView]) -> Iterable[JobView]:
        """``views`` (in submission order) in queue order."""
        return views if self.fifo else sorted(views, key=self.key)

    def runnable(self, job: JobId) -> bool:
        """Whether the job could ever start (memoised; with deadlines only "never" is kept across calls)."""
        known = self._runnable.get(job)
        if known is None:
            view = self.views[job]
            known = self.search.runnable(view, *requested(view.spec, self.snapshot))
            if not (known and self.config.deadline_aware):
                self._runnable[job] = known
        return known

    # ------------------------------------------------------------ round steps
    def after_departures(self, upgrade: bool, arrivals: set[JobId]) -> None:
        """``optimize_running_jobs``: introspective migration, pending restart trial, optional upgrade trial."""
        moved = self.search.improve_locality()
        self.restart_pending(exclude=arrivals)
        steps = self.search.upgrade() if upgrade else 0
        log.debug("t=%.0f departures: %d locality move(s), %d upgrade step(s)", self.snapshot.now, moved, steps)

    def admit(self, arrivals: Iterable[JobView]) -> None:
        """``fit_new_jobs``: fit each new job in queue order, tag backfills, then the upgrade trial.

        With ``preempt_lower`` a new job that does not fit may take the GPUs of running jobs after it.
        """
        for view in sorted(arrivals, key=self.key):
            gpu_type, n = requested(view.spec, self.snapshot)
            if not self.runnable(view.job_id) or (
                self.config.no_opportunism and self._waits_before(view.job_id, gpu_type)
            ):
                continue
            started = self.search.fit(view, gpu_type, n) or (
                self.config.preempt_lower and self._fit_over_opportunists(view, gpu_type, n)
            )
            if started and self._waits_before(view.job_id):
                self.opportunism[view.job_id] = None
        steps = self.search.upgrade()
        log.debug("t=%.0f arrivals: %d upgrade step(s)", self.snapshot.now, steps)

    def restart_pending(self, exclude: set[JobId]) -> None:
        """Pending restart trial: walk the decision queue in FIFO order and start what fits.

        A blocker that does not fit on its own may take the GPUs of opportunism jobs behind it;
        those whose GPUs it took are preempted. A (model, batch) that failed once is skipped
        for the rest of the trial. At most ``max_restart_trials`` fits are tried. Jobs that can
        never run (no feasible configuration) are passed over and block nobody.
        """
        failed: set[tuple[str, str, int]] = set()
        blocked_types: set[str] = set()
        waiting_ahead = False
        trials = 0
        pending = self.snapshot.pending
        extra = sorted(
            (self.views[o] for o in self.opportunism if o in exclude or pending.get(o) is None), key=self.key
        )
        queue: Iterable[JobView]
        if not self.fifo:  # a priority order: every waiting job and the opportunism ones, sorted
            queue = sorted((*(v for v in pending if v.job_id not in exclude), *extra), key=self.key)
        elif self.config.no_opportunism:  # every job passed over blocks its type: walk them all
            queue = FifoMerge({None: (v for v in pending if v.job_id not in exclude), "extra": extra})
        else:  # a failed configuration's jobs would only be passed over: the walk drops them at once
            groups = {
                config: (v for v in views if v.job_id not in exclude) for config, views in pending.by_config().items()
            }
            queue = FifoMerge({**groups, "extra": extra})
        for view in queue:
            if trials >= self.config.max_restart_trials:
                break
            job = view.job_id
            gpu_type, n = requested(view.spec, self.snapshot)
            if job in self.ws.placement or not self.runnable(job):
                continue  # a running opportunism job, or one that can never start
            config = (view.spec.model.family, view.spec.model.size, view.spec.global_batch)
            skip = job in self.preempted or config in failed
            if skip or (self.config.no_opportunism and gpu_type in blocked_types):
                waiting_ahead = True
                blocked_types.add(gpu_type)
                continue
            trials += 1
            if self.search.fit(view, gpu_type, n) or self._fit_over_opportunists(view, gpu_type, n):
                if waiting_ahead:
                    self.opportunism[job] = None
            else:
                failed.add(config)
                if isinstance(queue, FifoMerge):
                    queue.drop((view.spec.model, view.spec.global_batch))
                blocked_types.add(gpu_type)
                waiting_ahead = True

    def _fit_over_opportunists(self, view: JobView, gpu_type: str, n: int) -> bool:
        """Fit a blocker counting the GPUs of the jobs behind it as free; preempt those it takes.

        The jobs behind are the opportunism jobs that come after it in queue order, or, with
        ``preempt_lower``, every running job that does.
        """
        ws = self.ws
        me = self.key(view)
        pool = ws.placement if self.config.preempt_lower else self.opportunism
        behind = sorted((o for o in pool if o in ws.placement and self._order(o) > me), key=self._order)
        if not behind:
            return False
        mark = ws.checkpoint()
        held = {o: ws.placement[o] for o in behind}
        for o in behind:
            ws.set(o, None)
        if not self.search.fit(view, gpu_type, n):
            ws.rollback(mark)
            return False
        for o in behind:
            if ws.fits(held[o]):
                ws.set(o, held[o])
            else:
                self.preempted[o] = None
                self.opportunism.pop(o, None)
        return True

    # ------------------------------------------------------------ queue helpers
    def _waits_before(self, job: JobId, gpu_type: str | None = None) -> bool:
        """Whether a runnable job before ``job`` in queue order still waits (requesting ``gpu_type``, if given)."""
        me = self._order(job)
        candidates = (
            self.preempted
            if gpu_type is None
            else (j for j in self.preempted if requested(self.views[j].spec, self.snapshot)[0] == gpu_type)
        )
        if any(self._order(j) < me and self.runnable(j) for j in candidates):
            return True
        first = self._first_waiting(self._queued(gpu_type), before=me)
        return first is not None

    def _queued(self, gpu_type: str | None) -> Iterable[JobView]:
        """Pending jobs in queue order (those whose request resolves to ``gpu_type``, if given)."""
        pending = self.snapshot.pending
        if gpu_type is None:
            return self._in_order(pending)
        if gpu_type != self.snapshot.cluster.gpu_types[0]:
            return self._in_order(pending.requesting(gpu_type))
        # a job without a requested type counts as requesting the cluster's first type
        merged = heapq.merge(pending.requesting(gpu_type), pending.requesting(None), key=order_key)
        return self._in_order(merged)

    def _first_waiting(self, queue: Iterable[JobView], before: tuple | None = None) -> tuple | None:
        """Queue-order key of the first runnable job of ``queue`` (in queue order) not placed in this round (before ``before``)."""
        placed = self.ws.placement
        for view in queue:
            key = self.key(view)
            if before is not None and key >= before:
                return None
            if view.job_id not in placed and self.runnable(view.job_id):
                return key
        return None

    # ------------------------------------------------------------ decision
    def decision(self) -> Decision:
        """The Decision for the snapshot: changed allocations (complete) and preemptions."""
        self._keep_placements()
        waiting: Sequence[tuple] = [self._order(j) for j in self.preempted if self.runnable(j)]
        first_queued = self._first_waiting(self._in_order(self.snapshot.pending))
        first_waiting = min([*waiting, first_queued] if first_queued is not None else waiting, default=None)
        self.opportunism = {
            o: None
            for o in self.opportunism
            if o in self.ws.placement and first_waiting is not None and self._order(o) > first_waiting
        }
        placement, perf = self.ws.placement, self.snapshot.perf
        changed = sorted(self.ws.changed_jobs(), key=self._order)
        allocations = tuple((j, allocation(perf, self.views[j].spec, placement[j])) for j in changed if j in placement)
        return Decision(allocations=allocations, preemptions=tuple(j for j in changed if j not in placement))

    def _keep_placements(self) -> None:
        """Eliminate unnecessary suspend-resume: a job whose shape is unchanged returns to its old nodes if they are free."""
        ws = self.ws
        for job in ws.changed_jobs():  # running jobs first, in the snapshot's order
            old, new = ws.original.get(job), ws.placement.get(job)
            if old is None or new is None or new.shape != old.shape:
                continue
            mark = ws.checkpoint()
            ws.set(job, None)
            if ws.fits(old):
                ws.set(job, old)
            else:
                ws.rollback(mark)
