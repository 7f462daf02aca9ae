"""scripts/finetune_residual.py: options from ResidualPPOConfig; bad values and files are one line and exit code 2."""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers import load_script

script = load_script("finetune_residual")


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["--steps", "0"], "steps must be >= 1"),
        (["--warm-start", "/nonexistent/w.json"], "/nonexistent/w.json"),
        (["--net-arch", "0"], "net_arch needs layer sizes"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(monkeypatch, capsys, tmp_path, argv, problem: str) -> None:
    monkeypatch.setattr(sys, "argv", ["finetune_residual.py", "--out", str(tmp_path / "out"), *argv])
    assert script.main() == 2
    err = capsys.readouterr().err.strip()
    assert problem in err and err.startswith("finetune_residual: ") and "\n" not in err
    assert not (tmp_path / "out").exists()


def test_a_config_file_gives_the_defaults(monkeypatch, tmp_path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"config": {"learning_rate": 3e-5, "net_arch": [32], "critic_warmup": 4}}))
    monkeypatch.setattr(sys, "argv", ["finetune_residual.py", "--out", "x", "--config", str(path), "--steps", "99"])
    args = script.parse_args()
    assert (args.learning_rate, args.net_arch, args.critic_warmup, args.steps) == (3e-5, (32,), 4, 99)
