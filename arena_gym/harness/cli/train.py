"""``arena-gym train``: options generated from TrainConfig, the wandb environment; the work is in :mod:`arena_gym.harness.train`."""

from __future__ import annotations

import argparse
import logging
import math
import os
from pathlib import Path

from agents.rl.config import TRAIN_SPLIT
from arena_gym.harness.out_dirs import check_out_dir
from arena_gym.harness.runlock import RunLock
from arena_gym.harness.train_options import add_train_arguments, config_from_args, wandb_mode


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``train`` arguments (one per TrainConfig field, plus ``--resume``) and the handler."""
    add_train_arguments(parser)
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="DIR",
        help="continue the run in DIR from its latest checkpoint (its own config; --steps may raise the budget)",
    )
    parser.set_defaults(handler=handle)


def set_wandb_env(mode: str) -> None:
    """Point wandb at ``mode`` and switch its telemetry off, before wandb is imported."""
    os.environ["WANDB_MODE"] = mode
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    os.environ.setdefault("WANDB_SILENT", "true")


def handle(args: argparse.Namespace) -> int:
    """Validate everything first (a bad value fails before any work), then train or resume and print the summary.

    The run directory is locked while the run writes it (:class:`arena_gym.harness.runlock.RunLock`)."""
    try:
        config = config_from_args(args)
        from agents.rl.env_factory import env_config

        env_config(config.env_id, config.env_overrides_for(TRAIN_SPLIT))
        if args.resume is None:
            check_out_dir(config.out_dir)  # before the lock, which would be written beside the path
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    set_wandb_env(wandb_mode(args))
    if not getattr(args, "verbose", False):  # one workload per episode: keep the generators' notes out of the log
        logging.getLogger("traces").setLevel(logging.WARNING)
        logging.getLogger("envs.workload").setLevel(logging.WARNING)
    from arena_gym.harness.train import resume, train

    if args.resume is not None:
        from agents.rl.config import TrainConfig

        with RunLock(args.resume, "train", flag="--resume", create=False):
            result = resume(args.resume, steps=args.steps if args.steps != TrainConfig.steps else None)
    else:
        with RunLock(config.out_dir, "train"):
            result = train(config)
    print(f"trained {result.timesteps} steps in {result.wall_s:.0f} s")
    for key, value in result.metrics.items():
        figure = f"{value / 3600:.2f} h" if math.isfinite(value) else "n/a (some jobs never finished)"
        print(f"  {key.removesuffix('_avg_jct_s'):>12}: mean avg JCT {figure}")
    print(f"model: {result.model_path}")
    print(f"results: {result.out_dir}")
    return 0
