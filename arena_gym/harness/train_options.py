"""The command-line options of both training front ends, generated from TrainConfig's fields.

``arena-gym train`` and ``scripts/train_agent.py`` call :func:`add_train_arguments` and
:func:`config_from_args`, so their options, defaults and help come from the dataclass fields
and cannot drift apart. Importing this module loads no torch and no SB3.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.rl.config import TrainConfig
from arena_gym.fields import from_text, hints_of, read_fields
from arena_gym.harness.cli.common import key_values, text_type


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """Add one option per TrainConfig field (defaults and help from the field), plus ``--wandb``."""
    hints = hints_of(TrainConfig)
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
        hint, default = hints[f.name], getattr(defaults, f.name)
        origin = typing.get_origin(hint)
        kwargs: dict[str, Any] = {"dest": f.name, "help": f.metadata["help"]}
        if hint is bool:
            parser.add_argument(flag, action="store_false" if default else "store_true", **kwargs)
            continue
        if origin is tuple:
            kwargs.update(type=text_type(hint), default=default, metavar="A,B,...")
            kwargs["help"] += f" (default: {','.join(map(str, default))})"
        elif origin is not None and origin is not typing.Literal:
            kwargs.update(action="append", default=[], metavar="KEY=VALUE")
        else:
            kwargs.update(type=text_type(hint), default=default)
            if origin is typing.Literal:
                kwargs["metavar"] = "{" + ",".join(map(str, typing.get_args(hint))) + "}"
            kwargs["help"] += f" (default: {default})"
        parser.add_argument(flag, **kwargs)
    parser.add_argument(
        "--wandb", action="store_true", help="track the run with wandb, offline (same as --wandb-mode offline)"
    )
    parser.add_argument(
        "--config",
        action=ConfigFileAction,
        metavar="FILE",
        help="take the fields from FILE (a run's config.json, or arena-gym tune's best_config.json; never --out); "
        "options given beside it win",
    )
    parser.add_argument(
        "--replace",
        action="store_true",
        help="replace a finished training run of the same method already in --out, once the new one is complete "
        "(without it such a directory is refused; another command's results always are)",
    )


#: Fields a config file never sets: where the run is written.
NOT_FROM_FILE: tuple[str, ...] = ("out_dir",)


def config_file(path: str | Path, config_type: type, sections: tuple[str, ...] = ("train", "config")) -> dict[str, Any]:
    """The ``config_type`` fields of the first of ``sections`` the JSON file ``path`` holds (a run's ``config.json``
    has ``train`` or ``config``, tune's ``best_config.json`` ``config``), checked by their annotations
    (:func:`arena_gym.fields.read_fields`); one-line ValueError ``--config PATH: ...`` naming the problem."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--config {path}: cannot read it as JSON ({exc})") from None
    section = next((s for s in sections if isinstance(data, Mapping) and s in data), None)
    if section is None:
        wanted = " or ".join(repr(s) for s in sections)
        raise ValueError(f"--config {path}: no {wanted} object of {config_type.__name__} fields")
    return read_fields(config_type, data[section], f"--config {path}: {section}")


class ConfigFileAction(argparse.Action):
    """``--config FILE``: every option still at its default takes the file's value (options after it still win)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: Any = None
    ) -> None:
        """Load the file into the namespace; a bad file is a parser error (one line, exit code 2).

        With a ``--method`` other than ``sb3`` given before it, the file is the method's: only its path is kept."""
        if getattr(namespace, "method", "sb3") != "sb3":
            setattr(namespace, self.dest, values)
            return
        try:
            loaded = config_file(str(values), TrainConfig)
        except ValueError as exc:
            parser.error(f"{exc} (a file of another --method: give --method first)")
        for name, value in loaded.items():
            if name in NOT_FROM_FILE or getattr(namespace, name) != parser.get_default(name):
                continue  # where the run goes, or given on the command line before --config
            if isinstance(value, Mapping):
                value = [f"{k}={json.dumps(v)}" for k, v in value.items()]
            setattr(namespace, name, value)
        setattr(namespace, self.dest, values)


def wandb_mode(args: argparse.Namespace) -> str:
    """The wandb mode the arguments ask for."""
    return "offline" if args.wandb and args.wandb_mode == "disabled" else args.wandb_mode


def config_from_args(args: argparse.Namespace, **fixed: Any) -> TrainConfig:
    """The TrainConfig of parsed arguments (``fixed`` fields win); TypeError/ValueError naming a bad value."""
    values: dict[str, Any] = {}
    hints = hints_of(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        value = getattr(args, f.name)
        if typing.get_origin(hints[f.name]) not in (None, tuple, typing.Literal):
            value = key_values(value, f.metadata.get("flag") or f.name, lambda _key, text: from_text(text, Any))
        values[f.name] = value
    values["wandb_mode"] = wandb_mode(args)
    values.update(fixed)
    return TrainConfig(**values)
