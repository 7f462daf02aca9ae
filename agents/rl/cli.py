"""``arena-gym train``: argument parsing and the wandb environment; the work is in :mod:`agents.rl.train`."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from agents.rl.algos import ALGOS
from agents.rl.env_factory import VEC_ENVS

WANDB_MODES = ("disabled", "offline", "online")


def _seeds(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of integers: {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _overrides(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` env overrides; VALUE is parsed as JSON when it can be (numbers, lists, null)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--env-arg expects KEY=VALUE, got {pair!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``train`` arguments and handler."""
    parser.add_argument("--algo", default="maskable_ppo", choices=sorted(ALGOS), help="learning algorithm")
    parser.add_argument("--env", default="ArenaGym/Tiny-v0", help="registered env id (ArenaGym/Tiny-v0, ...)")
    parser.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                        help="override an EnvConfig field, e.g. --env-arg reward_scale=1e-5 (repeatable)")
    parser.add_argument("--steps", type=int, default=100_000, help="environment steps over all envs")
    parser.add_argument("--n-envs", type=int, default=2, help="parallel environments")
    parser.add_argument("--vec", default="dummy", choices=sorted(VEC_ENVS), help="VecEnv kind")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model and the training workloads")
    parser.add_argument("--lr", type=float, default=3e-4, help="learning rate")
    parser.add_argument("--n-steps", type=int, default=512, help="PPO rollout length per env")
    parser.add_argument("--batch-size", type=int, default=128, help="minibatch size")
    parser.add_argument("--gamma", type=float, default=0.99, help="discount factor")
    parser.add_argument("--ent-coef", type=float, default=0.01, help="PPO entropy bonus")
    parser.add_argument("--net-arch", type=_seeds, default=(128, 128), help="hidden layer sizes, e.g. 128,128")
    parser.add_argument("--bc-steps", type=int, default=0, help="behaviour-cloning warm-start samples (0 = off)")
    parser.add_argument("--bc-expert", default="arena", help="heuristic to clone (arena, fcfs, ...)")
    parser.add_argument("--eval-every", type=int, default=10_000, help="evaluate every N steps (0 = only at the end)")
    parser.add_argument("--eval-seeds", type=_seeds, default=(1_000_000, 1_000_001, 1_000_002, 1_000_003),
                        help="validation workload seeds (disjoint from training)")
    parser.add_argument("--baselines", type=_names, default=("fcfs", "arena"), help="heuristics to score against")
    parser.add_argument("--checkpoint-every", type=int, default=25_000, help="checkpoint every N steps (0 = off)")
    parser.add_argument("--out", type=Path, default=Path("results/train"), help="run directory")
    parser.add_argument("--wandb", action="store_true", help="track the run with wandb (offline unless --wandb-mode online)")
    parser.add_argument("--wandb-mode", choices=WANDB_MODES, default=None, help="wandb mode (default: disabled, or offline with --wandb)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(handler=handle)


def wandb_mode(args: argparse.Namespace) -> str:
    """The wandb mode the arguments ask for."""
    return args.wandb_mode or ("offline" if args.wandb else "disabled")


def handle(args: argparse.Namespace) -> int:
    """Set wandb's environment, build the TrainConfig, train, print the summary."""
    mode = wandb_mode(args)
    os.environ["WANDB_MODE"] = mode
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    os.environ.setdefault("WANDB_SILENT", "true")
    if not getattr(args, "verbose", False):  # one workload per episode: keep the generators' notes out of the log
        logging.getLogger("traces").setLevel(logging.WARNING)
    from agents.rl.train import TrainConfig, train

    config = TrainConfig(
        algo=args.algo, env_id=args.env, env_overrides=_overrides(args.env_arg), steps=args.steps, n_envs=args.n_envs,
        vec=args.vec, seed=args.seed, learning_rate=args.lr, n_steps=args.n_steps, batch_size=args.batch_size,
        gamma=args.gamma, ent_coef=args.ent_coef, net_arch=args.net_arch, eval_every=args.eval_every,
        eval_seeds=args.eval_seeds, eval_baselines=args.baselines, checkpoint_every=args.checkpoint_every,
        bc_warm_start_steps=args.bc_steps, bc_expert=args.bc_expert, out_dir=str(args.out), wandb_mode=mode,
        progress=not args.no_progress)
    result = train(config)
    print(f"trained {result.timesteps} steps in {result.wall_s:.0f} s")
    for key, value in result.metrics.items():
        figure = f"{value / 3600:.2f} h" if math.isfinite(value) else "n/a (some jobs never finished)"
        print(f"  {key.removesuffix('_avg_jct_s'):>12}: mean avg JCT {figure}")
    print(f"model: {result.model_path}")
    print(f"results: {result.out_dir}")
    return 0
