"""Figures: a training run's learning curve, an evolution-strategies run's history; an evaluation's per-workload scatter against a reference and CDFs."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def plot_learning_curve(episodes: pd.DataFrame, evals: pd.DataFrame, path: Path, window: int | None = None) -> Path:
    """Two panels: training episodes' avg JCT (moving median over ``window`` episodes, by default a tenth
    of them within 5..50; log scale), and the validation avg JCT of the agent vs the baselines."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    if not episodes.empty:
        window = window or min(50, max(5, len(episodes) // 10))
        hours = episodes["avg_jct_s"] / 3600.0
        top.plot(episodes["timesteps"], hours, ".", ms=2, alpha=0.3, color="tab:blue")
        top.plot(
            episodes["timesteps"],
            hours.rolling(window, min_periods=1).median(),
            color="tab:blue",
            label=f"training episodes ({window}-episode median)",
        )
        top.set_yscale("log")
        top.legend()
    top.set_ylabel("avg JCT (h)")
    top.set_title("training workloads")
    top.grid(alpha=0.3)
    if not evals.empty:
        means = evals.groupby(["policy", "timesteps"], sort=False)["avg_jct_s"].mean().reset_index()
        for policy, rows in means.groupby("policy", sort=False):
            style = "-o" if policy == "agent" else "--"
            bottom.plot(rows["timesteps"], rows["avg_jct_s"] / 3600.0, style, ms=3, label=str(policy))
        bottom.legend()
    bottom.set_xlabel("environment steps")
    bottom.set_ylabel("mean avg JCT (h)")
    bottom.set_title("validation workloads (held-out seeds)")
    bottom.grid(alpha=0.3)
    return _save(fig, path)


def plot_es_history(history: pd.DataFrame, path: Path) -> Path:
    """An evolution-strategies run: the current network's ratio to the base on each iteration's train windows
    and on the validation windows (geometric means; 1 = the base, lower is better)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(history["iteration"], history["train_theta_ratio"], "-o", ms=3, label="train windows (before the step)")
    ax.plot(history["iteration"], history["validation_geomean_ratio"], "-s", ms=3, label="validation windows")
    ax.axhline(1.0, color="grey", lw=1, ls="--", label="base policy")
    ax.set_xlabel("iteration")
    ax.set_ylabel("average JCT / base's (geometric mean)")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_policy_iteration(history: pd.DataFrame, path: Path) -> Path:
    """Policy iteration: the residual's validation ratio to Arena per round (round 0: the warm start), and the share
    of the round's searches a candidate won."""
    fig, (score, won) = plt.subplots(1, 2, figsize=(10, 4))
    score.plot(history["round"], history["validation_geomean_ratio"], "-o", ms=4)
    score.axhline(1.0, color="grey", lw=1, ls="--", label="Arena")
    score.set_xlabel("round")
    score.set_ylabel("validation average JCT / Arena's (geometric mean)")
    score.grid(alpha=0.3)
    score.legend()
    searched = history[history["searches"] > 0]
    won.bar(searched["round"], searched["candidate_won"] / searched["searches"])
    won.set_xlabel("round")
    won.set_ylabel("searches a candidate won")
    won.grid(alpha=0.3)
    return _save(fig, path)


def plot_finetune(histories: Mapping[str, pd.DataFrame], path: Path) -> Path:
    """Fine-tuning runs: each run's validation ratio to the base against environment steps (1 = the base)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, history in histories.items():
        ax.plot(history["timesteps"], history["validation_geomean_ratio"], "-o", ms=3, label=label)
    ax.axhline(1.0, color="grey", lw=1, ls="--", label="base policy")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("validation average JCT / base's (geometric mean)")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_expert_iteration(history: pd.DataFrame, path: Path) -> Path:
    """Expert iteration: the validation ratio to Arena per round, and how often the agent picked the teacher's action."""
    fig, (score, agree) = plt.subplots(1, 2, figsize=(10, 4))
    score.plot(history["round"], history["validation_score"], "-o", ms=4)
    score.axhline(1.0, color="grey", lw=1, ls="--", label="Arena")
    score.set_xlabel("round (0: warm start)")
    score.set_ylabel("validation average JCT / Arena's (mean)")
    score.legend()
    labelled = history[history["round"] > 0]
    agree.plot(labelled["round"], labelled["agent_agreement"], "-o", ms=4, label="agent's action = label (visited)")
    agree.plot(labelled["round"], labelled["holdout_agreement"], "-s", ms=4, label="after the fit (held out)")
    agree.set_xlabel("round")
    agree.set_ylabel("agreement with the teacher")
    agree.legend()
    for ax in (score, agree):
        ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_study(trials: pd.DataFrame, path: Path) -> Path:
    """A hyperparameter study: each complete trial's score, each pruned trial's last report, the best so far."""
    fig, ax = plt.subplots(figsize=(7, 4))
    done = trials[trials["state"] == "COMPLETE"]
    pruned = trials[trials["state"] == "PRUNED"]
    ax.plot(done["number"], done["value"], "o", ms=4, label="complete")
    ax.plot(pruned["number"], pruned["last_reported"], "x", ms=5, label="pruned (last report)")
    if not done.empty:
        ax.step(done["number"], done["value"].cummin(), where="post", color="black", lw=1, label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel("validation score (lower is better)")
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_vs_reference(table: pd.DataFrame, metric: str, reference: str, path: Path) -> Path:
    """Per-workload ``metric`` of every policy against the reference's (log-log, diagonal = tie; below = better)."""
    wide = table.pivot(index="workload", columns="policy", values=metric) / 3600.0
    others = [p for p in dict.fromkeys(table["policy"]) if p != reference]
    fig, ax = plt.subplots(figsize=(6.2, 6))
    for policy in others:
        ax.scatter(wide[reference], wide[policy], s=14, alpha=0.75, label=str(policy))
    values = wide.to_numpy()
    values = values[values > 0]
    if values.size:
        lo, hi = float(values.min()) / 1.2, float(values.max()) * 1.2
        ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="tie")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    shown = metric.removesuffix("_s")  # the figures are hours: no ``_s`` on the axis
    ax.set_xlabel(f"{reference}: {shown} (h)")
    ax.set_ylabel(f"policy: {shown} (h)")
    ax.set_title(f"per workload vs {reference} (below the diagonal: better)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_cdfs(table: pd.DataFrame, jobs: pd.DataFrame, metric: str, reference: str, path: Path) -> Path:
    """Two CDFs: each policy's per-workload ``metric`` / the reference's, and the JCT of every finished job."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    wide = table.pivot(index="workload", columns="policy", values=metric)
    for policy in dict.fromkeys(table["policy"]):
        ratio = np.sort((wide[policy] / wide[reference]).dropna().to_numpy())
        if ratio.size:
            left.step(ratio, np.arange(1, ratio.size + 1) / ratio.size, where="post", label=str(policy))
        jct = np.sort(jobs.loc[jobs["policy"] == policy, "jct_s"].to_numpy() / 3600.0)
        if jct.size:
            right.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=str(policy))
    left.axvline(1.0, color="k", lw=0.8, ls="--")
    left.set_xscale("log")
    left.set_xlabel(f"{metric} / {reference}'s, per workload")
    left.set_ylabel("share of workloads")
    right.set_xscale("log")
    right.set_xlabel("job completion time (h), every finished job")
    right.set_ylabel("share of jobs")
    for ax in (left, right):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
    return _save(fig, path)


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path
