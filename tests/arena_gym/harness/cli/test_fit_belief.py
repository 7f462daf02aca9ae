"""``arena-gym fit-belief``: refits a packaged belief into a folder and describes it; a missing data folder is one line."""

from __future__ import annotations

from pathlib import Path

from agents.belief import default_belief, read_belief
from arena_gym.harness.cli import main


def test_the_synthetic_refit_is_the_packaged_belief(tmp_path: Path, capsys) -> None:
    assert main(["fit-belief", "--kind", "synthetic", "--out", str(tmp_path)]) == 0
    fitted = read_belief(tmp_path / "belief-synthetic.json")
    packaged = default_belief("synthetic")
    assert (fitted.groups, fitted.arrivals, fitted.unit) == (packaged.groups, packaged.arrivals, packaged.unit)
    assert "belief-synthetic.json:" in capsys.readouterr().out


def test_the_real_belief_needs_the_data_folder(tmp_path: Path, capsys) -> None:
    argv = ["fit-belief", "--kind", "real", "--data-dir", str(tmp_path / "none"), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no such folder" in err and err.count("\n") == 1 and not (tmp_path / "out").exists()
