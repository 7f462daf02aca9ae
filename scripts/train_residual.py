"""Train the residual network on Arena's Gittins order and urgency (the parameterised Arena action space).

Evolution strategies on the real traces' train windows, model selection on the validation
windows (see :mod:`arena_gym.harness.residual_train`); the result is ``OUT/residual.json``,
a policy as ``residual:OUT/residual.json`` for ``arena-gym evaluate``, ``simulate`` or ``deploy``.

Example (the documented run, about 30 minutes on 2 cores)::

    python scripts/train_residual.py --out benchmarks/results/residual/train
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys


def parse_args() -> argparse.Namespace:
    """One option per field of ResidualTrainConfig, plus ``--out``."""
    from arena_gym.harness.residual_train import ResidualTrainConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results directory (new, empty, or an earlier results directory)")
    for field in dataclasses.fields(ResidualTrainConfig):
        default = getattr(ResidualTrainConfig(), field.name)
        flag = "--" + field.name.replace("_", "-")
        if isinstance(default, tuple):
            kind = float if default and isinstance(default[0], float) else str
            parser.add_argument(
                flag, type=kind, nargs="+", default=default, help=f"(default: {' '.join(map(str, default))})"
            )
        else:
            parser.add_argument(flag, type=type(default), default=default, help=f"(default: {default})")
    return parser.parse_args()


def main() -> int:
    """Train and write the weights; a bad option or data folder is one line on stderr and exit code 2."""
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for quiet in ("traces", "envs.workload"):
        logging.getLogger(quiet).setLevel(logging.WARNING)
    from arena_gym.harness.residual_train import ResidualTrainConfig, ResidualTrainer

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(ResidualTrainConfig)}
    try:
        config = ResidualTrainConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
        trainer = ResidualTrainer(config, args.out)
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
