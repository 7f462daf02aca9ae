"""Train the residual network on Arena's Gittins order and urgency (the parameterised Arena action space).

Evolution strategies on the real traces' train windows, model selection on the validation
windows (see :mod:`arena_gym.harness.residual_train`); the result is ``OUT/residual.json``,
a policy as ``residual:OUT/residual.json`` for ``arena-gym evaluate``, ``simulate`` or ``deploy``.

``--config FILE`` takes the fields from a JSON file with a ``config`` object (an earlier run's
``config.json``, or the ``best_config.json`` of ``arena-gym tune``); options given beside it win.

Example (the documented run, about 30 minutes on 2 cores)::

    python scripts/train_residual.py --config benchmarks/results/residual/tune/best_config.json \
        --out benchmarks/results/residual/train-tuned
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from pathlib import Path
from typing import Any


def config_file_values(path: str) -> dict[str, Any]:
    """The ``config`` object of a JSON file, checked against ResidualTrainConfig's fields (ValueError naming the problem)."""
    from arena_gym.harness.residual_train import ResidualTrainConfig
    from arena_gym.harness.tune import coerce

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"--config {path}: cannot read it as JSON ({err})") from None
    values = data.get("config") if isinstance(data, dict) else None
    if not isinstance(values, dict):
        raise ValueError(f"--config {path}: no 'config' object")
    try:
        return {key: coerce(ResidualTrainConfig, key, value) for key, value in values.items()}
    except ValueError as err:
        raise ValueError(f"--config {path}: {err}") from None


def parse_args() -> argparse.Namespace:
    """One option per field of ResidualTrainConfig, plus ``--out`` and ``--config`` (a file's values as the defaults)."""
    from arena_gym.harness.residual_train import ResidualTrainConfig

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results directory (new, empty, or an earlier results directory)")
    parser.add_argument("--config", default=None, metavar="FILE", help="take the fields from FILE's 'config' object")
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
    config = parser.parse_known_args()[0].config
    if config is not None:
        try:
            parser.set_defaults(**config_file_values(config))
        except ValueError as err:
            parser.exit(2, f"train_residual: {err}\n")
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
