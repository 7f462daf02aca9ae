"""The README's tour runs as written in a fresh copy of the repository, every command exiting 0 (slow)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.helpers import load_script

tour = load_script("run_tour")


def test_the_tour_block_is_found_and_every_line_is_a_command() -> None:
    commands = tour.tour_commands((REPO / "README.md").read_text())
    assert len(commands) >= 6 and all(c.startswith("arena-gym ") for c in commands)
    assert not any("../shared" in c for c in commands)  # a fresh clone has no artifact data


@pytest.mark.slow
def test_the_tour_runs_as_written(tmp_path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("stable_baselines3")
    assert tour.run_tour(tour.fresh_copy(tmp_path / "arena-gym")) == 0


class Handshake(io.StringIO):
    """A sink that creates ``seen`` once it has received ``first`` (the child waits for that file to finish)."""

    def __init__(self, seen: Path) -> None:
        super().__init__()
        self.seen = seen

    def write(self, text: str) -> int:
        written = super().write(text)
        if "first" in self.getvalue():
            self.seen.touch()
        return written


def test_a_commands_output_streams_while_it_runs(tmp_path) -> None:
    seen = tmp_path / "seen"
    child = (
        "import pathlib, sys, time\n"
        "print('first', flush=True)\n"
        "print('bar 1/2', end='\\r', file=sys.stderr, flush=True)\n"
        "for _ in range(600):\n"
        f"    if pathlib.Path({str(seen)!r}).exists(): break\n"
        "    time.sleep(0.05)\n"
        "else:\n"
        "    sys.exit(3)  # the output did not reach the sink while this command ran\n"
        "print('last')\n"
    )
    sink = Handshake(seen)
    assert tour.stream([sys.executable, "-c", child], tmp_path, dict(os.environ), sink) == 0
    assert sink.getvalue().split() == ["first", "bar", "1/2", "last"]
