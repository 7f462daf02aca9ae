"""Fitting the packaged beliefs, on data the evaluation never uses.

- ``real``: the train split of the five real traces of ``ArenaGym/Testbed64Real-v1``, as the
  env sees them (its :class:`envs.WorkloadSampler`: retargeted to testbed-64, cut by time).
  Every (unit, levels) candidate is fitted on the train split and scored by the held-out
  log-likelihood of the validation split's total iterations; the best one is kept, and the
  scores of all are recorded in its ``selection``. The arrival-rate prior is fitted on the
  env's training windows (50 jobs at its offered loads), the job mix on the train jobs.
- ``synthetic``: the generator of ``ArenaGym/Testbed64-v1``. Total work is its own log-normal
  of iterations (its parameters read from the env's trace spec); the job mix and the rate
  prior come from workloads of the train split's seed stream (never the test seeds).

A group's kernels sit on its training jobs' log sizes binned to :data:`BIN_WIDTH`, with
Silverman's bandwidth (at least :data:`MIN_BANDWIDTH`). Everything is deterministic, so a refit
reproduces the packaged file (its code version aside).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
import typing
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

from agents.belief.arrivals import ArrivalModel, JobAttributes
from agents.belief.kernels import POOLED, WorkGroup
from agents.belief.model import UNITS, Candidate, Provenance, WorkBelief
from agents.belief.references import ReferenceTable, unit_scale
from arena_gym import REAL_DATA_DIR
from arena_gym.outputs import code_version
from arena_gym.perf import trace_hooks
from arena_gym.types import GPU_COUNTS, ClusterSpec, GpuType, JobSpec, ModelRef, PerfModel
from envs import ENV_CONFIGS, EnvConfig, Workload, WorkloadSampler
from envs.scenario import env_scenario
from traces.options import coerce_options, parse_options
from traces.recipe import family_batches, family_sizes
from traces.synthetic import SyntheticConfig

log = logging.getLogger(__name__)

REAL_ENV = "ArenaGym/Testbed64Real-v1"
SYNTHETIC_ENV = "ArenaGym/Testbed64-v1"
#: Kernel centres are log sizes rounded to this width.
BIN_WIDTH = 0.02
#: Smallest kernel bandwidth (log units).
MIN_BANDWIDTH = 0.05
#: Fewest training jobs of a configuration or model group (smaller ones fall back a level).
MIN_GROUP_JOBS = 30
#: The group chains the real fit chooses from (finest first; the pooled group closes each).
LEVEL_CHOICES: tuple[tuple[str, ...], ...] = ((), ("model",), ("configuration",), ("configuration", "model"))
#: Seeds of the synthetic generator's train (mix, rate prior) and validation (score) streams.
SYNTHETIC_TRAIN_SEEDS: tuple[int, ...] = tuple(range(200))
SYNTHETIC_VALIDATION_SEEDS: tuple[int, ...] = tuple(range(20))


def _round(value: float, digits: int = 9) -> float:
    return float(f"{value:.{digits}g}")


def _setup(env_id: str, **changes: typing.Any) -> tuple[EnvConfig, ClusterSpec, PerfModel]:
    config = ENV_CONFIGS[env_id].replace(**changes)
    scenario = env_scenario(config)
    return config, scenario.cluster, scenario.truth


def reference_table(cluster: ClusterSpec, perf: PerfModel, jobs: Sequence[JobSpec] = ()) -> ReferenceTable:
    """Reference iteration times of every recipe configuration (and of ``jobs``') that ``cluster`` can run.

    The time of (model, batch, type, count) is ``perf``'s at the best locality of the count.
    """
    _, iter_time = trace_hooks(perf, cluster)
    configs = {
        (ModelRef(family, size), batch, GpuType(t), n)
        for family, sizes in family_sizes().items()
        for size in sizes
        for batch in family_batches()[family]
        for t in cluster.gpu_types
        for n in GPU_COUNTS
    }
    configs |= {
        (j.model, j.global_batch, j.requested_gpu_type, j.requested_gpus)
        for j in jobs
        if j.requested_gpu_type is not None and j.requested_gpus is not None
    }
    entries = []
    for model, batch, t, n in sorted(configs, key=lambda c: (c[0].name, c[1], c[2], c[3])):
        seconds = iter_time(model, batch, t, n)
        if math.isfinite(seconds):
            entries.append(JobAttributes(model, batch, t, n, _round(seconds)))
    return ReferenceTable(tuple(entries))


def kernel_group(level: str, key: tuple[str | int, ...], log_work: np.ndarray) -> WorkGroup:
    """A group's kernel mixture: centres on the binned log sizes, Silverman's bandwidth."""
    n = len(log_work)
    q75, q25 = np.percentile(log_work, [75, 25])
    spread = min(float(log_work.std()), (q75 - q25) / 1.34) or float(log_work.std())
    bandwidth = max(MIN_BANDWIDTH, round(0.9 * spread * n**-0.2, 6))
    bins, counts = np.unique(np.rint(log_work / BIN_WIDTH).astype(np.int64), return_counts=True)
    centres = tuple(round(float(b) * BIN_WIDTH, 6) for b in bins)
    return WorkGroup(level, key, n, bandwidth, centres, tuple(float(c) for c in counts))


def _group_key(level: str, a: JobAttributes) -> tuple[str | int, ...] | None:
    if level == "model":
        return (a.model.name,)
    if a.gpu_type is None or a.num_gpus is None:
        return None
    return (a.model.name, a.global_batch, a.gpu_type, a.num_gpus)


def fit_groups(
    jobs: Sequence[JobSpec],
    references: ReferenceTable,
    unit: str,
    levels: tuple[str, ...],
    min_jobs: int = MIN_GROUP_JOBS,
) -> tuple[WorkGroup, ...]:
    """The groups of ``levels`` with at least ``min_jobs`` jobs each, then the pooled group, fitted on ``jobs``."""
    attrs = [JobAttributes.of(j) for j in jobs]
    scales = [1.0 if unit == "iterations" else unit_scale(unit, references.time(a), a.num_gpus) for a in attrs]
    log_work = np.log(np.array([j.iterations for j in jobs], dtype=float) * np.array(scales))
    groups = []
    for level in levels:
        members: dict[tuple[str | int, ...], list[int]] = collections.defaultdict(list)
        for i, a in enumerate(attrs):
            key = _group_key(level, a)
            if key is not None:
                members[key].append(i)
        for key in sorted(members, key=lambda k: tuple(map(str, k))):
            if len(members[key]) >= min_jobs:
                groups.append(kernel_group(level, key, log_work[members[key]]))
    groups.append(kernel_group(POOLED, (), log_work))
    return tuple(groups)


def job_mix(jobs: Sequence[JobSpec]) -> tuple[tuple[JobAttributes, ...], tuple[float, ...]]:
    """The jobs' attributes and how often each occurs, in a fixed order."""
    counts = collections.Counter(JobAttributes.of(j) for j in jobs)
    order = sorted(counts, key=lambda a: (a.model.name, a.global_batch, a.gpu_type or "", a.num_gpus or 0))
    return tuple(order), tuple(float(counts[a]) for a in order)


def rate_prior(workloads: Sequence[Workload]) -> tuple[float, float]:
    """The Gamma (shape, rate in seconds) maximum-likelihood fit of the windows' arrival rates."""
    per_h = []
    for w in workloads:
        span = w.jobs[-1].submit_time - w.jobs[0].submit_time
        if span > 0:
            per_h.append(3600.0 * (len(w.jobs) - 1) / span)
    if len(per_h) < 2:
        raise ValueError(f"need at least two windows with a positive span to fit a rate prior, got {len(per_h)}")
    shape, _, scale = stats.gamma.fit(np.array(per_h), floc=0.0)
    return _round(float(shape), 6), _round(3600.0 / float(scale), 6)


def _arrivals(workloads: Sequence[Workload], jobs: Sequence[JobSpec]) -> ArrivalModel:
    shape, rate = rate_prior(workloads)
    mix, weights = job_mix(jobs)
    return ArrivalModel(shape, rate, len(workloads), mix, weights)


def _provenance(env_id: str, config: EnvConfig, cluster: ClusterSpec, jobs: int, source: str) -> Provenance:
    perf = config.perf if isinstance(config.perf, str) else config.perf.name
    return Provenance(env_id, config.traces, "train", cluster.name, perf, jobs, source, code_version())


def _whole_splits(config: EnvConfig, cluster: ClusterSpec, perf: PerfModel, split: str) -> list[JobSpec]:
    """Every job of a split of the config's file traces (one window per trace, submit times as recorded)."""
    whole = config.replace(window_jobs=0, load_basis="factor", load_levels=(1.0,))
    return [j for w in WorkloadSampler(whole, cluster, perf).fixed(split) for j in w.jobs]


def score(belief: WorkBelief, jobs: Sequence[JobSpec]) -> np.ndarray:
    """Per-job held-out log-likelihood of the jobs' total iterations under ``belief``."""
    return np.asarray(belief.log_density(jobs, [j.iterations for j in jobs]))


def fit_real(data_dir: str = REAL_DATA_DIR, progress: Callable[[str], None] | None = None) -> WorkBelief:
    """The real-trace belief: candidates fitted on the train split, the best on the validation split kept."""
    config, cluster, perf = _setup(REAL_ENV, data_dir=data_dir)
    train = _whole_splits(config, cluster, perf, "train")
    validation = _whole_splits(config, cluster, perf, "validation")
    references = reference_table(cluster, perf, train + validation)
    windows = WorkloadSampler(config, cluster, perf).fixed("train")
    arrivals = _arrivals(windows, train)
    provenance = _provenance(
        REAL_ENV,
        config,
        cluster,
        len(train),
        f"train split (split fractions {'/'.join(f'{f:g}' for f in config.split_fractions)}) retargeted to "
        f"{cluster.name}; unit and levels chosen by held-out log-likelihood on the validation split; rate prior "
        f"from the env's {len(windows)} training windows",
    )
    fitted = []
    for unit in UNITS:
        for levels in LEVEL_CHOICES:
            groups = fit_groups(train, references, unit, levels)
            belief = WorkBelief("real", unit, levels, MIN_GROUP_JOBS, groups, references, arrivals, provenance)
            fitted.append((belief, score(belief, validation)))
            if progress is not None:
                progress(f"{unit} {'>'.join(levels) or POOLED}: {len(groups)} groups, {fitted[-1][1].mean():.4f}")
    best, best_ll = max(fitted, key=lambda f: float(f[1].mean()))
    n = len(validation)
    selection = tuple(
        sorted(
            (
                Candidate(
                    b.unit,
                    b.levels,
                    _round(float(ll.mean()), 6),
                    _round(float((ll - best_ll).std() / math.sqrt(n)), 3),
                    n,
                )
                for b, ll in fitted
            ),
            key=lambda c: -c.loglik,
        )
    )
    log.info("real belief: unit %s, levels %s, %d groups", best.unit, best.levels, len(best.groups))
    return dataclasses.replace(best, selection=selection)


def generator_config(spec: str) -> SyntheticConfig:
    """The :class:`SyntheticConfig` of a ``synthetic:...`` trace spec."""
    name, _, text = spec.partition(":")
    if name != "synthetic":
        raise ValueError(f"not a synthetic generator spec: {spec!r}")
    values = coerce_options(parse_options(text, spec), typing.get_type_hints(SyntheticConfig), spec, ())
    return SyntheticConfig(**values)  # type: ignore[arg-type]


def fit_synthetic() -> WorkBelief:
    """The synthetic belief: the generator's own log-normal of iterations, its mix and rates from train seeds."""
    config, cluster, perf = _setup(SYNTHETIC_ENV, split="train")
    (spec,) = config.traces
    generator = generator_config(spec)
    sampler = WorkloadSampler(config, cluster, perf)
    windows = sampler.fixed("train", SYNTHETIC_TRAIN_SEEDS)
    train = [j for w in windows for j in w.jobs]
    validation = [j for w in sampler.fixed("validation", SYNTHETIC_VALIDATION_SEEDS) for j in w.jobs]
    references = reference_table(cluster, perf, train)
    group = WorkGroup(
        POOLED, (), len(train), generator.iter_log_sigma, (generator.iter_log_mean,), (1.0,)
    )  # the generator's distribution, not a fit
    provenance = _provenance(
        SYNTHETIC_ENV,
        config,
        cluster,
        len(train),
        f"total iterations: the generator's log-normal (log mean {generator.iter_log_mean:g}, log sigma "
        f"{generator.iter_log_sigma:g}; its clip to [{generator.iter_min}, {generator.iter_max}] ignored); "
        f"mix and rate prior: seeds {SYNTHETIC_TRAIN_SEEDS[0]}-{SYNTHETIC_TRAIN_SEEDS[-1]} of the train split's "
        "seed stream",
    )
    belief = WorkBelief(
        "synthetic", "iterations", (), MIN_GROUP_JOBS, (group,), references, _arrivals(windows, train), provenance
    )
    ll = score(belief, validation)
    return dataclasses.replace(
        belief, selection=(Candidate("iterations", (), _round(float(ll.mean()), 6), 0.0, len(validation)),)
    )


def fit_belief(kind: str, data_dir: str = REAL_DATA_DIR) -> WorkBelief:
    """The belief of a kind (``real`` needs ``data_dir``)."""
    if kind == "real":
        return fit_real(data_dir)
    if kind == "synthetic":
        return fit_synthetic()
    raise ValueError(f"unknown belief kind {kind!r}; valid: real, synthetic")
