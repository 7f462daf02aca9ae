"""scripts/train_residual.py: one option per config field; a bad value or folder is one line and exit code 2."""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers import load_script

script = load_script("train_residual")


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--iterations", "0"], "iterations must be >= 1"),
        (["--loads", "0.9", "-2"], "loads must be numbers > 0"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(monkeypatch, capsys, tmp_path, argv, problem: str) -> None:
    monkeypatch.setattr(sys, "argv", ["train_residual.py", "--out", str(tmp_path / "out"), *argv])
    assert script.main() == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and err.startswith("train_residual: ") and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_a_folder_it_does_not_own_is_refused(monkeypatch, capsys, tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.setattr(sys, "argv", ["train_residual.py", "--out", str(tmp_path)])
    assert script.main() == 2
    assert "not an arena-gym results directory" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_config_file_gives_the_defaults_and_options_beside_it_win(monkeypatch, tmp_path) -> None:
    path = tmp_path / "best_config.json"
    path.write_text(json.dumps({"config": {"sigma": 0.7, "pairs": 6, "loads": [1.2], "iterations": 9}}))
    monkeypatch.setattr(sys, "argv", ["train_residual.py", "--out", "x", "--config", str(path), "--iterations", "2"])
    args = script.parse_args()
    assert (args.sigma, args.pairs, args.loads, args.iterations) == (0.7, 6, (1.2,), 2)


@pytest.mark.parametrize(
    ("text", "problem"),
    [("{", "cannot read it as JSON"), ("[]", "no 'config' object"), ('{"config": {"speed": 1}}', "no field 'speed'")],
)
def test_a_bad_config_file_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path, text: str, problem: str) -> None:
    path = tmp_path / "c.json"
    path.write_text(text)
    monkeypatch.setattr(sys, "argv", ["train_residual.py", "--out", str(tmp_path / "out"), "--config", str(path)])
    with pytest.raises(SystemExit) as stop:
        script.main()
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and problem in err and err.startswith("train_residual: --config") and "\n" not in err
