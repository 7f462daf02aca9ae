"""The README's tour runs as written in a fresh copy of the repository, every command exiting 0 (slow)."""

from __future__ import annotations

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
