"""Fine-tune a residual network by PPO on the residual action space (ResidualArenaEnv), keeping its warm start.

The warm start is a weights file (``--warm-start``; none = zero weights, ``arena-gittins-32-f``);
``--critic-warmup N`` trains only the critic for the first N PPO updates; validation every
``--eval-every`` steps (see :mod:`arena_gym.harness.residual_ppo`). The result is
``OUT/residual.json``, the best mean actor on validation, a ``residual:`` policy.

Example (one of the two documented runs, ``benchmarks/bench_finetune.py`` runs both)::

    python scripts/finetune_residual.py --warm-start benchmarks/results/residual/train/residual.json \\
        --learning-rate 3e-5 --critic-warmup 4 --out results/finetune
"""

from __future__ import annotations

import argparse
import logging
import sys


def parse_args() -> argparse.Namespace:
    """One option per field of ResidualPPOConfig, plus ``--out`` and ``--config``."""
    from arena_gym.harness.config_options import parse_config_options
    from arena_gym.harness.residual_ppo import ResidualPPOConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results directory (new, empty, or an earlier results directory)")
    return parse_config_options(parser, ResidualPPOConfig, "finetune_residual")


def main() -> int:
    """Fine-tune and write the weights; a bad option, file or data folder is one line on stderr and exit code 2."""
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for quiet in ("traces", "envs.workload"):
        logging.getLogger(quiet).setLevel(logging.WARNING)
    from arena_gym.harness.config_options import config_of
    from arena_gym.harness.residual_ppo import ResidualPPOConfig, ResidualPPOTrainer

    try:
        trainer = ResidualPPOTrainer(config_of(args, ResidualPPOConfig), args.out)
    except (ValueError, OSError) as err:
        print(f"finetune_residual: {err}", file=sys.stderr)
        return 2
    weights = trainer.run()
    logging.info(
        "best on validation: %s steps, geomean ratio %.4f -> %s/residual.json",
        weights.trained["timesteps"],
        weights.trained["validation_geomean_ratio"],
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
