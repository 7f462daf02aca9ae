"""The learning-curve figure of a training run."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def plot_learning_curve(episodes: pd.DataFrame, evals: pd.DataFrame, path: Path, window: int | None = None) -> Path:
    """Two panels: training episodes' avg JCT (moving median over ``window`` episodes, by default a tenth
    of them within 5..50; log scale), and the validation avg JCT of the agent vs the baselines."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True)
    if not episodes.empty:
        window = window or min(50, max(5, len(episodes) // 10))
        hours = episodes["avg_jct_s"] / 3600.0
        top.plot(episodes["timesteps"], hours, ".", ms=2, alpha=0.3, color="tab:blue")
        top.plot(episodes["timesteps"], hours.rolling(window, min_periods=1).median(), color="tab:blue",
                 label=f"training episodes ({window}-episode median)")
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
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path
