"""Every generated block of the README and docs/ whose source is a committed result shows that result today."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import load_script

docs = load_script("update_docs_tables")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _committed_blocks() -> list[tuple[Path, str]]:
    """(page, source) of every block rendered from a file under benchmarks/ (committed results)."""
    return [
        (page, match.group(3))
        for page in PAGES
        for match in docs.BLOCK.finditer(page.read_text())
        if match.group(3).startswith("benchmarks/")
    ]


def test_the_pages_show_committed_results() -> None:
    assert {source for _, source in _committed_blocks()} >= {
        "benchmarks/results/frozen-test/main/summary.csv",
        "benchmarks/results/residual/real-test/summary.csv",
    }


@pytest.mark.parametrize(("page", "source"), _committed_blocks(), ids=lambda v: str(v).rsplit("/", 1)[-1])
def test_a_generated_block_is_current(page: Path, source: str) -> None:
    text = page.read_text()
    for match in docs.BLOCK.finditer(text):
        if match.group(3) == source:
            opening, kind, _, raw, body, _ = match.groups()
            where = f"{page.name}:{text.count(chr(10), 0, match.start()) + 1}"
            options = docs._options(kind, raw, where)
            fresh = (
                docs.render_table(REPO / source, options, where) if kind == "table" else docs.render_text(REPO / source)
            )
            assert body == fresh, f"{where}: the block of {source} is stale (python scripts/update_docs_tables.py)"


def _list_blocks() -> list[tuple[Path, str]]:
    """(page, what) of every ``list:`` block: lists generated from the registries and the repository."""
    return [(page, m.group(3)) for page in PAGES for m in docs.BLOCK.finditer(page.read_text()) if m.group(2) == "list"]


def test_the_readme_lists_the_commands_and_scripts_and_a_page_every_name() -> None:
    assert {what for _, what in _list_blocks()} == set(docs.LISTS)
    assert {what for page, what in _list_blocks() if page.name == "README.md"} == {"commands", "scripts"}


@pytest.mark.parametrize(("page", "what"), _list_blocks(), ids=lambda v: str(v).rsplit("/", 1)[-1])
def test_a_generated_list_is_current(page: Path, what: str) -> None:
    text = page.read_text()
    for match in docs.BLOCK.finditer(text):
        if match.group(2) == "list" and match.group(3) == what:
            where = f"{page.name}:{text.count(chr(10), 0, match.start()) + 1}"
            fresh = docs.render_block("list", what, {}, REPO, where)
            assert match.group(5) == fresh, f"{where}: the list {what} is stale (python scripts/update_docs_tables.py)"
