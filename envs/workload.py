"""Per-episode workloads: a generator draw or a window of a trace file's split, retargeted to the cluster, at a load.

A file trace is cut by time into three disjoint ranges of its span (train, validation, test;
``EnvConfig.split_fractions``); windows of ``window_jobs`` consecutive jobs never cross a
range boundary, so no job of a test window is ever seen in training. Generator specs draw
from a separate seed stream per split. Arrivals are then rescaled to a load level: an
arrival-rate factor, or an offered load relative to the cluster's GPUs.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from arena_gym.perf import trace_hooks
from arena_gym.protocols import PerfModel
from arena_gym.types import GPU_COUNTS, ClusterSpec, GpuType, JobSpec
from envs.config import SPLITS, EnvConfig
from traces import Trace, resolve_trace
from traces.formats import GENERATORS

log = logging.getLogger(__name__)

#: Prefix of trace specs that name a file inside ``EnvConfig.data_dir``.
DATA_PREFIX = "data:"
_SPLIT_TAG = {name: i for i, name in enumerate(SPLITS)}


def is_generator_spec(spec: str) -> bool:
    """Whether a trace spec names a built-in generator (``synthetic[:...]``) rather than a file."""
    return spec.strip().partition(":")[0] in GENERATORS and not os.path.exists(spec)


def expand_spec(spec: str, data_dir: str) -> str:
    """A trace spec with a leading ``data:`` replaced by ``data_dir``."""
    spec = spec.strip()
    return os.path.join(data_dir, spec[len(DATA_PREFIX) :]) if spec.startswith(DATA_PREFIX) else spec


def trace_label(spec: str) -> str:
    """A short name for a trace spec: the file stem, or the generator name."""
    if is_generator_spec(spec):
        return spec.partition(":")[0]
    path = spec.rpartition("?")[0] if "?" in spec and not os.path.exists(spec) else spec
    return os.path.splitext(os.path.basename(path))[0] or "trace"


@dataclass(frozen=True)
class Workload:
    """The jobs of one episode and where they came from.

    ``label`` names them (trace, split, window or seed, load), ``factor`` is the arrival-rate
    factor applied, ``load`` the level drawn (a factor or an offered load, per ``basis``).
    """

    label: str
    trace: str
    split: str
    window: int
    load: float
    basis: str
    factor: float
    cluster: str
    jobs: tuple[JobSpec, ...]


def split_range(trace: Trace, split: str, fractions: Sequence[float]) -> tuple[int, int]:
    """Job indices ``[a, b)`` of a trace (rebased to 0) submitted in a split's time range.

    The ranges cut ``[0, span]`` at ``fractions[0]`` and ``fractions[0] + fractions[1]`` of the
    span: train ``[0, c1)``, validation ``[c1, c2)``, test ``[c2, span]``; ``all`` is everything.
    """
    jobs = trace.jobs
    if split == "all" or not jobs:
        return 0, len(jobs)
    t0, span = jobs[0].submit_time, trace.span_s
    cuts = (t0 + fractions[0] * span, t0 + (fractions[0] + fractions[1]) * span)
    times = np.array([j.submit_time for j in jobs])
    lo = {"train": -math.inf, "validation": cuts[0], "test": cuts[1]}[split]
    hi = {"train": cuts[0], "validation": cuts[1], "test": math.inf}[split]
    a = int(np.searchsorted(times, lo, side="left"))
    b = int(np.searchsorted(times, hi, side="left"))
    return a, b


def fixed_windows(a: int, b: int, size: int) -> list[tuple[int, int]]:
    """Disjoint consecutive windows ``[start, end)`` of ``size`` jobs in ``[a, b)`` (0 = one window).

    A last partial window is kept when it holds at least half a window (and two jobs).
    """
    if b - a < 1:
        return []
    if size <= 0 or b - a <= size:
        return [(a, b)] if b - a >= max(2, size // 2) or size <= 0 else []
    out = [(s, s + size) for s in range(a, b - size + 1, size)]
    rest = b - out[-1][1]
    if rest >= max(2, size // 2):
        out.append((b - rest, b))
    return out


class Retargeter:
    """Maps job requests onto a cluster: a GPU type it lacks, or a shape it cannot run, becomes the nearest feasible one.

    Candidates: the requested type first (if the cluster has it), then the cluster's types by
    closeness of GPU memory to the requested type; per type the requested count, then larger,
    then smaller powers of two. A job feasible nowhere is dropped.
    """

    def __init__(self, cluster: ClusterSpec, feasible: Callable[..., bool]) -> None:
        self.cluster = cluster
        self.feasible = feasible
        self._memory = {t: _memory_gb(t) for t in cluster.gpu_types}

    def __call__(self, jobs: Sequence[JobSpec]) -> tuple[tuple[JobSpec, ...], int, int]:
        """(retargeted jobs, how many changed, how many dropped)."""
        out, changed, dropped = [], 0, 0
        for job in jobs:
            new = self.retarget(job)
            if new is None:
                dropped += 1
            else:
                changed += new is not job
                out.append(new)
        return tuple(out), changed, dropped

    def retarget(self, job: JobSpec) -> JobSpec | None:
        """The job with a feasible request on the cluster (itself if its request is), or None."""
        want_type, want_n = job.requested_gpu_type, job.requested_gpus or 1
        if want_type is None and job.requested_gpus is None:
            return job
        types = list(self.cluster.gpu_types)
        if want_type in types:
            types.remove(want_type)
            types.insert(0, want_type)
        else:
            memory = _memory_gb(want_type) if want_type else math.nan
            types.sort(key=lambda t: abs(self._memory[t] - memory) if math.isfinite(memory) else 0.0)
        counts = [want_n] + [n for n in GPU_COUNTS if n > want_n] + [n for n in reversed(GPU_COUNTS) if n < want_n]
        for gpu_type in types:
            for n in counts:
                if self.feasible(job.model, job.global_batch, gpu_type, n):
                    if gpu_type == want_type and n == job.requested_gpus:
                        return job
                    return dataclasses.replace(job, requested_gpu_type=GpuType(gpu_type), requested_gpus=n)
        return None


def _memory_gb(gpu_type: str | None) -> float:
    from estimator.hardware import get_gpu

    try:
        return float(get_gpu(gpu_type).memory_gb) if gpu_type else math.nan
    except ValueError:
        return math.nan


def offered_load(jobs: Sequence[JobSpec], cluster: ClusterSpec, iter_time: Callable[..., float]) -> float:
    """Requested GPU-seconds of work per second of the arrival span, over the cluster's GPUs (inf for a zero span)."""
    span = jobs[-1].submit_time - jobs[0].submit_time if jobs else 0.0
    if span <= 0:
        return math.inf
    work = 0.0
    for job in jobs:
        n = job.requested_gpus or 1
        types = [job.requested_gpu_type] if job.requested_gpu_type else list(cluster.gpu_types)
        t = min(iter_time(job.model, job.global_batch, g, n) for g in types)
        if math.isfinite(t):
            work += n * job.iterations * t
    return work / (span * cluster.total_gpus)


class WorkloadSampler:
    """Draws episode workloads from ``config.trace`` (see the module docstring).

    File traces are loaded once (sampled fields, e.g. ITP's, follow ``perf`` on ``cluster``)
    and retargeted to ``cluster``; generator specs are regenerated per draw.
    """

    def __init__(self, config: EnvConfig, cluster: ClusterSpec, perf: PerfModel) -> None:
        self.config = config
        self.cluster = cluster
        self.perf = perf
        self._hooks = trace_hooks(perf, cluster)
        self._retarget = Retargeter(cluster, self._hooks[0])
        self._specs = tuple(expand_spec(s, config.data_dir) for s in config.traces)
        self._files: dict[str, Trace] = {}

    # ------------------------------------------------------------------ public
    def sample(self, key: int, clusters: Sequence[ClusterSpec] = ()) -> Workload:
        """The workload of one episode, deterministic in ``key`` (and the config's seed and split).

        One of the trace specs and one of ``clusters`` (default: the sampler's cluster) are
        drawn uniformly, then a window of the split and a load level.
        """
        choice, trace_seed, pick_seed = self._seeds(key)
        rng = np.random.default_rng(choice)
        spec = self._specs[int(rng.integers(len(self._specs)))]
        cluster = clusters[int(rng.integers(len(clusters)))] if clusters else self.cluster
        return self._draw(spec, trace_seed, pick_seed, self.config.split, cluster, -1)

    def fixed(self, split: str, seeds: Sequence[int] = (), cluster: ClusterSpec | None = None) -> list[Workload]:
        """Deterministic workloads of a split: every disjoint window of each file trace, one per seed of each generator.

        Load levels cycle over the windows of a trace (window ``k`` gets ``load_levels[k % L]``).
        A generator's workload of seed ``s`` is what :meth:`sample` draws for key ``s`` when the
        generator is the only trace spec (the same seed stream).
        """
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; valid: {', '.join(SPLITS)}")
        cluster = cluster or self.cluster
        levels = self.config.load_levels
        out: list[Workload] = []
        for spec in self._specs:
            if is_generator_spec(spec):
                for s in seeds:
                    _, trace_seed, pick_seed = self._seeds(int(s), split)
                    out.append(self._draw(spec, trace_seed, pick_seed, split, cluster, int(s)))
                continue
            trace = self._file(spec)
            windows = fixed_windows(*split_range(trace, split, self.config.split_fractions), self.config.window_jobs)
            for k, (a, b) in enumerate(windows):
                out.append(self._finish(spec, trace, a, b, split, k, levels[k % len(levels)], cluster))
        return out

    def split_ranges(self) -> dict[str, dict[str, tuple[float, float]]]:
        """Per file trace: each split's submit-time range ``(first, last)`` of its jobs (seconds, rebased)."""
        out = {}
        for spec in self._specs:
            if is_generator_spec(spec):
                continue
            trace = self._file(spec)
            ranges = {}
            for split in SPLITS[1:]:
                a, b = split_range(trace, split, self.config.split_fractions)
                if b > a:
                    ranges[split] = (trace.jobs[a].submit_time, trace.jobs[b - 1].submit_time)
            out[trace_label(spec)] = ranges
        return out

    # ------------------------------------------------------------------ internals
    def _seeds(self, key: int, split: str | None = None) -> list[np.random.SeedSequence]:
        tag = _SPLIT_TAG[split or self.config.split]
        return np.random.SeedSequence([self.config.seed, int(key), tag]).spawn(3)

    def _draw(
        self,
        spec: str,
        trace_seed: np.random.SeedSequence,
        pick_seed: np.random.SeedSequence,
        split: str,
        cluster: ClusterSpec,
        window: int,
    ) -> Workload:
        rng = np.random.default_rng(pick_seed)
        generated = is_generator_spec(spec)
        trace = self._generate(spec, int(trace_seed.generate_state(1)[0])) if generated else self._file(spec)
        a, b = (
            (0, len(trace)) if generated or split == "all" else split_range(trace, split, self.config.split_fractions)
        )
        if b <= a:
            raise ValueError(
                f"trace {spec!r} has no jobs in its {split} range (split_fractions {self.config.split_fractions})"
            )
        n = self.config.window_jobs
        if 0 < n < b - a:
            a = int(rng.integers(a, b - n + 1))
            b = a + n
        levels = self.config.load_levels
        level = levels[int(rng.integers(len(levels)))] if len(levels) > 1 else levels[0]
        return self._finish(spec, trace, a, b, split, window, level, cluster)

    def _generate(self, spec: str, seed: int) -> Trace:
        feasible, iter_time = self._hooks
        return resolve_trace(spec, seed=seed, feasible=feasible, iter_time=iter_time)

    def _file(self, spec: str) -> Trace:
        trace = self._files.get(spec)
        if trace is None:
            feasible, iter_time = self._hooks
            trace = resolve_trace(spec, seed=self.config.seed, feasible=feasible, iter_time=iter_time).shift_to_zero()
            jobs, changed, dropped = self._retarget(trace.jobs)
            if changed or dropped:
                log.info(
                    "%s: %d requests retargeted to %s, %d jobs dropped (feasible nowhere)",
                    trace.name,
                    changed,
                    self.cluster.name,
                    dropped,
                )
            if not jobs:
                raise ValueError(f"trace {spec!r} has no job that cluster {self.cluster.name!r} can run")
            trace = dataclasses.replace(trace, jobs=jobs).shift_to_zero()
            self._files[spec] = trace
        return trace

    def _finish(
        self, spec: str, trace: Trace, a: int, b: int, split: str, window: int, level: float, cluster: ClusterSpec
    ) -> Workload:
        jobs = trace.jobs[a:b]
        if is_generator_spec(spec):  # file traces were retargeted once, when loaded
            jobs, _, _ = self._retarget(jobs)
        if not jobs:
            raise ValueError(f"trace {spec!r} gave no jobs for this episode")
        sub = dataclasses.replace(trace, jobs=jobs).shift_to_zero()
        if self.config.load_basis == "offered":
            offered = offered_load(sub.jobs, cluster, self._hooks[1])
            factor = level / offered if math.isfinite(offered) and offered > 0 else 1.0
        else:
            factor = level
        if factor != 1.0:
            sub = sub.scale_load(factor)
        if is_generator_spec(spec):
            where = f"#{window}" if window >= 0 else ""
        else:
            where = f"[{window}]" if window >= 0 else f"[{a}:{b}]"
        basis = "x" if self.config.load_basis == "factor" else "rho"
        label = f"{trace_label(spec)}:{split}{where}@{basis}{level:g}"
        log.debug("workload %s: %d jobs, factor %.3g, span %.0f s", label, len(sub.jobs), factor, sub.span_s)
        return Workload(label, spec, split, window, level, self.config.load_basis, factor, cluster.name, sub.jobs)
