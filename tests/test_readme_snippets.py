"""Every Python snippet of README.md runs as written (in a scratch directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), re.DOTALL)


def test_the_readme_has_python_snippets() -> None:
    assert len(SNIPPETS) >= 2


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_snippet_runs(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(SNIPPETS[index], f"README.md snippet {index + 1}", "exec"), {"__name__": "__main__"})
    printed = capsys.readouterr().out.split()
    assert printed and float(printed[0]) > 0  # each snippet prints the jobs it finished first
