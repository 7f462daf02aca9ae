"""Regenerate the generated blocks of the documentation from benchmark and result files and from the registries.

A block is delimited by two HTML comments, which Markdown renders as nothing::

    <!-- table:results/compare/leaderboard.csv columns=policy,avg_jct_s sort=avg_jct_s -->
    ...generated Markdown table...
    <!-- /table -->

    <!-- text:benchmarks/results/reproduction/summary-rounds.txt -->
    ...the file's text in a fenced block...
    <!-- /text -->

    <!-- list:commands -->
    ...a generated Markdown list...
    <!-- /list -->

``table:CSV`` renders a CSV file as a Markdown table (optional ``columns=a,b,...`` to select and
order columns, ``sort=COLUMN`` to sort ascending); ``text:FILE`` inserts a text file verbatim;
``list:WHAT`` renders one of :data:`LISTS` (the ``arena-gym`` commands, the names the registries
hold, the scripts under ``scripts/``). Paths are relative to the repository root. Everything between the opening and closing comment
is replaced; the rest of the file is left as it is.

Usage::

    python scripts/update_docs_tables.py            # README.md and docs/*.md, in place
    python scripts/update_docs_tables.py --check    # exit 1 if any block is out of date
    python scripts/update_docs_tables.py FILE...    # only these files

A missing source file or an unknown option is a one-line error (exit code 2), and then no file
is changed.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from arena_gym.harness.cli import OneLineParser, guarded
from arena_gym.harness.out_dirs import shown_path
from arena_gym.harness.results import to_markdown

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- (table|text|list):(\S+)((?: \w+=\S+)*) -->\n)(.*?)(<!-- /\2 -->)", re.DOTALL)
OPTIONS = {"table": ("columns", "sort"), "text": (), "list": ()}
PROG = "update_docs_tables"


class DocsError(ValueError):
    """A block that cannot be generated (missing source, bad option)."""


def _options(kind: str, raw: str, where: str) -> dict[str, str]:
    options = dict(item.split("=", 1) for item in raw.split())
    unknown = sorted(set(options) - set(OPTIONS[kind]))
    if unknown:
        valid = ", ".join(OPTIONS[kind]) or "none"
        raise DocsError(f"{where}: unknown option(s) {', '.join(unknown)} for {kind}: (valid: {valid})")
    return options


def render_table(source: Path, options: dict[str, str], where: str) -> str:
    """A CSV file as a Markdown table, with the selected columns in the given order."""
    frame = pd.read_csv(source)
    if "sort" in options:
        if options["sort"] not in frame.columns:
            raise DocsError(f"{where}: sort column {options['sort']!r} is not in {source.name}")
        frame = frame.sort_values(options["sort"], kind="stable")
    if "columns" in options:
        columns = options["columns"].split(",")
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise DocsError(
                f"{where}: column(s) {', '.join(missing)} not in {source.name}; it has {', '.join(frame.columns)}"
            )
        frame = frame[columns]
    return to_markdown(frame)


def render_text(source: Path) -> str:
    """A text file in a fenced block."""
    return "```text\n" + source.read_text().rstrip("\n") + "\n```\n"


def render_commands(root: Path) -> str:
    """The ``arena-gym`` subcommands with their one-line help, from the command registry."""
    from arena_gym.harness.cli import SUBCOMMANDS

    return "".join(f"- `arena-gym {name}`: {text}\n" for name, (_, text) in SUBCOMMANDS.items())


def render_names(root: Path) -> str:
    """Every name the registries hold, as ``arena-gym list --markdown`` prints it."""
    from arena_gym.harness.names import as_markdown, sections

    return as_markdown(sections())


def render_scripts(root: Path) -> str:
    """The scripts under ``root/scripts`` with the first line of each one's docstring."""
    lines = []
    for path in sorted((root / "scripts").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        lines.append(f"- `scripts/{path.name}`: {doc.splitlines()[0] if doc else '(no docstring)'}\n")
    return "".join(lines)


#: ``list:WHAT`` -> its renderer (called with the repository root).
LISTS: dict[str, Callable[[Path], str]] = {
    "commands": render_commands,
    "names": render_names,
    "scripts": render_scripts,
}


def render_block(kind: str, path: str, options: dict[str, str], root: Path, where: str) -> str:
    """The body of one block: a table, a text file or a generated list."""
    if kind == "list":
        if path not in LISTS:
            raise DocsError(f"{where}: unknown list {path!r} (valid: {', '.join(LISTS)})")
        return LISTS[path](root)
    source = root / path
    if not source.is_file():
        raise DocsError(f"{where}: {path} does not exist (run the command that writes it first)")
    return render_table(source, options, where) if kind == "table" else render_text(source)


def update(text: str, name: str, root: Path = REPO) -> str:
    """``text`` with every generated block regenerated from its source under ``root``."""

    def replace(match: re.Match[str]) -> str:
        opening, kind, path, raw, _, closing = match.groups()
        line = text.count("\n", 0, match.start()) + 1
        where = f"{name}:{line}"
        try:
            body = render_block(kind, path, _options(kind, raw, where), root, where)
        except DocsError:
            raise
        except ValueError as err:  # not UTF-8, not a CSV table
            raise DocsError(f"{where}: {path}: {' '.join(str(err).split())}") from None
        return opening + body + closing

    return BLOCK.sub(replace, text)


def _name(path: Path) -> str:
    return shown_path(path, REPO)


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with ``--check`` compare) the blocks of the given Markdown files."""
    parser = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md and docs/*.md)")
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is out of date")
    args = parser.parse_args(argv)
    files = args.files or [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return guarded(PROG, lambda: regenerate(files, args.check))


def _read(path: Path) -> str:
    """A Markdown file's text; a one-line DocsError when it is not UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise DocsError(f"{_name(path)}: not UTF-8 text ({err.reason} at byte {err.start})") from None


def regenerate(files: list[Path], check: bool) -> int:
    """Every block of ``files`` regenerated (all checked before any file is written); ``check``: only report."""
    texts = {f: _read(f) for f in files}
    updated = {f: update(text, _name(f), REPO) for f, text in texts.items()}
    stale = [f for f, new in updated.items() if new != texts[f]]
    if check:
        for f in stale:
            print(f"out of date: {_name(f)}")
        return 1 if stale else 0
    for f in stale:
        f.write_text(updated[f], encoding="utf-8")
        print(f"updated {_name(f)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
