"""wandb experiment tracking (offline unless asked otherwise); wandb is imported only when used."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, cast

import pandas as pd

from agents.rl.config import WANDB_MODES, WandbMode
from arena_gym.outputs import jsonable


def wandb_mode(text: str) -> WandbMode:
    """``text`` as a wandb mode; ValueError naming the valid ones otherwise."""
    if text not in WANDB_MODES:
        raise ValueError(f"unknown wandb mode {text!r}; valid: {', '.join(WANDB_MODES)}")
    return cast(WandbMode, text)


def start_run(out_dir: Path, config: Any, job_type: str, mode: str = "offline", project: str = "arena-gym") -> Any:
    """Start a wandb run in ``out_dir`` with lean settings (no stats, no git probe); ``mode`` is a :data:`WandbMode`."""
    checked = wandb_mode(mode)
    import wandb

    out_dir.mkdir(parents=True, exist_ok=True)
    cfg = jsonable(config) if dataclasses.is_dataclass(config) else config
    return wandb.init(
        project=project,
        dir=str(out_dir),
        config=cfg,
        job_type=job_type,
        mode=checked,
        reinit="finish_previous",
        settings=wandb.Settings(
            x_disable_stats=True,
            x_disable_meta=True,
            x_disable_machine_info=True,
            console="off",
            silent=True,
            disable_git=True,
            init_timeout=60,
        ),
    )


def finish_run(run: Any) -> None:
    """Finish the run and stop wandb's service process."""
    import wandb

    run.finish()
    wandb.teardown()


def log_comparison(out_dir: Path, board: pd.DataFrame, config: Any, mode: str = "offline") -> None:
    """Log a leaderboard table and every PNG under ``out_dir`` as one wandb run."""
    import wandb

    run = start_run(out_dir, config, "compare", mode)
    run.log({"leaderboard": wandb.Table(dataframe=board)})
    for png in sorted(out_dir.rglob("*.png")):
        run.log({str(png.relative_to(out_dir).with_suffix("")).replace("/", "."): wandb.Image(str(png))})
    finish_run(run)
