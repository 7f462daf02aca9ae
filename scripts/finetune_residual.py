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
import sys


def parse_args() -> argparse.Namespace:
    """One option per field of ResidualPPOConfig, plus ``--out`` and ``--config`` (a file's values as the defaults)."""
    from arena_gym.harness.cli.trainer_script import trainer_args
    from arena_gym.harness.residual_ppo import ResidualPPOConfig

    return trainer_args(__doc__, "finetune_residual", ResidualPPOConfig)


def main() -> int:
    """Train and write the weights; a bad option, file or data folder is one line on stderr and exit code 2."""
    from arena_gym.harness.cli.trainer_script import run_trainer_script
    from arena_gym.harness.residual_ppo import ResidualPPOConfig, ResidualPPOTrainer

    done = "best on validation: {timesteps} steps, geomean ratio {validation_geomean_ratio:.4f} -> {out}/residual.json"
    return run_trainer_script(parse_args(), "finetune_residual", ResidualPPOConfig, ResidualPPOTrainer, done)


if __name__ == "__main__":
    sys.exit(main())
