"""scripts/update_docs_tables.py: generated blocks are rebuilt from their sources, nothing else changes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import load_script

docs = load_script("update_docs_tables")

CSV = "policy,avg_jct_s,jobs_finished\narena,1234.5,10\nfcfs,99.25,8\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "board.csv").write_text(CSV)
    (tmp_path / "summary.txt").write_text("line one\nline two\n")
    return tmp_path


def test_table_block_selects_sorts_and_formats(root: Path) -> None:
    text = "intro\n<!-- table:board.csv columns=policy,avg_jct_s sort=avg_jct_s -->\nstale\n<!-- /table -->\nend\n"
    out = docs.update(text, "doc.md", root)
    assert out == (
        "intro\n<!-- table:board.csv columns=policy,avg_jct_s sort=avg_jct_s -->\n"
        "| policy | avg_jct_s |\n|---|---|\n| fcfs | 99.2 |\n| arena | 1,234 |\n<!-- /table -->\nend\n"
    )
    assert docs.update(out, "doc.md", root) == out  # idempotent


def test_text_block_is_fenced_verbatim(root: Path) -> None:
    out = docs.update("<!-- text:summary.txt -->\n<!-- /text -->\n", "doc.md", root)
    assert out == "<!-- text:summary.txt -->\n```text\nline one\nline two\n```\n<!-- /text -->\n"


@pytest.mark.parametrize(
    "block, message",
    [
        ("<!-- table:missing.csv -->\n<!-- /table -->", "doc.md:2: missing.csv does not exist"),
        ("<!-- table:board.csv colums=policy -->\n<!-- /table -->", "unknown option(s) colums for table"),
        ("<!-- table:board.csv columns=policy,nope -->\n<!-- /table -->", "column(s) nope not in board.csv"),
        ("<!-- table:board.csv sort=nope -->\n<!-- /table -->", "sort column 'nope' is not in board.csv"),
    ],
)
def test_bad_blocks_name_the_problem(root: Path, block: str, message: str) -> None:
    with pytest.raises(docs.DocsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        docs.update("x\n" + block + "\n", "doc.md", root)


def test_check_mode_and_in_place_update(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = root / "doc.md"
    doc.write_text("<!-- text:summary.txt -->\nold\n<!-- /text -->\n")
    monkeypatch.setattr(docs, "REPO", root.resolve())
    assert docs.main([str(doc), "--check"]) == 1 and "out of date: doc.md" in capsys.readouterr().out
    assert "old" in doc.read_text()
    assert docs.main([str(doc)]) == 0 and "line two" in doc.read_text()
    assert docs.main([str(doc), "--check"]) == 0


def test_a_missing_source_changes_no_file(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    good, bad = root / "good.md", root / "bad.md"
    good.write_text("<!-- text:summary.txt -->\n<!-- /text -->\n")
    bad.write_text("<!-- text:gone.txt -->\n<!-- /text -->\n")
    monkeypatch.setattr(docs, "REPO", root.resolve())
    assert docs.main([str(good), str(bad)]) == 2
    assert "bad.md:1: gone.txt does not exist" in capsys.readouterr().err
    assert good.read_text() == "<!-- text:summary.txt -->\n<!-- /text -->\n"


def test_list_blocks_render_the_scripts_commands_and_names(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "b_tool.py").write_text('"""Do b.\n\nMore."""\n')
    (tmp_path / "scripts" / "a_tool.py").write_text("x = 1\n")
    out = docs.update("<!-- list:scripts -->\nold\n<!-- /list -->\n", "doc.md", tmp_path)
    assert out == (
        "<!-- list:scripts -->\n- `scripts/a_tool.py`: (no docstring)\n- `scripts/b_tool.py`: Do b.\n<!-- /list -->\n"
    )
    commands = docs.update("<!-- list:commands -->\n<!-- /list -->\n", "doc.md", tmp_path)
    assert "- `arena-gym simulate`: " in commands and "- `arena-gym list`: " in commands
    names = docs.update("<!-- list:names -->\n<!-- /list -->\n", "doc.md", tmp_path)
    assert "- `sb3:PATH`" in names and "- `noisy:SIGMA`" in names
    with pytest.raises(docs.DocsError, match="doc.md:1: unknown list 'nope'"):
        docs.update("<!-- list:nope -->\n<!-- /list -->\n", "doc.md", tmp_path)
