"""Command-line options generated from a frozen config dataclass, and ``--config FILE`` to read its fields back.

Used by the trainer scripts (``scripts/train_residual.py``, ``finetune_residual.py``, ``expert_iteration.py``):
one option per field with the field's default; ``--config FILE`` takes the fields from a JSON
file's ``config`` object (a run's ``config.json``, ``arena-gym tune``'s ``best_config.json``),
and options given beside it win.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from arena_gym.harness.tune import coerce


def config_file_values(path: str, config_type: type) -> dict[str, Any]:
    """The ``config`` object of a JSON file, checked against ``config_type``'s fields (ValueError naming the problem)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValueError(f"--config {path}: cannot read it as JSON ({err})") from None
    values = data.get("config") if isinstance(data, dict) else None
    if not isinstance(values, dict):
        raise ValueError(f"--config {path}: no 'config' object")
    try:
        return {key: coerce(config_type, key, value) for key, value in values.items()}
    except ValueError as err:
        raise ValueError(f"--config {path}: {err}") from None


def parse_config_options(parser: argparse.ArgumentParser, config_type: type, prog: str) -> argparse.Namespace:
    """Add one option per field of ``config_type`` and ``--config``; parse (a bad file: one line, exit code 2)."""
    parser.add_argument("--config", default=None, metavar="FILE", help="take the fields from FILE's 'config' object")
    defaults = config_type()
    for field in dataclasses.fields(config_type):
        default = getattr(defaults, field.name)
        flag = "--" + field.name.replace("_", "-")
        if isinstance(default, tuple):
            kind = type(default[0]) if default else str
            shown = " ".join(map(str, default))
            parser.add_argument(flag, type=kind, nargs="+", default=default, help=f"(default: {shown})")
        else:
            parser.add_argument(flag, type=type(default), default=default, help=f"(default: {default})")
    path = parser.parse_known_args()[0].config
    if path is not None:
        try:
            parser.set_defaults(**config_file_values(path, config_type))
        except ValueError as err:
            parser.exit(2, f"{prog}: {err}\n")
    return parser.parse_args()


def config_of(args: argparse.Namespace, config_type: type) -> Any:
    """The ``config_type`` of parsed options (its own checks raise ValueError naming a bad value)."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(config_type)}
    return config_type(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def trainer_args(doc: str, prog: str, config_type: type) -> argparse.Namespace:
    """A trainer script's options: ``--out``, then one per field of ``config_type`` and ``--config``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", required=True, help="results directory (new, empty, or an earlier results directory)")
    return parse_config_options(parser, config_type, prog)


def _trained(weights: Any) -> Mapping[str, Any]:
    return weights.trained


def run_trainer_script(
    args: argparse.Namespace,
    prog: str,
    config_type: type,
    trainer_type: type,
    done: str,
    record: Callable[[Any], Mapping[str, Any]] = _trained,
) -> int:
    """A trainer script's main: ``trainer_type(config, args.out).run()`` on the parsed options.

    A bad option, file or data folder is one line on stderr and exit code 2; ``done`` is logged,
    its ``str.format`` fields from ``record(result)`` (the trained weights' ``trained`` record)
    and ``out``, the output folder.
    """
    import logging
    import sys

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for quiet in ("traces", "envs.workload"):
        logging.getLogger(quiet).setLevel(logging.WARNING)
    try:
        trainer = trainer_type(config_of(args, config_type), args.out)
    except (ValueError, OSError) as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return 2
    result = trainer.run()
    logging.getLogger(prog).info(done.format(**record(result), out=args.out))
    return 0
