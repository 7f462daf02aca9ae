"""``arena-gym estimate profile``: one-line errors with exit code 2, and a run that writes the profile and the cost."""

from __future__ import annotations

import pytest

from arena_gym.harness.cli import main
from estimator.profile import load_profile
from real_runner.profiler import run
from tests.estimator.test_profile import synthetic_profile


@pytest.mark.parametrize(
    "args, message",
    [
        (["--testbed", "nope", "--models", "gpt__tiny"], "unknown testbed"),
        (["--testbed", "cpu-2", "--models", "moe__10B"], "dense transformers"),
        (["--testbed", "cpu-2", "--models", "gpt__tiny", "--rounds", "0"], "rounds"),
        (["--testbed", "cpu-2", "--models", "gpt__tiny", "--layer-repeats", "0"], "layer_repeats"),
        (["--testbed", "cpu-2", "--models", "gpt__tiny", "--samples", "x"], "integers"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "p.json"
    assert main(["estimate", "profile", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_a_run_writes_the_profile_and_compares_the_cost(tmp_path, capsys, monkeypatch):
    seen = {}

    def fake(testbed, models, settings, work, **kwargs):
        seen.update(testbed=testbed.name, models=models, samples=settings.samples)
        return synthetic_profile()

    monkeypatch.setattr(run, "profile_testbed", fake)
    out = tmp_path / "p.json"
    code = main(
        [
            "estimate",
            "profile",
            "--testbed",
            "cpu-2",
            "--models",
            "gpt__tiny",
            "--out",
            str(out),
            "--quick",
            "--samples",
            "1,2",
        ]
    )
    text = capsys.readouterr().out
    assert code == 0 and seen == {"testbed": "cpu-2", "models": ("gpt__tiny",), "samples": (1, 2)}
    assert load_profile(out).to_dict() == synthetic_profile().to_dict()
    assert "10 device-s" in text and "executable plans" in text
