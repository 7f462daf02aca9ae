"""What the residual's trainers share: the real traces' train and validation windows, and reference policies scored once.

Both trainers (:mod:`~arena_gym.harness.trainers.es`, :mod:`~arena_gym.harness.trainers.residual_ppo`)
train on the train windows against the base policy (``arena-gittins-32-f``, a zero residual)
and select on the validation windows by the selection score of every trainer
(:mod:`arena_gym.harness.selection`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from arena_gym import REAL_DATA_DIR
from arena_gym.fields import check_fields
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.selection import log_ratios
from arena_gym.harness.suites import custom_suite, get_suite

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
    ``loads``, validation on ``validation_limit`` windows (evenly spaced; 0 = all), ``workers`` local processes
    and the ``seed``. Every field is checked against its annotation."""

    traces: tuple[str, ...] = TRAIN_TRACES
    loads: tuple[float, ...] = (0.6, 0.9, 1.2)
    data_dir: str = REAL_DATA_DIR
    seed: int = 0
    workers: int = 2
    validation_limit: int = 0

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


#: The policy a zero residual is: the trainers' fitness is measured against it.
BASE_SPEC = "arena-gittins-32-f"
#: The label a reference policy's JCTs take beside the scored policies'.
REFERENCE = "~reference"


class ReferenceScores:
    """Policies scored beside a reference policy on the same workloads; a reference runs once per workload (it is deterministic)."""

    def __init__(self, seed: int, workers: int) -> None:
        self.seed, self.workers = seed, workers
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
            {REFERENCE: reference}, self.seed, self.workers, progress, jct_rows=rows
        )
        self._done.update({(reference, w.label): [] for w in missing})
        for row in rows:
            self._done[reference, row["workload"]].append(row["jct_s"])

    def _jcts(
        self, evaluator: Evaluator, specs: dict[str, str], reference: str, progress: bool
    ) -> list[dict[str, list[float]]]:
        self._run(evaluator, reference, progress)
        rows: list[dict[str, Any]] = []
        evaluator.score_specs(specs, self.seed, self.workers, progress, jct_rows=rows)
        out: list[dict[str, list[float]]] = [
            {label: [] for label in specs} | {REFERENCE: list(self._done[reference, w.label])}
            for w in evaluator.workloads
        ]
        at = {w.label: i for i, w in enumerate(evaluator.workloads)}
        for row in rows:
            out[at[row["workload"]]][row["policy"]].append(row["jct_s"])
        return out


def real_windows(
    traces: Sequence[str], loads: Sequence[float], data_dir: str, validation_limit: int = 0
) -> tuple[Evaluator, Evaluator]:
    """The train windows of ``traces`` at the offered ``loads``, and ``validation_limit`` validation windows (0 = all)."""
    part = custom_suite(traces, split="train", load_levels=loads).parts[0]
    part = dataclasses.replace(part, config=part.config.replace(data_dir=data_dir))
    validation = dataclasses.replace(get_suite("real-validation", data_dir).parts[0], limit=validation_limit)
    return Evaluator(part.config, part.workloads()), Evaluator(validation.config, validation.workloads())
