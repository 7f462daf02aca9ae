"""scripts/expert_iteration.py: the warm start is named on the command line or in --config, never defaulted."""

from __future__ import annotations

import json
import sys

from tests.helpers import load_script

script = load_script("expert_iteration")


def test_without_a_warm_start_it_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setattr(sys, "argv", ["expert_iteration.py", "--out", str(tmp_path / "out")])
    assert script.main() == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("expert_iteration: ") and "warm_start" in err and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_the_warm_start_comes_from_the_option_or_the_config_file(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(sys, "argv", ["expert_iteration.py", "--out", "x", "--warm-start", "a.zip"])
    assert script.parse_args().warm_start == "a.zip"
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"config": {"warm_start": "b.zip"}}))
    monkeypatch.setattr(sys, "argv", ["expert_iteration.py", "--out", "x", "--config", str(path)])
    assert script.parse_args().warm_start == "b.zip"
