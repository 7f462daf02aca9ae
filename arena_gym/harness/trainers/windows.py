"""What the residual's trainers share: the real traces' train and validation windows, and reference policies scored once.

Both trainers (:mod:`~arena_gym.harness.trainers.es`, :mod:`~arena_gym.harness.trainers.residual_ppo`)
train on the train windows against the base policy (``arena-gittins-32-f``, a zero residual)
and select on the validation windows by the selection score of every trainer
(:mod:`arena_gym.harness.selection`). The windows are cut on each of the config's clusters (the
offered loads scale the arrivals to each cluster's capacity); with more than one, a window's
label starts with its cluster's name.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from arena_gym import REAL_DATA_DIR
from arena_gym.cluster import resolve_cluster
from arena_gym.fields import check_fields
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.selection import log_ratios
from arena_gym.harness.suites import SuitePart, custom_suite, get_suite
from arena_gym.harness.sweep import connect_ray
from envs.workload import Workload

#: The five real traces' train windows, as the search's tuning read them.
TRAIN_TRACES: tuple[str, ...] = (
    "data:arena/traces/testbed.csv?iteration_divisor=1",
    "data:arena/traces/philly.csv",
    "data:arena/traces/pai.csv",
    "data:itp/cluster10.csv?seed=0",
    "data:itp/cluster08.csv?seed=0",
)


@dataclass(frozen=True)
class ResidualData:
    """What both residual trainers' configs share: the real ``traces`` (files under ``data_dir``) at the offered
    ``loads`` on each of the ``clusters`` (presets, files or ``preset[type=nodes]`` variants), validation on
    ``validation_limit`` windows per cluster (evenly spaced; 0 = all), ``workers`` local processes or the Ray
    cluster at ``ray`` (an address or ``auto``; ``workers`` is then not used) for the episodes, and the
    ``seed``. Every field is checked against its annotation; a cluster that does not resolve is refused here.
    """

    traces: tuple[str, ...] = TRAIN_TRACES
    loads: tuple[float, ...] = (0.6, 0.9, 1.2)
    clusters: tuple[str, ...] = ("testbed-64",)
    data_dir: str = REAL_DATA_DIR
    seed: int = 0
    workers: int = 2
    validation_limit: int = 0
    ray: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        name = type(self).__name__
        if not self.traces:
            raise ValueError(f"{name}.traces is empty")
        if not self.loads or not all(math.isfinite(x) and x > 0 for x in self.loads):
            raise ValueError(f"{name}.loads must be numbers > 0, got {self.loads}")
        if self.workers < 1:
            raise ValueError(f"{name}.workers must be >= 1, got {self.workers}")
        if self.validation_limit < 0:
            raise ValueError(f"{name}.validation_limit must be >= 0, got {self.validation_limit}")
        if not self.clusters or len(set(self.clusters)) < len(self.clusters):
            raise ValueError(f"{name}.clusters must name at least one cluster, each once, got {self.clusters}")
        for cluster in self.clusters:
            try:
                resolve_cluster(cluster)
            except ValueError as exc:
                raise ValueError(f"{name}.clusters: {exc}") from None
        if self.ray == "":
            raise ValueError(f"{name}.ray must be a Ray address or 'auto', got ''")


#: The policy a zero residual is: the trainers' fitness is measured against it.
BASE_SPEC = "arena-gittins-32-f"
#: The label a reference policy's JCTs take beside the scored policies'.
REFERENCE = "~reference"


class ReferenceScores:
    """Policies scored beside a reference policy on the same workloads; a reference runs once per workload (it is deterministic)."""

    def __init__(self, seed: int, workers: int, ray: str | None = None) -> None:
        self.seed, self.workers, self.ray = seed, workers, ray
        self._done: dict[tuple[str, str], list[float]] = {}  # (reference spec, workload label) -> finished JCTs

    def log_ratios(
        self, evaluator: Evaluator, specs: dict[str, str], reference: str = BASE_SPEC, progress: bool = False
    ) -> dict[str, np.ndarray]:
        """Per label of ``specs``: log(padded JCT / the reference's) on each of ``evaluator``'s workloads.

        ``progress`` shows the evaluator's bar of the workloads (or tasks) scored so far.
        """
        return log_ratios(self._jcts(evaluator, specs, reference, progress), REFERENCE)

    def mean_jct_h(self, evaluator: Evaluator, reference: str = BASE_SPEC, progress: bool = False) -> list[float]:
        """The reference's average JCT (hours, finished jobs) on each of ``evaluator``'s workloads."""
        self._run(evaluator, reference, progress)
        return [float(np.mean(self._done[reference, w.label])) / 3600.0 for w in evaluator.workloads]

    def _run(self, evaluator: Evaluator, reference: str, progress: bool = False) -> None:
        missing = [w for w in evaluator.workloads if (reference, w.label) not in self._done]
        if not missing:
            return
        rows: list[dict[str, Any]] = []
        Evaluator(evaluator.config, missing).score_specs(
            {REFERENCE: reference}, self.seed, self.workers, progress, rows, self.ray
        )
        self._done.update({(reference, w.label): [] for w in missing})
        for row in rows:
            self._done[reference, row["workload"]].append(row["jct_s"])

    def _jcts(
        self, evaluator: Evaluator, specs: dict[str, str], reference: str, progress: bool
    ) -> list[dict[str, list[float]]]:
        self._run(evaluator, reference, progress)
        rows: list[dict[str, Any]] = []
        evaluator.score_specs(specs, self.seed, self.workers, progress, rows, self.ray)
        out: list[dict[str, list[float]]] = [
            {label: [] for label in specs} | {REFERENCE: list(self._done[reference, w.label])}
            for w in evaluator.workloads
        ]
        at = {w.label: i for i, w in enumerate(evaluator.workloads)}
        for row in rows:
            out[at[row["workload"]]][row["policy"]].append(row["jct_s"])
        return out


def windows_and_scores(config: ResidualData) -> tuple[Evaluator, Evaluator, ReferenceScores]:
    """A trainer's train and validation windows (:func:`real_windows`) and its memo of reference scores, once
    connected to the Ray cluster ``config.ray`` names, if any (an unreachable one fails first, in one line)."""
    if config.ray is not None:
        connect_ray(config.ray)
    train, validation = real_windows(
        config.traces, config.loads, config.data_dir, config.validation_limit, config.clusters
    )
    return train, validation, ReferenceScores(config.seed, config.workers, config.ray)


def real_windows(
    traces: Sequence[str],
    loads: Sequence[float],
    data_dir: str,
    validation_limit: int = 0,
    clusters: Sequence[str] = ("testbed-64",),
) -> tuple[Evaluator, Evaluator]:
    """The train windows of ``traces`` at the offered ``loads``, and ``validation_limit`` validation windows (0 = all)
    of the real traces (the ``real-validation`` suite's), both cut on each of ``clusters`` in turn."""
    train = custom_suite(traces, split="train", load_levels=loads).parts[0]
    train = dataclasses.replace(train, config=train.config.replace(data_dir=data_dir))
    validation = dataclasses.replace(get_suite("real-validation", data_dir).parts[0], limit=validation_limit)
    return (
        Evaluator(train.config, _on_clusters(train, clusters)),
        Evaluator(validation.config, _on_clusters(validation, clusters)),
    )


def _on_clusters(part: SuitePart, clusters: Sequence[str]) -> list[Workload]:
    """``part``'s workloads on each of ``clusters``, labelled ``CLUSTER/LABEL`` when there are several."""
    if len(clusters) == 1:
        return dataclasses.replace(part, cluster=clusters[0]).workloads()
    return [
        dataclasses.replace(w, label=f"{cluster}/{w.label}")
        for cluster in clusters
        for w in dataclasses.replace(part, cluster=cluster).workloads()
    ]
