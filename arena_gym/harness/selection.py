"""The one model-selection metric of every trainer: the geometric-mean padded-JCT ratio to a reference policy.

On each validation window the candidate's finished jobs' JCTs and the reference's
(:data:`SELECTION_REFERENCE`, Arena) are padded to the larger finished count with the largest
JCT either reached (:func:`arena_gym.metrics.padded_mean_jcts`); the score is the geometric
mean over the windows of the candidate's padded average JCT divided by the reference's. Lower
is better, 1 is the reference; every window counts alike whatever its scale. ``arena-gym
train`` keeps the model with the lowest score whatever its ``--method``, and ``arena-gym tune``
minimises it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from arena_gym.harness.scoring import Evaluator
from arena_gym.metrics import padded_mean_jcts
from arena_gym.protocols import Policy

#: The policy every trainer's validation is measured against.
SELECTION_REFERENCE = "arena"


def log_ratios(jcts: Sequence[Mapping[str, Sequence[float]]], reference: str) -> dict[str, np.ndarray]:
    """Per label: log(padded JCT / the reference's) on every workload (``jcts``: one label -> finished JCTs map each),
    padded across all the labels of a workload."""
    padded = [padded_mean_jcts(per_label) for per_label in jcts]
    return {label: np.log([p[label] / p[reference] for p in padded]) for label in jcts[0] if label != reference}


def geomean_ratio(logs: np.ndarray) -> float:
    """The selection score of per-window log ratios: their mean's exponential (inf when not finite)."""
    value = float(np.exp(np.mean(logs))) if len(logs) else math.nan
    return value if math.isfinite(value) else math.inf


def by_workload(
    rows: Iterable[Mapping[str, Any]], workloads: Sequence[str], labels: Sequence[str]
) -> list[dict[str, list[float]]]:
    """Finished-job rows (``workload``, ``policy``, ``jct_s``) as one label -> JCTs map per workload, in order."""
    out: list[dict[str, list[float]]] = [{label: [] for label in labels} for _ in workloads]
    at = {w: i for i, w in enumerate(workloads)}
    for row in rows:
        if row["policy"] in labels:
            out[at[row["workload"]]][row["policy"]].append(row["jct_s"])
    return out


class Selection:
    """Validation against the reference: the reference's JCTs on ``evaluator``'s workloads (scored once), then a
    candidate's table and selection score."""

    def __init__(self, evaluator: Evaluator, seed: int, reference: str = SELECTION_REFERENCE) -> None:
        self.evaluator, self.reference = evaluator, reference
        self._rows: list[dict[str, Any]] = []
        evaluator.score_specs({reference: reference}, seed, jct_rows=self._rows)

    def score(self, policy: Policy, label: str = "agent") -> tuple[pd.DataFrame, float]:
        """``policy``'s table on the workloads (one row each) and its selection score."""
        rows: list[dict[str, Any]] = []
        table = self.evaluator.score({label: policy}, jct_rows=rows)
        names = [w.label for w in self.evaluator.workloads]
        jcts = by_workload([*rows, *self._rows], names, (label, self.reference))
        return table, geomean_ratio(log_ratios(jcts, self.reference)[label])
