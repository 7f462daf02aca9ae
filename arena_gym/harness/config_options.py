"""Command-line options generated from a frozen config dataclass, and ``--config FILE`` to read its fields back.

Used by the trainer scripts (``scripts/train_residual.py``, ``scripts/finetune_residual.py``):
one option per field with the field's default; ``--config FILE`` takes the fields from a JSON
file's ``config`` object (a run's ``config.json``, ``arena-gym tune``'s ``best_config.json``),
and options given beside it win.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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
