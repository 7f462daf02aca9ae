"""Suites: named, fixed lists of workloads every policy is scored on (trace x cluster x seeds or windows).

``compare`` and ``evaluate`` are two views of a suite: one run directory per (workload, policy)
under a leaderboard, or the per-workload table with paired statistics against a reference
(``compare --reference`` adds them to its view). A suite's parts are :class:`SuitePart`
(windows of a split under an env config: ``evaluate``'s registered suites) or :class:`TracePart`
(whole traces at seeds on one cluster: ``compare``'s grid).

All registered suites run on the 64-GPU A40 + A10 testbed family, so one trained agent (whose spaces
depend on the GPU types and grid) runs on every suite:

- ``synthetic``: in distribution for ``ArenaGym/Testbed64-v1``: its synthetic generator, 20
  seeds of the test split's own seed stream;
- ``frozen-test``: the report-only test suite (:data:`FROZEN_DESIGN`): 20 evenly spaced 50-job
  windows of each of ITP cluster07 and cluster09, which no design, training or tuning reads;
  every run on it is recorded in a committed ledger (:mod:`arena_gym.harness.ledger`);
- ``real-test`` / ``real-validation``: every 50-job window of the test / validation time range
  of the five real traces (``ArenaGym/Testbed64Real-v1``; needs the data folder). ``real-test``
  is a *development* suite: it was read while the policies were designed;
- ``shift``: what the real-trace agent never saw in training: a node split it did not train
  on (8 A40 + 24 A10 nodes), an offered load of 1.6 (training: 0.6 - 1.2) and bursty arrivals
  (the synthetic generator's two-state process), 20 workloads each; the first two take windows
  of ITP cluster05 and cluster06, held out for this suite (no test window is reused);
- ``custom``: the test windows of your own trace files (:func:`custom_suite`);
- ``model``: the test split of the env an agent trained on (:func:`env_suite` of its metadata's
  EnvConfig), which fits the agent whatever its cluster.

Which ITP traces serve what: cluster08 and cluster10 are the env's train / validation / test
ranges (``real-*``), cluster02 is left for training and validation, cluster05 and cluster06 are
the ``shift`` suite's, cluster07 and cluster09 the ``frozen-test`` suite's (tested from the
registries). Statistics weight windows equally in pooled means and traces equally in the
by-trace interval (:data:`WEIGHTS`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

import numpy as np

from arena_gym import REAL_DATA_DIR
from arena_gym.harness.experiment import NO_OPTIONS, ScenarioOptions, load_jobs, user_models
from arena_gym.scenario import Scenario, build_scenario
from arena_gym.types import ClusterSpec
from envs import ENV_CONFIGS, EnvConfig, Workload, WorkloadSampler


def part_scenario(
    config: EnvConfig, cluster: str | ClusterSpec | None = None, options: ScenarioOptions = NO_OPTIONS
) -> Scenario:
    """The scenario of ``config`` on ``cluster`` (default: the config's) with ``options`` on top of the config's
    perf, belief and simulator settings (no options given: :func:`envs.scenario.env_scenario`'s)."""
    return build_scenario(
        config.cluster if cluster is None else cluster,
        options.perf if options.perf is not None else config.perf,
        options.belief if options.belief is not None else config.belief,
        config.seed,
        options.sim_config(config.sim_config()),
        models=user_models(options.model_spec, options.allow_shadowing),
        allow_shadowing=options.allow_shadowing,
    )


def split_workloads(
    config: EnvConfig,
    split: str,
    seeds: Sequence[int] = (),
    cluster: str | None = None,
    limit: int = 0,
    per_trace: int = 0,
    options: ScenarioOptions = NO_OPTIONS,
) -> list[Workload]:
    """The fixed workloads of a split of ``config``'s traces (see :meth:`envs.WorkloadSampler.fixed`).

    ``cluster`` replaces the config's; ``per_trace`` > 0 keeps that many windows of each trace
    (:func:`spaced_windows`); ``limit`` > 0 then keeps that many, evenly spaced over the list.
    The windows are cut under the truth of ``options`` on top of ``config`` (:func:`part_scenario`).
    """
    scenario = part_scenario(config, cluster or config.cluster, options)
    workloads = WorkloadSampler(config, scenario.cluster, scenario.truth).fixed(split, seeds, scenario.cluster)
    if per_trace > 0:
        by_trace: dict[str, list[Workload]] = {}
        for w in workloads:
            by_trace.setdefault(w.trace, []).append(w)
        levels = len(config.load_levels)
        workloads = [w for group in by_trace.values() for w in spaced_windows(group, per_trace, levels)]
    if 0 < limit < len(workloads):
        workloads = [workloads[int(i)] for i in np.linspace(0, len(workloads) - 1, limit).round()]
    return workloads


def spaced_windows(windows: Sequence[Workload], count: int, levels: int) -> list[Workload]:
    """``count`` of one trace's consecutive windows, evenly spaced, with the load levels still cycling over them.

    Kept window ``i`` is the one nearest to ``i / (count - 1)`` of the way through the trace
    whose position is congruent to ``i`` modulo ``levels`` (window ``k`` is at level ``k mod levels``, so
    the kept windows cycle through the levels in order); all of them when there are at most
    ``count``; a one-line ValueError when too few windows leave the kept ones out of order.
    """
    n = len(windows)
    if n <= count:
        return list(windows)
    kept = []
    for i in range(count):
        target = round(i * (n - 1) / max(count - 1, 1))
        near = [k for k in range(target - levels, target + levels + 1) if 0 <= k < n and k % levels == i % levels]
        kept.append(min(near, key=lambda k: (abs(k - target), k)))
    if any(b <= a for a, b in zip(kept, kept[1:])):
        raise ValueError(
            f"cannot keep {count} of {n} windows in order with {levels} load levels cycling: too few windows"
        )
    return [windows[k] for k in kept]


class Part(Protocol):
    """A group of a suite's workloads."""

    @property
    def name(self) -> str:
        """The group's name (prefixes its workloads' labels in a suite of several groups)."""

    def workloads(self) -> list[Workload]:
        """The group's workloads, deterministic."""


PartT = TypeVar("PartT", bound=Part)


@dataclass(frozen=True)
class SuitePart:
    """One group of a suite: the fixed workloads of ``split`` under ``config`` (``per_trace`` windows of each
    trace and at most ``limit`` in all, 0 = all; see :func:`split_workloads`), with the user's ``options`` on
    top of the config's scenario (:func:`part_scenario`; set by :func:`with_options`)."""

    name: str
    config: EnvConfig
    split: str
    seeds: tuple[int, ...] = ()
    cluster: str | None = None
    limit: int = 0
    per_trace: int = 0
    options: ScenarioOptions = NO_OPTIONS

    def workloads(self) -> list[Workload]:
        """The part's workloads, deterministic."""
        return split_workloads(
            self.config, self.split, self.seeds, self.cluster, self.limit, self.per_trace, self.options
        )


@dataclass(frozen=True)
class TracePart:
    """Whole traces on one cluster: every trace spec at every seed, as recorded or generated (``compare``'s grid).

    A workload is labelled ``TRACE@seedS``; its ``window`` is the seed, its load factor 1.
    ``scenarios`` holds each seed's scenario, whose truth fills the fields a trace leaves out
    (feasibly on its cluster, see :func:`arena_gym.harness.experiment.load_jobs`).
    """

    name: str
    traces: tuple[str, ...]
    seeds: tuple[int, ...]
    scenarios: Mapping[int, Scenario] = field(compare=False, repr=False)
    allow_shadowing: bool = False

    def workloads(self) -> list[Workload]:
        """One workload per (trace, seed), traces outermost."""
        return [
            Workload(
                f"{trace}@seed{seed}",
                trace,
                "all",
                seed,
                1.0,
                "factor",
                1.0,
                self.scenarios[seed].cluster.name,
                load_jobs(trace, self.scenarios[seed].cluster, self.scenarios[seed].truth, seed, self.allow_shadowing),
            )
            for trace in self.traces
            for seed in self.seeds
        ]


@dataclass(frozen=True)
class Suite(Generic[PartT]):
    """A named suite: parts whose workloads are scored together (the registered ones: :class:`SuitePart` s)."""

    name: str
    description: str
    parts: tuple[PartT, ...]
    needs_data: bool = False

    def workloads(self) -> list[Workload]:
        """All workloads, part by part (labels prefixed with the part name when there are several parts)."""
        return [w for _, w in self.part_workloads()]

    def part_workloads(self) -> list[tuple[PartT, Workload]]:
        """:meth:`workloads`, each with its part."""
        out = []
        for part in self.parts:
            for w in part.workloads():
                out.append((part, w if len(self.parts) == 1 else replace(w, label=f"{part.name}/{w.label}")))
        return out


def with_options(suite: Suite[SuitePart], options: ScenarioOptions) -> Suite[SuitePart]:
    """``suite`` with the user's ``options`` on top of every part's own scenario (:class:`SuitePart`)."""
    return replace(suite, parts=tuple(replace(part, options=options) for part in suite.parts))


TEST_SEEDS: tuple[int, ...] = tuple(range(2_000_000, 2_000_020))
SHIFT_CLUSTER = "testbed-64[a40=8,a10=24]"
BURSTY = "synthetic:n_jobs=50,arrival=bursty,rate_per_h=6,mix=testbed,gpu_types=a40+a10,max_gpus=16"
#: ITP traces held out for the ``shift`` suite (whole traces; nobody trains or tunes on them).
SHIFT_TRACES: tuple[str, ...] = ("data:itp/cluster05.csv?seed=0", "data:itp/cluster06.csv?seed=0")
#: ITP traces of the ``frozen-test`` suite (whole traces; read only to report a finished result).
FROZEN_TRACES: tuple[str, ...] = ("data:itp/cluster07.csv?seed=0", "data:itp/cluster09.csv?seed=0")
#: Windows of each frozen trace.
FROZEN_WINDOWS_PER_TRACE = 20
#: How every evaluation weights its workloads (stated in each summary).
WEIGHTS = (
    "pooled means and intervals weight windows equally; the by-trace interval (resampling traces, then windows "
    "within each drawn trace) weights traces equally"
)
#: The design of ``frozen-test``, stated before its first run.
FROZEN_DESIGN = (
    "frozen test suite, report only (every run is recorded in benchmarks/results/frozen-test/LEDGER.csv): "
    "ITP cluster07 and cluster09 (sampled as the real traces, seed 0), each whole trace (split all), "
    f"{FROZEN_WINDOWS_PER_TRACE} of its disjoint 50-job windows evenly spaced over it "
    f"({2 * FROZEN_WINDOWS_PER_TRACE} in all; kept window i is the one nearest to i/{FROZEN_WINDOWS_PER_TRACE - 1} "
    "of the way through the trace whose index is congruent to i modulo 3), offered load 0.6 / 0.9 / 1.2 "
    "cycling over each trace's kept windows, on testbed-64 with the EnvConfig of ArenaGym/Testbed64Real-v1 "
    "(as real-test); weights: " + WEIGHTS
)
#: Suites read only to report a finished result: every ``evaluate`` run on one is recorded in the ledger.
FROZEN_SUITES: frozenset[str] = frozenset({"frozen-test"})


def _real(data_dir: str) -> EnvConfig:
    return ENV_CONFIGS["ArenaGym/Testbed64Real-v1"].replace(data_dir=data_dir, split="test")


def _synthetic(_data_dir: str) -> tuple[SuitePart, ...]:
    return (SuitePart("synthetic", ENV_CONFIGS["ArenaGym/Testbed64-v1"].replace(split="test"), "test", TEST_SEEDS),)


def _frozen_test(data_dir: str) -> tuple[SuitePart, ...]:
    config = _real(data_dir).replace(trace=FROZEN_TRACES, split="all")
    return (SuitePart("frozen-test", config, "all", per_trace=FROZEN_WINDOWS_PER_TRACE),)


def _real_test(data_dir: str) -> tuple[SuitePart, ...]:
    return (SuitePart("real-test", _real(data_dir), "test"),)


def _real_validation(data_dir: str) -> tuple[SuitePart, ...]:
    return (SuitePart("real-validation", _real(data_dir).replace(split="validation"), "validation"),)


def _shift(data_dir: str) -> tuple[SuitePart, ...]:
    real = _real(data_dir)
    held_out = real.replace(trace=SHIFT_TRACES, split="all")
    return (
        SuitePart("cluster", held_out, "all", cluster=SHIFT_CLUSTER, limit=20),
        SuitePart("load", held_out.replace(load_levels=(1.6,)), "all", limit=20),
        SuitePart("bursty", real.replace(trace=BURSTY, load_levels=(0.9,)), "test", TEST_SEEDS),
    )


_SUITES: Mapping[str, tuple[str, Callable[[str], tuple[SuitePart, ...]], bool]] = MappingProxyType(
    {
        "synthetic": ("Testbed64 synthetic workloads, 20 test seeds (in distribution)", _synthetic, False),
        "frozen-test": (FROZEN_DESIGN, _frozen_test, True),
        "real-test": (
            "development suite (read while designing): every 50-job test window of the five real traces on testbed-64",
            _real_test,
            True,
        ),
        "real-validation": (
            "every 50-job validation window of the five real traces (model selection)",
            _real_validation,
            True,
        ),
        "shift": (
            "unseen node split and offered load 1.6 (20 windows of ITP cluster05 + cluster06 each, held out for "
            "this suite), bursty arrivals (20 synthetic test seeds)",
            _shift,
            True,
        ),
    }
)
SUITE_NAMES: tuple[str, ...] = tuple(_SUITES)
#: The suite of a learned policy's own env (its test split), and every suite name an evaluation takes.
MODEL_SUITE = "model"
SUITE_CHOICES: tuple[str, ...] = (*SUITE_NAMES, "custom", MODEL_SUITE)


def get_suite(name: str, data_dir: str = REAL_DATA_DIR) -> Suite[SuitePart]:
    """A registered suite; ValueError naming the valid suites."""
    entry = _SUITES.get(name)
    if entry is None:
        raise ValueError(f"unknown suite {name!r}; valid: {', '.join([*_SUITES, 'custom'])}")
    description, parts, needs_data = entry
    return Suite(name, description, parts(data_dir), needs_data)


def custom_suite(
    traces: Sequence[str],
    cluster: str = "testbed-64",
    split: str = "test",
    window_jobs: int = 50,
    load_levels: Sequence[float] = (0.9,),
    load_basis: str = "offered",
    seeds: Sequence[int] = TEST_SEEDS,
    perf: str = "estimator",
) -> Suite[SuitePart]:
    """The windows of ``split`` of the user's own trace specs (files or generators) on ``cluster``."""
    config = EnvConfig(
        cluster=cluster,
        trace=tuple(traces),
        split=split,
        window_jobs=window_jobs,
        load_levels=tuple(load_levels),
        load_basis=load_basis,
        perf=perf,
    )
    return Suite(
        "custom",
        f"{split} windows of {', '.join(traces)} on {cluster}",
        (SuitePart("custom", config, split, tuple(seeds)),),
    )


def env_suite(config: EnvConfig, seeds: Sequence[int] = TEST_SEEDS, split: str = "test") -> Suite[SuitePart]:
    """The fixed workloads of a split of an env config: its file traces' windows and its generators' ``seeds``."""
    config = config.replace(split=split)
    return Suite(
        f"env-{split}",
        f"{split} split of {', '.join(config.traces)} on {config.cluster}",
        (SuitePart(f"env-{split}", config, split, tuple(seeds)),),
    )
