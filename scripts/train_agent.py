"""Train a learned scheduler end to end, step by step, through the arena-gym library.

The same pipeline as ``arena-gym train``, spelled out so that it can be read and adapted:

1. describe the run in a TrainConfig (env, algorithm, budget, seeds, BC warm start, wandb);
2. ``train`` builds vectorised envs (a fresh workload per episode), the SB3 model, optionally
   clones the Arena heuristic's decisions, learns, and scores the agent against FCFS and the
   Arena heuristic on validation workloads along the way;
3. the best model (lowest validation JCT) is then scored once more on *test* workloads whose
   seeds were used neither for training nor for choosing the model, and the table is written.

The saved model is a Policy for every other command: ``arena-gym compare --policies
fcfs,arena,sb3:RUN/best_model.zip ...``. Example (under a minute on one core)::

    python scripts/train_agent.py --steps 8192 --bc-steps 2000 --out results/train_demo
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(s) for s in text.split(",") if s.strip())


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="maskable_ppo", help="maskable_ppo | ppo | dqn")
    parser.add_argument("--env", default="ArenaGym/Tiny-v0", help="registered env id")
    parser.add_argument("--env-args", type=json.loads, default={}, help='EnvConfig overrides as JSON, e.g. \'{"reward_scale": 1e-5}\'')
    parser.add_argument("--steps", type=int, default=20_000, help="environment steps")
    parser.add_argument("--n-envs", type=int, default=2, help="parallel environments (DummyVecEnv)")
    parser.add_argument("--seed", type=int, default=0, help="training seed")
    parser.add_argument("--lr", type=float, default=3e-4, help="learning rate")
    parser.add_argument("--ent-coef", type=float, default=0.01, help="entropy bonus")
    parser.add_argument("--gamma", type=float, default=0.99, help="discount factor")
    parser.add_argument("--net-arch", type=_ints, default=(128, 128), help="hidden layer sizes of the policy and value nets")
    parser.add_argument("--bc-steps", type=int, default=0, help="behaviour-cloning samples from the Arena heuristic")
    parser.add_argument("--eval-every", type=int, default=5_000, help="validation period in steps")
    parser.add_argument("--eval-seeds", type=_ints, default=tuple(range(1_000_000, 1_000_008)), help="validation seeds")
    parser.add_argument("--test-seeds", type=_ints, default=tuple(range(2_000_000, 2_000_020)), help="test seeds")
    parser.add_argument("--out", type=Path, default=Path("results/train_agent"), help="run directory")
    parser.add_argument("--wandb", choices=("disabled", "offline", "online"), default="disabled", help="wandb mode")
    return parser.parse_args()


def main() -> None:
    """Train, pick the best model on validation workloads, score it on test workloads."""
    args = parse_args()
    os.environ["WANDB_MODE"] = args.wandb  # before wandb is imported
    os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("traces").setLevel(logging.WARNING)  # one workload per episode

    from agents.rl.artifact import load_model
    from agents.rl.evaluate import Evaluator, baseline_policies, model_policy, summarise
    from agents.rl.train import TrainConfig, train
    from arena_gym.results import to_markdown, write_csv

    # 1. The run.
    config = TrainConfig(algo=args.algo, env_id=args.env, env_overrides=args.env_args, steps=args.steps,
                         n_envs=args.n_envs, seed=args.seed, learning_rate=args.lr, ent_coef=args.ent_coef,
                         gamma=args.gamma, net_arch=args.net_arch, bc_warm_start_steps=args.bc_steps, eval_every=args.eval_every,
                         eval_seeds=args.eval_seeds, out_dir=str(args.out), wandb_mode=args.wandb)
    if set(args.test_seeds) & (set(args.eval_seeds) | set(config.training_seeds)):
        raise SystemExit("test seeds must differ from the training and validation seeds")

    # 2. Training, with validation against FCFS and the Arena heuristic.
    result = train(config)
    print(f"{result.timesteps} steps in {result.wall_s:.0f} s; model: {result.model_path}")
    if result.bc is not None:
        print(f"behaviour cloning: held-out agreement with the expert {100 * result.bc.holdout_agreement:.1f}%")

    # 3. The chosen model on test workloads nobody looked at.
    model, info = load_model(result.best_model_path or result.model_path)
    evaluator = Evaluator(info.env_config, args.test_seeds)
    policies = {"agent": model_policy(model, info.env_config), **baseline_policies(config.eval_baselines, config.seed)}
    table = evaluator.score(policies)
    write_csv(args.out / "test_eval.csv", table)
    summary = summarise(table)
    write_csv(args.out / "test_summary.csv", summary)
    print(to_markdown(summary))


if __name__ == "__main__":  # required: SubprocVecEnv children re-import this file
    main()
