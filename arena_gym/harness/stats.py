"""Statistics of a paired evaluation: bootstrap confidence intervals, win counts and paired tests against a reference.

Every policy runs the same workloads, so comparisons are paired per workload: the difference
``policy - reference`` of a metric on each workload. Intervals are percentile bootstrap
intervals over workloads (seeded, so a fixed seed gives fixed figures); the paired tests are
the Wilcoxon signed-rank test and the paired t-test (two-sided).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats


def bootstrap_ci(
    values: Sequence[float] | np.ndarray, resamples: int = 10_000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (nan, nan for fewer than 2 values)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) < 2 or not np.isfinite(x).all():
        return math.nan, math.nan
    rng = np.random.default_rng(np.random.SeedSequence([seed, len(x)]))
    means = x[rng.integers(0, len(x), size=(resamples, len(x)))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class PairedComparison:
    """A policy against the reference on the same workloads (differences are policy - reference)."""

    policy: str
    reference: str
    workloads: int
    wins: int
    ties: int
    losses: int
    mean: float
    mean_ci_low: float
    mean_ci_high: float
    reference_mean: float
    mean_diff: float
    diff_ci_low: float
    diff_ci_high: float
    mean_ratio: float
    wilcoxon_p: float
    ttest_p: float

    @property
    def win_share(self) -> float:
        """Share of workloads on which the policy is strictly better (lower)."""
        return self.wins / self.workloads if self.workloads else math.nan


def paired_comparison(
    policy_values: Sequence[float],
    reference_values: Sequence[float],
    policy: str,
    reference: str,
    resamples: int = 10_000,
    seed: int = 0,
) -> PairedComparison:
    """Compare per-workload values (lower is better) of a policy with the reference's on the same workloads."""
    x = np.asarray(policy_values, dtype=np.float64)
    y = np.asarray(reference_values, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired comparison needs one value per workload for both, got {len(x)} and {len(y)}")
    diff = x - y
    wins, losses = int((diff < 0).sum()), int((diff > 0).sum())
    lo, hi = bootstrap_ci(x, resamples, seed=seed)
    dlo, dhi = bootstrap_ci(diff, resamples, seed=seed)
    wilcoxon_p = ttest_p = math.nan
    if len(x) >= 2 and np.any(diff != 0):
        wilcoxon_p = float(stats.wilcoxon(x, y).pvalue)
        ttest_p = float(stats.ttest_rel(x, y).pvalue)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.mean(x / y)) if len(x) else math.nan
    return PairedComparison(
        policy,
        reference,
        len(x),
        wins,
        len(x) - wins - losses,
        losses,
        float(np.mean(x)) if len(x) else math.nan,
        lo,
        hi,
        float(np.mean(y)) if len(y) else math.nan,
        float(np.mean(diff)) if len(x) else math.nan,
        dlo,
        dhi,
        ratio,
        wilcoxon_p,
        ttest_p,
    )


def summary_table(
    table: pd.DataFrame, metric: str, reference: str, resamples: int = 10_000, seed: int = 0
) -> pd.DataFrame:
    """One row per policy: the paired comparison of ``metric`` with ``reference`` over the table's workloads.

    ``table`` has one row per (workload, policy); columns ``workload``, ``policy``, ``metric``
    and, when present, ``clairvoyant`` and ``overhead_class`` (carried into the summary).
    """
    if reference not in set(table["policy"]):
        raise ValueError(
            f"reference policy {reference!r} is not among the evaluated policies "
            f"({', '.join(dict.fromkeys(table['policy']))})"
        )
    wide = table.pivot(index="workload", columns="policy", values=metric)
    rows = []
    for policy in dict.fromkeys(table["policy"]):
        both = wide[[policy, reference]].dropna()
        comparison = paired_comparison(both[policy], both[reference], policy, reference, resamples, seed)
        row = {k: v for k, v in asdict(comparison).items() if k != "reference"}
        row["win_share"] = comparison.win_share
        first = table[table["policy"] == policy].iloc[0]
        for key in ("clairvoyant", "overhead_class"):
            if key in table.columns:
                row[key] = first[key]
        rows.append(row)
    return pd.DataFrame(rows)
