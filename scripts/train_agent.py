"""Train a learned scheduler end to end and score it on test workloads it never saw, through the library.

The same pipeline as ``arena-gym train`` (the options are generated from the same TrainConfig),
spelled out so that it can be read and adapted:

1. describe the run in a TrainConfig (env, algorithm, budget, seeds, BC warm start, wandb);
2. ``train`` builds vectorised envs drawing fresh workloads from the *train* split, the SB3
   model, optionally clones heuristics' decisions, learns, and scores the agent against the
   baselines on the *validation* split along the way, keeping the best model;
3. the best model is then scored by the evaluation protocol on a *test* suite (workloads used
   neither for training nor for choosing the model) against Arena, Tiresias, SRTF and FCFS.

Example (a few minutes on one core)::

    python scripts/train_agent.py --env ArenaGym/Tiny-v1 --steps 8192 --bc-steps 2000 --out results/train_demo
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from arena_gym import REAL_DATA_DIR
from arena_gym.harness.cli import OneLineParser, guarded

if TYPE_CHECKING:
    from agents.rl.config import TrainConfig
    from arena_gym.harness.evaluate import EvalConfig

PROG = "train_agent"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options: the TrainConfig's, plus the test suite; a bad one -> one line and exit code 2."""
    from arena_gym.harness.suites import SUITE_NAMES
    from arena_gym.harness.train_options import add_train_arguments

    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    add_train_arguments(parser)
    parser.add_argument(
        "--test-suite",
        default="env-test",
        choices=("env-test", *SUITE_NAMES),
        help="evaluation suite of the test (env-test: the test split of the training env)",
    )
    parser.add_argument(
        "--test-policies", default="arena,tiresias,srtf,fcfs", help="heuristics the agent is tested against"
    )
    parser.add_argument("--data-dir", default=REAL_DATA_DIR, help="folder of the real traces")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Parse, then train and test; bad input -> one line and exit code 2 (before any training), Ctrl-C -> 130."""
    args = parse_args(argv)
    return guarded(PROG, lambda: train_and_test(args))


def train_and_test(args: argparse.Namespace) -> int:
    """Train, pick the best model on validation workloads, score it on the test suite."""
    from arena_gym.harness.cli.train import set_wandb_env
    from arena_gym.harness.train_options import config_from_args, wandb_mode

    set_wandb_env(wandb_mode(args))  # before wandb is imported
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for quiet in ("traces", "envs.workload"):  # one workload per episode
        logging.getLogger(quiet).setLevel(logging.WARNING)

    from agents.rl.config import TRAIN_SPLIT
    from agents.rl.env_factory import env_config
    from arena_gym.harness.evaluate import EvalConfig
    from arena_gym.harness.runlock import RunLock
    from arena_gym.harness.scoring import baseline_policies
    from arena_gym.harness.trainers.sb3 import prepare_run_dir

    # 1. The run, and the test's settings checked before any training.
    try:
        config = config_from_args(args)
    except TypeError as exc:
        raise ValueError(str(exc)) from None
    env_config(config.env_id, config.env_overrides_for(TRAIN_SPLIT))
    prepare_run_dir(config.out_dir, args.replace)  # another command's results, or a finished run without --replace
    test_config = EvalConfig(
        policies=tuple(args.test_policies.split(",")),
        suite="synthetic" if args.test_suite == "env-test" else args.test_suite,
        data_dir=args.data_dir,
        out_dir=str(Path(config.out_dir) / "test"),
        seed=config.seed,
        wandb_mode=config.wandb_mode,
        progress=config.progress,
    )
    baseline_policies(test_config.policies, config.seed)
    if args.test_suite != "env-test":
        test_config.build_suite()

    with RunLock(config.out_dir, PROG):
        return _train_and_test(args, config, test_config)


def _train_and_test(args: argparse.Namespace, config: TrainConfig, test_config: EvalConfig) -> int:
    """Steps 2 and 3, while the run directory is locked."""
    from agents.rl.config import TEST_SPLIT
    from agents.rl.env_factory import env_config
    from arena_gym.harness.evaluate import evaluate
    from arena_gym.harness.suites import env_suite
    from arena_gym.harness.trainers.sb3 import train

    # 2. Training, with validation against the baselines.
    result = train(config, replace=args.replace)
    print(f"{result.timesteps} steps in {result.wall_s:.0f} s; model: {result.model_path}")
    if result.bc is not None:
        print(f"behaviour cloning: held-out agreement with the experts {100 * result.bc.holdout_agreement:.1f}%")

    # 3. The chosen model on test workloads nobody looked at.
    model = result.best_model_path or result.model_path
    suite = (
        env_suite(env_config(config.env_id, config.env_overrides_for(TEST_SPLIT)))
        if args.test_suite == "env-test"
        else None
    )
    test = evaluate(dataclasses.replace(test_config, policies=(f"agent=sb3:{model}", *test_config.policies)), suite)
    print((test.out_dir / "summary.md").read_text())
    return 0


if __name__ == "__main__":  # required: SubprocVecEnv children re-import this file
    sys.exit(main())
