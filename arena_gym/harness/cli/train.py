"""``arena-gym train``: every learned agent's trainer, chosen by ``--method`` (:data:`arena_gym.harness.trainers.METHODS`).

``sb3`` (the default) takes one option per TrainConfig field and the wandb environment; the
work is in :mod:`arena_gym.harness.trainers.sb3`. The other methods take their config's fields as
``--set KEY=VALUE`` and ``--config FILE`` (a run's ``config.json`` or ``arena-gym tune``'s
``best_config.json``; ``--set`` wins), and ``--out``. Every method keeps the model with the best
validation selection score (:mod:`arena_gym.harness.selection`).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import math
import os
from pathlib import Path
from typing import Any

from agents.rl.config import TRAIN_SPLIT, TrainConfig
from arena_gym.harness.cli.common import key_values
from arena_gym.harness.out_dirs import aside_dir, check_out_dir
from arena_gym.harness.runlock import RunLock
from arena_gym.harness.train_options import add_train_arguments, config_file, config_from_args, wandb_mode
from arena_gym.harness.trainers import METHODS
from arena_gym.registry import resolve

log = logging.getLogger(__name__)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``train`` arguments (``--method``, one per TrainConfig field, ``--set``, ``--resume``) and the handler."""
    parser.add_argument(
        "--method",
        choices=tuple(METHODS),
        default="sb3",
        help="the trainer (default: sb3); give it before --config for the other methods",
    )
    add_train_arguments(parser)
    parser.add_argument(
        "--set",
        dest="fields",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field of a method other than sb3 (repeatable)",
    )
    parser.add_argument(
        "--resume",
        type=Path,
        default=None,
        metavar="DIR",
        help="continue the sb3 run in DIR from its latest checkpoint (its own config; --steps may raise the budget)",
    )
    sb3 = {f.name: parser.get_default(f.name) for f in dataclasses.fields(TrainConfig) if f.name != "out_dir"}
    parser.set_defaults(handler=handle, sb3_defaults=sb3)


def set_wandb_env(mode: str) -> None:
    """Point wandb at ``mode`` and switch its telemetry off, before wandb is imported."""
    os.environ["WANDB_MODE"] = mode
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    os.environ.setdefault("WANDB_SILENT", "true")


def quiet_generators(args: argparse.Namespace) -> None:
    """One workload per episode: keep the generators' notes out of the log (unless verbose)."""
    if not getattr(args, "verbose", False):
        logging.getLogger("traces").setLevel(logging.WARNING)
        logging.getLogger("envs.workload").setLevel(logging.WARNING)


def handle(args: argparse.Namespace) -> int:
    """Train by ``--method``; the run directory is locked while the run writes it (:class:`arena_gym.harness.runlock.RunLock`)."""
    return handle_sb3(args) if args.method == "sb3" else handle_method(args)


def method_config(args: argparse.Namespace, config_type: type) -> Any:
    """The method's config: ``--config``'s fields, then ``--set``'s (ValueError naming a bad one)."""
    from arena_gym.harness.tune import coerce

    changed = sorted(k for k, v in args.sb3_defaults.items() if getattr(args, k) != v and k != "progress")
    if changed or args.resume is not None or args.wandb:
        flags = ", ".join(f"--{k.replace('_', '-')}" for k in changed) or "--resume/--wandb"
        raise ValueError(f"{flags}: options of --method sb3; give --method {args.method}'s fields as --set KEY=VALUE")
    values: dict[str, Any] = {}
    if args.config is not None:
        values.update(config_file(args.config, config_type, sections=("config",)))  # as runs and tune write it
    values.update(key_values(args.fields, "--set", lambda key, value: coerce(config_type, key, value)))
    return config_type(**values)


def handle_method(args: argparse.Namespace) -> int:
    """A method other than sb3: its config checked first, then the run (with progress bars unless --no-progress);
    the best selection score printed."""
    method = resolve(METHODS[args.method])
    config = method_config(args, method.config_type)
    out = check_out_dir(args.out_dir, kind=f"train:{args.method}", replace=args.replace)
    quiet_generators(args)
    with RunLock(out, "train"), aside_dir(out) as work:  # these methods do not resume: a stopped run leaves nothing
        best = method.objective(
            config, work, lambda step, score: log.info("best so far @%d: %.4f", step, score), progress=args.progress
        )
    print(
        f"trained by {args.method}: best validation selection score {best:.4f} (geometric-mean padded-JCT ratio to arena)"
    )
    print(f"results: {out}")
    return 0


def handle_sb3(args: argparse.Namespace) -> int:
    """Validate everything first (a bad value fails before any work), then train or resume and print the summary."""
    if args.fields:
        raise ValueError("--set: sb3 takes its fields as options (see arena-gym train --help)")
    try:
        config = config_from_args(args)
        from agents.rl.env_factory import env_config

        env_config(config.env_id, config.env_overrides_for(TRAIN_SPLIT))
        if args.resume is None:  # another command's results refused before the lock, which is written beside them
            check_out_dir(config.out_dir, kind="train:sb3", replace=True)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    set_wandb_env(wandb_mode(args))
    quiet_generators(args)
    from arena_gym.harness.trainers.sb3 import resume, train

    if args.resume is not None:
        with RunLock(args.resume, "train", flag="--resume", create=False):
            result = resume(args.resume, steps=args.steps if args.steps != TrainConfig.steps else None)
    else:
        with RunLock(config.out_dir, "train"):
            result = train(config, replace=args.replace)
    print(f"trained {result.timesteps} steps in {result.wall_s:.0f} s")
    for key, value in result.metrics.items():
        figure = f"{value / 3600:.2f} h" if math.isfinite(value) else "n/a (some jobs never finished)"
        print(f"  {key.removesuffix('_avg_jct_s'):>12}: mean avg JCT {figure}")
    print(f"model: {result.model_path}")
    print(f"results: {result.out_dir}")
    return 0
