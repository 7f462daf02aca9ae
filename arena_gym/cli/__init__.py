"""The ``arena-gym`` command line: one entry point, subcommands resolved lazily from a registry."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from arena_gym.registry import resolve

#: Subcommand name -> ``module:configure`` (``configure(parser)`` adds arguments and a handler).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "simulate": ("arena_gym.cli.simulate:configure", "run one policy on a trace and cluster"),
    "compare": ("arena_gym.cli.compare_cmd:configure", "compare policies on the same traces and cluster"),
    "trace": ("arena_gym.cli.trace_cmd:configure", "inspect or convert traces"),
    "estimate": ("estimator.cli:configure", "query, validate or calibrate the performance estimator"),
    "train": ("agents.rl.cli:configure", "train a learned scheduling agent (stable-baselines3)"),
}


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser."""
    parser = argparse.ArgumentParser(prog="arena-gym", description="Arena scheduling research gym")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (target, help_text) in SUBCOMMANDS.items():
        try:
            configure = resolve(target)
        except ImportError as exc:  # an optional extra is not installed
            sub.add_parser(name, help=f"{help_text} (unavailable: {exc})").set_defaults(
                handler=lambda _args, _e=exc, _n=name: _unavailable(_n, _e))
            continue
        configure(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def _unavailable(name: str, exc: Exception) -> int:
    print(f"arena-gym {name}: unavailable, missing dependency: {exc}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the subcommand, map library errors to one-line messages (exit 2)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.handler(args) or 0)
    except (ValueError, FileNotFoundError, KeyError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"arena-gym {args.command}: error: {message}", file=sys.stderr)
        return 2
