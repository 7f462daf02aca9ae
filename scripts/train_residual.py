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
import logging
import sys


def parse_args() -> argparse.Namespace:
    """One option per field of ResidualTrainConfig, plus ``--out`` and ``--config`` (a file's values as the defaults)."""
    from arena_gym.harness.config_options import parse_config_options
    from arena_gym.harness.residual_train import ResidualTrainConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results directory (new, empty, or an earlier results directory)")
    return parse_config_options(parser, ResidualTrainConfig, "train_residual")


def main() -> int:
    """Train and write the weights; a bad option or data folder is one line on stderr and exit code 2."""
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for quiet in ("traces", "envs.workload"):
        logging.getLogger(quiet).setLevel(logging.WARNING)
    from arena_gym.harness.config_options import config_of
    from arena_gym.harness.residual_train import ResidualTrainConfig, ResidualTrainer

    try:
        trainer = ResidualTrainer(config_of(args, ResidualTrainConfig), args.out)
    except (ValueError, OSError) as err:
        print(f"train_residual: {err}", file=sys.stderr)
        return 2
    weights = trainer.run()
    logging.info(
        "best on validation: iteration %s, geomean ratio %.4f -> %s/residual.json",
        weights.trained["iteration"],
        weights.trained["validation_geomean_ratio"],
        args.out,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
