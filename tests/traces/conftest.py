"""Fixtures for the traces tests: small CSV writers and the one-line-error check.

The real data folder comes from the top-level ``shared_data`` fixture (tests/conftest.py),
which skips when ``../shared/data`` is absent.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def write_csv(tmp_path: Path) -> Callable[..., Path]:
    """Write text to a CSV file in tmp_path and return its path."""

    def write(text: str, name: str = "trace.csv") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def fails_with(write_csv) -> Callable[[Callable[[Path], object], str, str], None]:
    """Check that ``loader(file with text)`` raises a one-line ValueError matching ``pattern``.

    ``{f}`` in the pattern stands for the (escaped) file path.
    """

    def check(loader: Callable[[Path], object], text: str, pattern: str) -> None:
        path = write_csv(text)
        with pytest.raises(ValueError) as info:
            loader(path)
        message = str(info.value)
        assert "\n" not in message
        assert re.match(pattern.format(f=re.escape(str(path))), message), message

    return check
