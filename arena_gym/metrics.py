"""Metrics computed once, from the event log of an episode.

Everything here replays ``EpisodeRecord.events``: per-job outcomes (JCT, queueing, restarts),
a step timeline of cluster state, and the flat metrics dictionary written to ``metrics.json``.
The live runner produces the same event log, so the same code scores both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from arena_gym.records import EpisodeRecord, EventKind
from arena_gym.types import JobId

#: At most this many bins when a series is binned: past it bins widen (spans over ~9 years at 300 s).
MAX_BINS = 1_000_000
#: Running sums of the timeline are recomputed exactly every this many events (bounds rounding drift).
_RESUM_EVERY = 1024


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What happened to one submitted job."""

    job_id: JobId
    submit: float
    first_start: float | None
    finish: float | None
    queued_s: float
    starts: int
    reconfigurations: int
    preemptions: int
    last_gpu_type: str
    last_num_gpus: int
    deadline: float | None
    failures: int = 0

    @property
    def jct(self) -> float | None:
        """Completion minus submission time (None if unfinished)."""
        return None if self.finish is None else self.finish - self.submit

    @property
    def deadline_met(self) -> bool | None:
        """Whether it finished by its deadline (None without one)."""
        if self.deadline is None:
            return None
        return self.finish is not None and self.finish <= self.deadline + 1e-9


@dataclass(frozen=True)
class Timeline:
    """Piecewise-constant cluster state: value ``[i]`` holds on ``[time[i], time[i+1])``."""

    time: np.ndarray
    throughput: np.ndarray  # samples/s of running jobs
    alloc_gpus: np.ndarray  # GPUs held (running or reconfiguring)
    running_gpus: np.ndarray  # GPUs of jobs making progress
    running_jobs: np.ndarray
    pending_jobs: np.ndarray
    end: float

    def integral(self, values: np.ndarray) -> float:
        """Time integral of a step series over ``[time[0], end]``."""
        if len(self.time) == 0:
            return 0.0
        widths = np.diff(np.append(self.time, self.end))
        return float(np.dot(values, np.clip(widths, 0.0, None)))

    def binned(self, values: np.ndarray, bin_s: float, max_bins: int = MAX_BINS) -> tuple[np.ndarray, np.ndarray]:
        """Time-average of a step series in consecutive bins (bin starts, means).

        Bins are ``bin_s`` seconds wide, widened to ``span / max_bins`` when the span would need
        more than ``max_bins`` of them, so memory stays bounded whatever the span.
        """
        if len(self.time) == 0 or self.end <= self.time[0]:
            return np.zeros(0), np.zeros(0)
        start, end = float(self.time[0]), self.end
        width = bin_width(end - start, bin_s, max_bins)
        n = min(max_bins, max(1, math.ceil((end - start) / width)))
        edges = np.minimum(start + width * np.arange(n + 1), end)
        edges[-1] = end
        # cumulative integral at each step boundary, then interpolate at bin edges
        bounds = np.append(self.time, end)
        cum = np.concatenate([[0.0], np.cumsum(values * np.diff(bounds))])
        at_edges = np.interp(edges, bounds, cum)
        widths = np.diff(edges)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(widths > 0, np.diff(at_edges) / widths, 0.0)
        return edges[:-1], means


def bin_width(span: float, bin_s: float, max_bins: int = MAX_BINS) -> float:
    """The bin width used for ``span`` seconds: ``bin_s``, or wider so that at most ``max_bins`` bins cover it."""
    if not (bin_s > 0 and math.isfinite(bin_s)) or max_bins < 1:
        raise ValueError(f"need a finite bin_s > 0 and max_bins >= 1, got {bin_s}, {max_bins}")
    return max(bin_s, span / max_bins)


def job_outcomes(record: EpisodeRecord) -> list[JobOutcome]:
    """Per-job outcomes of every submitted job, in submission order.

    A FAIL (processes relaunched on the same GPUs) counts as a failure, not a reconfiguration;
    PROGRESS (a measured rate) changes no outcome.
    """
    submit_kind, allocate, preempt, fail, finish = (
        EventKind.SUBMIT,
        EventKind.ALLOCATE,
        EventKind.PREEMPT,
        EventKind.FAIL,
        EventKind.FINISH,
    )
    # per job: [submit, first start, finish, queued, queued since, starts, preemptions, failures, type, GPUs]
    state: dict[JobId, list] = {}
    for ev in record.events:
        kind = ev.kind
        if kind is submit_kind:
            state[ev.job_id] = [ev.time, None, None, 0.0, ev.time, 0, 0, 0, "", 0]
            continue
        s = state.get(ev.job_id)
        assert s is not None, f"event for unsubmitted job {ev.job_id}"
        if kind is allocate:
            if s[4] is not None:
                s[3] += ev.time - s[4]
                s[4] = None
            if s[1] is None:
                s[1] = ev.time
            s[5] += 1
            s[8], s[9] = ev.gpu_type, ev.num_gpus
        elif kind is preempt:
            s[6] += 1
            s[4] = ev.time
        elif kind is fail:
            s[7] += 1
        elif kind is finish:
            s[2] = ev.time
    deadlines = {j.job_id: j.deadline for j in record.jobs}
    end = record.end_time
    return [
        JobOutcome(
            job_id,
            submit,
            first,
            done,
            queued + (end - since if since is not None else 0.0),
            starts,
            max(0, starts - 1),
            preempts,
            gpu_type,
            n,
            deadlines.get(job_id),
            fails,
        )
        for job_id, (submit, first, done, queued, since, starts, preempts, fails, gpu_type, n) in state.items()
    ]


def timeline(record: EpisodeRecord) -> Timeline:
    """The event log as a step timeline (one point per distinct event time).

    A job makes progress (counts in throughput, running GPUs and running jobs) from its RUN to
    its next ALLOCATE, FAIL, PREEMPT or FINISH; PROGRESS events update its rate. Sums are kept
    incrementally (linear in the events) and recomputed exactly every so often.
    """
    submit, run, progress, allocate, fail, preempt = (
        EventKind.SUBMIT,
        EventKind.RUN,
        EventKind.PROGRESS,
        EventKind.ALLOCATE,
        EventKind.FAIL,
        EventKind.PREEMPT,
    )
    rate: dict[JobId, float] = {}  # samples/s of jobs making progress
    gpus: dict[JobId, int] = {}  # GPUs held
    pending: set[JobId] = set()
    throughput, held, running_gpus = 0.0, 0, 0
    times: list[float] = []
    rows: list[tuple[float, int, int, int, int]] = []
    last = math.nan  # the time of the last row (NaN: none yet)
    for i, ev in enumerate(record.events):
        j, kind = ev.job_id, ev.kind
        if kind is submit:
            pending.add(j)
        elif kind is run or kind is progress:
            if j in gpus and (kind is run or j in rate):
                old = rate.get(j)
                if old is None:
                    running_gpus += gpus[j]
                else:
                    throughput -= old
                rate[j] = ev.samples_per_s
                throughput += ev.samples_per_s
        else:  # ALLOCATE, FAIL, PREEMPT, FINISH: the job stops making progress
            old = rate.pop(j, None)
            if old is not None:
                throughput -= old
                running_gpus -= gpus[j]
            if kind is allocate:
                pending.discard(j)
                held += ev.num_gpus - gpus.get(j, 0)
                gpus[j] = ev.num_gpus
            elif kind is not fail:
                held -= gpus.pop(j, 0)
                if kind is preempt:
                    pending.add(j)
        if not rate or i % _RESUM_EVERY == 0:
            throughput = math.fsum(rate.values())
        row = (throughput, held, running_gpus, len(rate), len(pending))
        if ev.time == last:
            rows[-1] = row
        else:
            last = ev.time
            times.append(last)
            rows.append(row)
    arr = np.array(rows, dtype=float).reshape(-1, 5)
    return Timeline(
        np.array(times, dtype=float),
        arr[:, 0],
        arr[:, 1],
        arr[:, 2],
        arr[:, 3],
        arr[:, 4],
        max(record.end_time, times[-1] if times else record.end_time),
    )


@dataclass(frozen=True)
class LogReading:
    """An episode's event log read once (outcomes and timeline): what metrics, result files and plots all use."""

    record: EpisodeRecord
    outcomes: list[JobOutcome]
    timeline: Timeline


def read_log(record: EpisodeRecord) -> LogReading:
    """Read ``record``'s event log once (:func:`job_outcomes` and :func:`timeline`) for several readers."""
    return LogReading(record, job_outcomes(record), timeline(record))


def read_once(record: EpisodeRecord, done: LogReading | None) -> LogReading:
    """``done`` if it is the reading of this very record, else a fresh :func:`read_log`."""
    return done if done is not None and done.record is record else read_log(record)


def percentile(ordered: np.ndarray, q: float) -> float:
    """``numpy.percentile(values, q)`` (linear method, bit for bit) of ``ordered``, the values sorted.

    NaN for no values or when any is NaN. (``numpy.percentile`` itself imports ``numpy.ma``,
    a sizeable share of a short command's start-up.)
    """
    n = len(ordered)
    if n == 0 or math.isnan(ordered[-1]):
        return math.nan
    index = (n - 1) * (q / 100)
    if index >= n - 1:
        return float(ordered[-1])
    below = math.floor(index)
    gamma = index - below
    a, b = float(ordered[below]), float(ordered[below + 1])
    diff = b - a
    # numpy's _lerp: from the nearer end, so that the ends are exact
    return b - diff * (1 - gamma) if gamma >= 0.5 else a + diff * gamma


def finished_jcts(outcomes: Sequence[JobOutcome]) -> list[float]:
    """The JCTs of the jobs that finished, in outcome order."""
    return [o.jct for o in outcomes if o.jct is not None]


def padded_mean_jcts(jcts: Mapping[str, Sequence[float]], reference: str = "max") -> dict[str, float]:
    """The padded average JCT of several policies on one workload (the Arena artifact's rule).

    Each policy's finished JCTs are padded with the largest JCT any policy reached, up to the
    ``reference`` policy's finished count (``"max"``: the largest finished count), then
    averaged; nan for a policy with nothing to average. ValueError for an unknown reference.
    """
    if reference != "max" and reference not in jcts:
        raise ValueError(f"padding reference policy {reference!r} is not among {', '.join(jcts)} (or 'max')")
    worst = max((max(v) for v in jcts.values() if v), default=math.nan)
    target = max((len(v) for v in jcts.values()), default=0) if reference == "max" else len(jcts[reference])
    out = {}
    for label, values in jcts.items():
        padded = [*values, *[worst] * max(0, target - len(values))]
        out[label] = float(np.mean(padded)) if padded else math.nan
    return out


def compute_metrics(record: EpisodeRecord, bin_s: float = 300.0, done: LogReading | None = None) -> dict[str, float]:
    """The flat metrics of an episode (keys carry units: ``_s``, samples/s for throughput).

    ``avg_throughput`` is the time average of the cluster's samples/s over the time at least one job
    makes progress (the same rule in simulated and live runs, whatever their scale); ``avg_throughput_span``
    averages over the whole span, idle time included.

    ``done`` is the record's :func:`read_log` when the caller has it already.
    """
    rep = read_once(record, done)
    outcomes, tl = rep.outcomes, rep.timeline
    jcts = np.array(finished_jcts(outcomes), dtype=float)
    ordered = np.sort(jcts)
    queues = np.array([o.queued_s for o in outcomes], dtype=float)
    span = max(tl.end - record.start_time, 0.0)
    total_gpus = record.cluster.total_gpus
    _, binned = tl.binned(tl.throughput, bin_s)
    busy_s = tl.integral((tl.running_jobs > 0).astype(float))
    finishes = [o.finish for o in outcomes if o.finish is not None]
    all_done = len(finishes) == len(record.jobs)
    with_deadline = [o for o in outcomes if o.deadline is not None]
    return {
        "jobs_total": float(len(record.jobs)),
        "jobs_submitted": float(len(outcomes)),
        "jobs_finished": float(len(jcts)),
        "avg_jct_s": float(jcts.mean()) if len(jcts) else math.nan,
        "median_jct_s": percentile(ordered, 50),
        "p95_jct_s": percentile(ordered, 95),
        "p99_jct_s": percentile(ordered, 99),
        "avg_queue_s": float(queues.mean()) if len(queues) else math.nan,
        "makespan_s": (max(finishes) - record.start_time) if all_done and finishes else span,
        "avg_throughput": tl.integral(tl.throughput) / busy_s if busy_s > 0 else 0.0,
        "peak_throughput": float(binned.max()) if len(binned) else 0.0,
        "avg_throughput_span": tl.integral(tl.throughput) / span if span > 0 else 0.0,
        "gpu_alloc_ratio": tl.integral(tl.alloc_gpus) / (span * total_gpus) if span > 0 else 0.0,
        "gpu_util": tl.integral(tl.running_gpus) / (span * total_gpus) if span > 0 else 0.0,
        "reconfigurations": float(sum(o.reconfigurations for o in outcomes)),
        "preemptions": float(sum(o.preemptions for o in outcomes)),
        "failures": float(sum(o.failures for o in outcomes)),
        "deadline_met_ratio": (sum(1 for o in with_deadline if o.deadline_met) / len(with_deadline))
        if with_deadline
        else math.nan,
        "end_time_s": record.end_time - record.start_time,
        "decisions": float(record.decisions),
        "sched_ms_per_decision": 1000.0 * record.decide_wall_s / record.decisions if record.decisions else 0.0,
    }


#: Keys that measure wall-clock time rather than the simulated outcome (excluded from determinism checks).
WALL_CLOCK_KEYS = frozenset({"sched_ms_per_decision"})
