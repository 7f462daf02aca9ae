"""Train the residual network on Arena's Gittins order and urgency (the parameterised Arena action space).

Evolution strategies on the real traces' train windows, model selection on the validation
windows (see :mod:`arena_gym.harness.residual_train`); the result is ``OUT/residual.json``,
a policy as ``residual:OUT/residual.json`` for ``arena-gym evaluate``, ``simulate`` or ``deploy``.

``--config FILE`` takes the fields from a JSON file with a ``config`` object (an earlier run's
``config.json``, or the ``best_config.json`` of ``arena-gym tune``); options given beside it win.

Example (the documented run, about 30 minutes on 2 cores)::

    python scripts/train_residual.py --config benchmarks/results/residual/tune/best_config.json \\
        --out benchmarks/results/residual/train-tuned
"""

from __future__ import annotations

import argparse
import sys


def parse_args() -> argparse.Namespace:
    """One option per field of ResidualTrainConfig, plus ``--out`` and ``--config`` (a file's values as the defaults)."""
    from arena_gym.harness.cli.trainer_script import trainer_args
    from arena_gym.harness.residual_train import ResidualTrainConfig

    return trainer_args(__doc__, "train_residual", ResidualTrainConfig)


def main() -> int:
    """Train and write the weights; a bad option, file or data folder is one line on stderr and exit code 2."""
    from arena_gym.harness.cli.trainer_script import run_trainer_script
    from arena_gym.harness.residual_train import ResidualTrainConfig, ResidualTrainer

    done = (
        "best on validation: iteration {iteration}, geomean ratio {validation_geomean_ratio:.4f} -> {out}/residual.json"
    )
    return run_trainer_script(parse_args(), "train_residual", ResidualTrainConfig, ResidualTrainer, done)


if __name__ == "__main__":
    sys.exit(main())
