"""Statistics of a paired evaluation: bootstrap confidence intervals, win counts and paired tests against a reference.

Every policy runs the same workloads, so comparisons are paired per workload: the difference
``policy - reference`` of a metric on each workload. Intervals are percentile bootstrap
intervals over workloads (seeded, so a fixed seed gives fixed figures); the paired tests are
the Wilcoxon signed-rank test and the paired t-test (two-sided).

Weights: the pooled means and their intervals weight windows (workloads) equally. Each
workload also belongs to a trace; the by-trace figures weight traces equally: the mean of the
per-trace means, with a hierarchical bootstrap interval that resamples traces, then windows
within each drawn trace (:func:`hierarchical_bootstrap_ci`; with one trace it is the window
bootstrap, draw for draw).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats

from envs.workload import trace_label

#: The trace of every workload of a table that names none.
ONE_TRACE = "all"
#: The summary's columns that weight traces equally (the number of traces, means of per-trace means, intervals).
TRACE_COLUMNS: tuple[str, ...] = (
    "traces",
    "mean_diff_trace",
    "diff_ci_trace_low",
    "diff_ci_trace_high",
    "mean_ratio_trace",
    "ratio_ci_trace_low",
    "ratio_ci_trace_high",
)


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


def hierarchical_bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    traces: Sequence[str],
    resamples: int = 10_000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile interval of the mean of per-trace means (traces weighted equally), resampling traces and then
    the windows of each drawn trace; nan, nan for fewer than 2 values.

    Each resample draws as many traces as there are, with replacement, and for each drawn one
    as many of its windows as it has, with replacement; its statistic is the mean of the drawn
    traces' resampled means. The window draws use :func:`bootstrap_ci`'s generator in its
    order, so with one trace the interval is :func:`bootstrap_ci`'s exactly.
    """
    x = np.asarray(values, dtype=np.float64)
    if len(traces) != len(x):
        raise ValueError(f"hierarchical bootstrap needs one trace per value, got {len(traces)} for {len(x)}")
    if len(x) < 2 or not np.isfinite(x).all():
        return math.nan, math.nan
    names, codes = np.unique(np.asarray(traces, dtype=str), return_inverse=True)
    n_traces = len(names)
    windows = np.random.default_rng(np.random.SeedSequence([seed, len(x)]))
    drawn = np.random.default_rng(np.random.SeedSequence([seed, len(x), n_traces])).integers(
        0, n_traces, size=(resamples, n_traces)
    )
    total = np.zeros(resamples)
    for t in range(n_traces):
        xt = x[codes == t]
        rows = np.nonzero(drawn == t)[0]  # the resample of each draw of trace t, in order
        means = xt[windows.integers(0, len(xt), size=(len(rows), len(xt)))].mean(axis=1)
        total += np.bincount(rows, weights=means, minlength=resamples)
    tail = (1.0 - level) / 2.0
    lo, hi = np.quantile(total / n_traces, [tail, 1.0 - tail])
    return float(lo), float(hi)


def trace_mean(values: Sequence[float] | np.ndarray, traces: Sequence[str]) -> float:
    """The mean of the per-trace means of ``values`` (traces weighted equally; nan when empty)."""
    x = pd.Series(np.asarray(values, dtype=np.float64))
    return float(x.groupby(np.asarray(traces, dtype=str)).mean().mean()) if len(x) else math.nan


def trace_names(specs: Sequence[str]) -> dict[str, str]:
    """Trace spec -> short name (:func:`envs.workload.trace_label`; the specs themselves where two names collide)."""
    names = {spec: trace_label(spec) for spec in dict.fromkeys(specs)}
    return names if len(set(names.values())) == len(names) else {spec: spec for spec in names}


def workload_traces(table: pd.DataFrame) -> pd.Series:
    """Each workload's trace name: :func:`trace_names` of the ``trace`` column (:data:`ONE_TRACE` without one)."""
    first = table.groupby("workload", sort=False).first()
    if "trace" not in table.columns:
        return pd.Series(ONE_TRACE, index=first.index, name="trace")
    return first["trace"].astype(str).map(trace_names(list(first["trace"].astype(str))))


@dataclass(frozen=True)
class PairedComparison:
    """A policy against the reference on the same workloads (differences are policy - reference).

    The ``*_trace`` fields weight traces equally (means of per-trace means, hierarchical
    bootstrap intervals); the others weight workloads equally.
    """

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
    traces: int
    mean_diff_trace: float
    diff_ci_trace_low: float
    diff_ci_trace_high: float
    mean_ratio_trace: float
    ratio_ci_trace_low: float
    ratio_ci_trace_high: float

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
    traces: Sequence[str] | None = None,
) -> PairedComparison:
    """Compare per-workload values (lower is better) of a policy with the reference's on the same workloads.

    ``traces`` names each workload's trace (default: one trace for all)."""
    x = np.asarray(policy_values, dtype=np.float64)
    y = np.asarray(reference_values, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired comparison needs one value per workload for both, got {len(x)} and {len(y)}")
    groups = [ONE_TRACE] * len(x) if traces is None else list(traces)
    diff = x - y
    wins, losses = int((diff < 0).sum()), int((diff > 0).sum())
    lo, hi = bootstrap_ci(x, resamples, seed=seed)
    dlo, dhi = bootstrap_ci(diff, resamples, seed=seed)
    wilcoxon_p = ttest_p = math.nan
    if len(x) >= 2 and np.any(diff != 0):
        wilcoxon_p = float(stats.wilcoxon(x, y).pvalue)
        ttest_p = float(stats.ttest_rel(x, y).pvalue)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = x / y
    ratio = float(np.mean(ratios)) if len(x) else math.nan
    tdlo, tdhi = hierarchical_bootstrap_ci(diff, groups, resamples, seed=seed)
    trlo, trhi = hierarchical_bootstrap_ci(ratios, groups, resamples, seed=seed)
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
        len(set(groups)),
        trace_mean(diff, groups),
        tdlo,
        tdhi,
        trace_mean(ratios, groups),
        trlo,
        trhi,
    )


def summary_table(
    table: pd.DataFrame, metric: str, reference: str, resamples: int = 10_000, seed: int = 0
) -> pd.DataFrame:
    """One row per policy: the paired comparison of ``metric`` with ``reference`` over the table's workloads.

    ``table`` has one row per (workload, policy); columns ``workload``, ``policy``, ``metric``
    and, when present, ``trace`` (the by-trace columns group by it; without it all workloads are
    one trace), ``clairvoyant`` and ``overhead_class`` (carried into the summary).
    """
    if reference not in set(table["policy"]):
        raise ValueError(
            f"reference policy {reference!r} is not among the evaluated policies "
            f"({', '.join(dict.fromkeys(table['policy']))})"
        )
    wide = table.pivot(index="workload", columns="policy", values=metric)
    traces = workload_traces(table)
    rows = []
    for policy in dict.fromkeys(table["policy"]):
        both = wide[list(dict.fromkeys([policy, reference]))].dropna()
        comparison = paired_comparison(
            both[policy], both[reference], policy, reference, resamples, seed, list(traces.reindex(both.index))
        )
        row = {k: v for k, v in asdict(comparison).items() if k != "reference"}
        row["win_share"] = comparison.win_share
        first = table[table["policy"] == policy].iloc[0]
        for key in ("clairvoyant", "overhead_class"):
            if key in table.columns:
                row[key] = first[key]
        rows.append(row)
    return pd.DataFrame(rows)


def by_trace_table(table: pd.DataFrame, metric: str, reference: str) -> pd.DataFrame:
    """One row per (trace, policy): windows, the mean of ``metric``, the reference's, the mean paired difference and
    ratio, and win / tie / loss counts against ``reference`` (traces in order of appearance)."""
    wide = table.pivot(index="workload", columns="policy", values=metric)
    traces = workload_traces(table)
    rows = []
    for trace in dict.fromkeys(traces):
        part = wide.loc[traces.index[traces == trace]]
        for policy in dict.fromkeys(table["policy"]):
            both = part[list(dict.fromkeys([policy, reference]))].dropna()
            diff = both[policy] - both[reference]
            rows.append(
                {
                    "trace": trace,
                    "policy": policy,
                    "windows": len(both),
                    "mean": float(both[policy].mean()),
                    "reference_mean": float(both[reference].mean()),
                    "mean_diff": float(diff.mean()),
                    "mean_ratio": float((both[policy] / both[reference]).mean()),
                    "wins": int((diff < 0).sum()),
                    "ties": int((diff == 0).sum()),
                    "losses": int((diff > 0).sum()),
                }
            )
    return pd.DataFrame(rows)
