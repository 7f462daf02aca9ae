"""``arena-gym list``: every name the commands take (policies, prefixes, clusters, ...), read from the registries."""

from __future__ import annotations

import argparse

from arena_gym.harness.names import as_markdown, as_text, sections


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the list arguments."""
    parser.add_argument("--markdown", action="store_true", help="print Markdown (as the README's list shows it)")
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Print the names, section by section."""
    found = sections()
    print(as_markdown(found) if args.markdown else as_text(found), end="")
    return 0
