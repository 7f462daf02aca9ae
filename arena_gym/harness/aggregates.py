"""The aggregates the RL community reads, computed with rliable: IQM, probability of improvement, performance profiles.

Scores. An evaluation measures lower-is-better JCTs, and workloads differ in scale by orders of
magnitude (a 50-job window averages 0.3 h or 90 h), so every aggregate here is taken over a
higher-is-better score normalised per workload ``w``, from the metric ``J`` (the padded average
JCT by default) of a policy ``p``:

- ``score = J_ref(w) / J_p(w)``: the reference scores 1, a policy twice as fast 2;
- ``bound_score = LP(w) / J_p(w)``, where a lower bound on the workload's average JCT is known
  (:mod:`arena_gym.harness.bounds`): at most 1, the fraction of the optimum the policy reaches at
  most (1 would be optimal);
- ``ratio_to_bound = J_p(w) / LP(w)``: at least 1, lower is better (the gap left to close).

A bound charged the ``pruned`` overhead class holds for every policy paying at least that
class (``pruned`` or ``full``); a policy that declares ``none`` may beat it.

rliable reads scores as a (runs x tasks) matrix: here the tasks are the workloads and the runs
the table's rows per (workload, policy), one for deterministic policies. The statistics are
rliable's (``rliable.metrics.aggregate_iqm``, ``rliable.metrics.probability_of_improvement``:
``P(X_w > Y_w)`` averaged over workloads, a tie counting one half) and the profile plot is
``rliable.plot_utils.plot_performance_profiles``. Intervals are percentile intervals of
rliable's stratified bootstrap with ``task_bootstrap``: each replicate draws the workloads with
replacement and, within each, the runs with replacement, so an interval reflects which
workloads happened to be drawn; the two policies of a probability of improvement are resampled
on the same workloads. The bootstrap is drawn here, vectorised, from a generator seeded with
``AggregateConfig.seed`` (same seed, same intervals and figures), instead of through
``rliable.library``: rliable 1.2.0's library resamples with numpy's global generator whatever
``random_state`` it is given, and needs ``arch``, whose releases either fail to import under
pandas 3 (7.x) or no longer accept the ``random_state`` rliable passes (8.x).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from rliable import metrics, plot_utils
from scipy.stats import trim_mean

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AggregateConfig:
    """Which policy normalises the scores, which metric, and the bootstrap's size, coverage and seed."""

    reference: str = "arena"
    metric: str = "padded_jct_s"
    reps: int = 2000
    confidence: float = 0.95
    seed: int = 0
    profile_points: int = 101

    def __post_init__(self) -> None:
        if self.reps < 10:
            raise ValueError(f"AggregateConfig.reps must be >= 10, got {self.reps}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"AggregateConfig.confidence must be in (0, 1), got {self.confidence}")
        if self.profile_points < 2:
            raise ValueError(f"AggregateConfig.profile_points must be >= 2, got {self.profile_points}")


@dataclass(frozen=True)
class Aggregates:
    """The per-policy aggregates (one row per policy, see :func:`aggregate`) and the plot written, if any."""

    table: pd.DataFrame
    plot: Path | None


def score_matrices(
    table: pd.DataFrame, config: AggregateConfig, bounds: Mapping[str, float] | None = None
) -> tuple[list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(workloads, ``score`` and ``bound_score`` matrices of shape (runs, workloads) per policy).

    Every policy must have rows for the reference's workloads, the same number per workload;
    the bound scores are empty when ``bounds`` (workload -> lower bound on its metric) is None.
    """
    for column in ("workload", "policy", config.metric):
        if column not in table.columns:
            raise ValueError(f"evaluation table has no {column!r} column")
    if config.reference not in set(table["policy"]):
        raise ValueError(f"reference policy {config.reference!r} not in the table")
    workloads = list(dict.fromkeys(table["workload"]))
    values = {p: _runs(rows, workloads, config.metric, p) for p, rows in table.groupby("policy", sort=False)}
    reference = values[config.reference].mean(axis=0)
    scores = {p: reference[None, :] / v for p, v in values.items()}
    bound_scores: dict[str, np.ndarray] = {}
    if bounds is not None:
        missing = [w for w in workloads if w not in bounds]
        if missing:
            raise ValueError(f"no bound for {len(missing)} workload(s), e.g. {missing[0]!r}")
        lower = np.array([bounds[w] for w in workloads], dtype=float)
        bound_scores = {p: lower[None, :] / v for p, v in values.items()}
    return workloads, scores, bound_scores


def _runs(rows: pd.DataFrame, workloads: list[str], metric: str, policy: str) -> np.ndarray:
    """One policy's metric as a (runs, workloads) matrix; ValueError unless every workload has equally many rows."""
    per_workload = rows.groupby("workload", sort=False)[metric].apply(list)
    counts = {w: len(per_workload.get(w, [])) for w in workloads}
    if len(set(counts.values())) != 1 or 0 in counts.values():
        raise ValueError(f"policy {policy!r}: every workload needs the same number of rows, got {counts}")
    out = np.array([per_workload[w] for w in workloads], dtype=float).T
    if np.isnan(out).any() or (out <= 0).any():
        raise ValueError(f"policy {policy!r}: {metric} must be positive (inf allowed), got NaN or <= 0")
    return out


def bootstrap_samples(scores: np.ndarray, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``reps`` stratified-bootstrap resamples of a (runs, tasks, ...) array, stacked on a new first axis.

    As rliable's ``StratifiedBootstrap(task_bootstrap=True)``: per replicate the tasks are drawn
    with replacement (trailing axes move with their task), and every cell's run independently.
    """
    runs, tasks = scores.shape[:2]
    run_index = rng.integers(runs, size=(reps, *scores.shape))
    task_index = rng.integers(tasks, size=(reps, 1, tasks) + (1,) * (scores.ndim - 2))
    trailing = [r.reshape((1, 1, 1) + r.shape) for r in np.ogrid[tuple(slice(n) for n in scores.shape[2:])]]
    index = (run_index, task_index, *trailing)
    return scores[index]


def iqm(samples: np.ndarray) -> np.ndarray:
    """The interquartile mean of each (runs, tasks) sample of a (reps, runs, tasks) stack (rliable's ``aggregate_iqm``)."""
    return np.asarray(trim_mean(samples.reshape(len(samples), -1), proportiontocut=0.25, axis=1))


def improvement(samples: np.ndarray) -> np.ndarray:
    """``P(X > Y)`` per sample of a (reps, runs, tasks, 2) stack of (X, Y) pairs, ties one half, averaged over tasks.

    rliable's ``probability_of_improvement`` (the Mann-Whitney U statistic per task over all
    pairs of runs, divided by the pairs), for every sample at once.
    """
    x, y = samples[..., 0][:, :, None, :], samples[..., 1][:, None, :, :]
    per_task = np.mean((x > y) + 0.5 * (x == y), axis=(1, 2))
    return per_task.mean(axis=1)


def _interval(
    scores: Mapping[str, np.ndarray],
    point: Callable[[np.ndarray], float],
    replicate: Callable[[np.ndarray], np.ndarray],
    config: AggregateConfig,
) -> dict[str, tuple[float, float, float]]:
    """Per key: (rliable's point estimate, low, high), the interval a percentile one of the stratified bootstrap."""
    rng = np.random.default_rng(config.seed)
    tail = 100 * (1 - config.confidence) / 2
    out = {}
    for key, values in scores.items():
        low, high = np.percentile(replicate(bootstrap_samples(values, config.reps, rng)), [tail, 100 - tail])
        out[key] = (float(point(values)), float(low), float(high))
    return out


def _iqm_point(scores: np.ndarray) -> float:
    return float(metrics.aggregate_iqm(scores))


def _improvement_point(pair: np.ndarray) -> float:
    return float(metrics.probability_of_improvement(pair[..., 0], pair[..., 1]))


def aggregate(
    table: pd.DataFrame,
    bounds: Mapping[str, float] | None = None,
    config: AggregateConfig | None = None,
    plot_path: str | Path | None = None,
) -> Aggregates:
    """IQM scores, probability of improvement over the reference and, with ``bounds``, the scores against the bound.

    ``table`` is an evaluation's per-workload table (``arena_gym.harness.scoring.Evaluator.score``:
    columns ``workload``, ``policy`` and the metric); ``bounds`` maps each workload to a lower
    bound on that metric (``arena_gym.harness.bounds.Bounds.lp_avg_jct_s``). One row per policy, in
    the table's order: ``workloads``, ``runs``, ``iqm_score`` and its interval
    (``iqm_score_lo`` / ``iqm_score_hi``), ``poi`` (probability of improvement over the
    reference) with ``poi_lo`` / ``poi_hi``, and with bounds ``iqm_bound_score`` and
    ``iqm_ratio_to_bound`` with their intervals, plus ``mean_ratio_to_bound``. With
    ``plot_path`` the performance profiles are written there as a PNG.
    """
    config = config if config is not None else AggregateConfig()
    workloads, scores, bound_scores = score_matrices(table, config, bounds)
    reference = scores[config.reference]
    for policy, s in scores.items():
        if s.shape[0] != reference.shape[0] and reference.shape[0] != 1:
            raise ValueError(
                f"policy {policy!r} has {s.shape[0]} run(s) per workload and the reference {reference.shape[0]}: "
                "a probability of improvement needs equal counts, or one reference run"
            )
    iqm_scores = _interval(scores, _iqm_point, iqm, config)
    pairs = {p: np.stack([s, np.broadcast_to(reference, s.shape)], axis=-1) for p, s in scores.items()}
    poi = _interval(pairs, _improvement_point, improvement, config)
    rows = []
    for policy, s in scores.items():
        row: dict[str, object] = {"policy": policy, "workloads": len(workloads), "runs": s.shape[0]}
        row.update(_columns("iqm_score", iqm_scores[policy]))
        row.update(_columns("poi", poi[policy]))
        rows.append(row)
    if bound_scores:
        bound_iqm = _interval(bound_scores, _iqm_point, iqm, config)
        ratio_iqm = _interval({p: 1.0 / s for p, s in bound_scores.items()}, _iqm_point, iqm, config)
        for row in rows:
            policy = str(row["policy"])
            row.update(_columns("iqm_bound_score", bound_iqm[policy]))
            row.update(_columns("iqm_ratio_to_bound", ratio_iqm[policy]))
            row["mean_ratio_to_bound"] = float(np.mean(1.0 / bound_scores[policy]))
            if row["iqm_ratio_to_bound"] < 1:  # type: ignore[operator]
                log.warning(
                    "policy %s beats the lower bound on average: the bound's overhead class is too high", policy
                )
    plot = None
    if plot_path is not None:
        plot = plot_performance_profiles(scores, bound_scores, Path(plot_path), config)
    return Aggregates(pd.DataFrame(rows), plot)


def _columns(name: str, estimate: tuple[float, float, float]) -> dict[str, float]:
    point, low, high = estimate
    return {name: point, f"{name}_lo": low, f"{name}_hi": high}


def plot_performance_profiles(
    scores: Mapping[str, np.ndarray],
    bound_scores: Mapping[str, np.ndarray],
    path: Path,
    config: AggregateConfig,
) -> Path:
    """Write rliable performance profiles (fraction of workloads with score > tau, 95% bands) as a PNG.

    One panel of the reference-normalised scores, and one of the bound scores when given.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("score", scores, f"score = {config.metric} of {config.reference} / policy's")]
    if bound_scores:
        panels.append(("bound_score", bound_scores, f"bound score = LP bound / policy's {config.metric}"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    tail = 100 * (1 - config.confidence) / 2
    palette = plt.get_cmap("tab20")
    for ax, (_, data, label) in zip(axes[0], panels):
        finite = np.concatenate([s[np.isfinite(s)] for s in data.values()])
        high = float(finite.max()) if finite.size else 1.0
        taus = np.linspace(0.0, high * 1.02 if math.isfinite(high) else 1.0, config.profile_points)
        rng = np.random.default_rng(config.seed)
        profiles, bands = {}, {}
        for policy, values in data.items():
            profiles[policy] = _profile(values[None], taus)[0]
            replicates = _profile(bootstrap_samples(values, config.reps, rng), taus)
            bands[policy] = np.percentile(replicates, [tail, 100 - tail], axis=0)
        plot_utils.plot_performance_profiles(
            profiles,
            taus,
            performance_profile_cis=bands,
            ax=ax,
            colors={policy: palette(i % 20) for i, policy in enumerate(data)},
            xlabel=label,
            ylabel="fraction of workloads with score > tau",
        )
        ax.legend(fontsize="small", loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)
    return path


def _profile(samples: np.ndarray, taus: np.ndarray) -> np.ndarray:
    """Per sample of a (reps, runs, tasks) stack: the fraction of its scores above each tau (rliable's score distribution)."""
    flat = samples.reshape(len(samples), -1)
    return np.mean(flat[:, :, None] > taus[None, None, :], axis=1)
