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
- ``real-test`` / ``real-validation``: every 50-job window of the test / validation time range
  of the five real traces (``ArenaGym/Testbed64Real-v1``; needs the data folder);
- ``shift``: what the real-trace agent never saw in training: a node split it did not train
  on (8 A40 + 24 A10 nodes), an offered load of 1.6 (training: 0.6 - 1.2) and bursty arrivals
  (the synthetic generator's two-state process), 20 workloads each;
- ``custom``: the test windows of your own trace files (:func:`custom_suite`);
- ``model``: the test split of the env an agent trained on (:func:`env_suite` of its metadata's
  EnvConfig), which fits the agent whatever its cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Generic, Protocol, TypeVar

import numpy as np

from arena_gym.harness.experiment import load_jobs
from arena_gym.types import ClusterSpec, PerfModel
from envs import ENV_CONFIGS, EnvConfig, Workload, WorkloadSampler
from envs.arena_env import resolve_perf
from envs.clusters import resolve_cluster


def split_workloads(
    config: EnvConfig, split: str, seeds: Sequence[int] = (), cluster: str | None = None, limit: int = 0
) -> list[Workload]:
    """The fixed workloads of a split of ``config``'s traces (see :meth:`envs.WorkloadSampler.fixed`).

    ``cluster`` replaces the config's; ``limit`` > 0 keeps that many, evenly spaced over the list.
    """
    base = resolve_cluster(cluster or config.cluster)
    truth = resolve_perf(config.perf, base, config.seed)
    workloads = WorkloadSampler(config, base, truth).fixed(split, seeds, base)
    if 0 < limit < len(workloads):
        workloads = [workloads[int(i)] for i in np.linspace(0, len(workloads) - 1, limit).round()]
    return workloads


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
    """One group of a suite: the fixed workloads of ``split`` under ``config`` (at most ``limit``, 0 = all)."""

    name: str
    config: EnvConfig
    split: str
    seeds: tuple[int, ...] = ()
    cluster: str | None = None
    limit: int = 0

    def workloads(self) -> list[Workload]:
        """The part's workloads, deterministic."""
        return split_workloads(self.config, self.split, self.seeds, self.cluster, self.limit)


@dataclass(frozen=True)
class TracePart:
    """Whole traces on one cluster: every trace spec at every seed, as recorded or generated (``compare``'s grid).

    A workload is labelled ``TRACE@seedS``; its ``window`` is the seed, its load factor 1.
    ``truth`` fills the fields a trace leaves out (feasibly on ``cluster``, see
    :func:`arena_gym.harness.experiment.load_jobs`).
    """

    name: str
    traces: tuple[str, ...]
    seeds: tuple[int, ...]
    cluster: ClusterSpec
    truth: PerfModel = field(compare=False, repr=False)
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
                self.cluster.name,
                load_jobs(trace, self.cluster, self.truth, seed, self.allow_shadowing),
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
        out = []
        for part in self.parts:
            for w in part.workloads():
                out.append(w if len(self.parts) == 1 else replace(w, label=f"{part.name}/{w.label}"))
        return out


TEST_SEEDS: tuple[int, ...] = tuple(range(2_000_000, 2_000_020))
SHIFT_CLUSTER = "testbed-64[a40=8,a10=24]"
BURSTY = "synthetic:n_jobs=50,arrival=bursty,rate_per_h=6,mix=testbed,gpu_types=a40+a10,max_gpus=16"


def _real(data_dir: str) -> EnvConfig:
    return ENV_CONFIGS["ArenaGym/Testbed64Real-v1"].replace(data_dir=data_dir, split="test")


def _synthetic(_data_dir: str) -> tuple[SuitePart, ...]:
    return (SuitePart("synthetic", ENV_CONFIGS["ArenaGym/Testbed64-v1"].replace(split="test"), "test", TEST_SEEDS),)


def _real_test(data_dir: str) -> tuple[SuitePart, ...]:
    return (SuitePart("real-test", _real(data_dir), "test"),)


def _real_validation(data_dir: str) -> tuple[SuitePart, ...]:
    return (SuitePart("real-validation", _real(data_dir).replace(split="validation"), "validation"),)


def _shift(data_dir: str) -> tuple[SuitePart, ...]:
    real = _real(data_dir)
    return (
        SuitePart("cluster", real, "test", cluster=SHIFT_CLUSTER, limit=20),
        SuitePart("load", real.replace(load_levels=(1.6,)), "test", limit=20),
        SuitePart("bursty", real.replace(trace=BURSTY, load_levels=(0.9,)), "test", TEST_SEEDS),
    )


_SUITES: Mapping[str, tuple[str, Callable[[str], tuple[SuitePart, ...]], bool]] = MappingProxyType(
    {
        "synthetic": ("Testbed64 synthetic workloads, 20 test seeds (in distribution)", _synthetic, False),
        "real-test": ("every 50-job test window of the five real traces on testbed-64", _real_test, True),
        "real-validation": (
            "every 50-job validation window of the five real traces (model selection)",
            _real_validation,
            True,
        ),
        "shift": ("unseen node split, offered load 1.6, bursty arrivals (20 workloads each)", _shift, True),
    }
)
SUITE_NAMES: tuple[str, ...] = tuple(_SUITES)
#: The suite of a learned policy's own env (its test split), and every suite name an evaluation takes.
MODEL_SUITE = "model"
SUITE_CHOICES: tuple[str, ...] = (*SUITE_NAMES, "custom", MODEL_SUITE)


def get_suite(name: str, data_dir: str = "../shared/data") -> Suite[SuitePart]:
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
