"""``arena-gym estimate profile``: one-line errors with exit code 2, and a run that writes the profile and the cost."""

from __future__ import annotations

import dataclasses

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


def test_a_testbed_the_machine_cannot_profile_is_refused_before_any_rank_starts(tmp_path, capsys, monkeypatch):
    from real_runner import preflight

    def no_ranks(*args, **kwargs):
        raise AssertionError("a rank was started")

    monkeypatch.setattr(run, "profile_testbed", no_ranks)
    lab = tmp_path / "lab.json"
    lab.write_text('{"name": "lab", "device_type": "a100", "nodes": [{"host": "localhost", "devices": [0, 1]}]}')
    out = tmp_path / "p.json"
    cases = [(["--testbed", str(lab), "--device", "cpu"], "--device cpu would measure CPU cores for a profile of a100")]
    if not preflight.probe_machine(gpu=True).cuda:
        cases.append((["--testbed", str(lab)], "names a100 (CUDA) devices, but CUDA is not available"))
    monkeypatch.setattr(preflight, "host_memory", lambda: 8 * 2**30)
    cases.append(
        (["--testbed", "cpu-2", "--models", "gpt__6.7B", "--quick"], "model gpt__6.7B needs 106.5 GB of training state")
    )
    for args, message in cases:
        models = [] if "--models" in args else ["--models", "gpt__tiny"]
        assert main(["estimate", "profile", *args, *models, "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err
    assert not out.exists()


def test_the_estimate_comes_before_any_measurement_and_progress_lines_follow(tmp_path, capsys, monkeypatch):
    from arena_gym.harness.cli import profile as profile_cli

    before: dict[str, str] = {}

    def fake(testbed, models, settings, work, *, on_progress, on_wait, **kwargs):
        before["out"] = capsys.readouterr().out  # what the user saw when the ranks were launched
        on_wait()  # no record yet: a line from the estimate alone
        on_progress("layers", 1, 4)
        on_wait()
        on_progress("comm", 2, 10)
        on_wait()
        return synthetic_profile()

    monkeypatch.setattr(run, "profile_testbed", fake)
    monkeypatch.setattr(profile_cli, "REPORT_EVERY_S", 0.0)
    args = ["estimate", "profile", "--testbed", "cpu-2", "--models", "gpt__tiny", "--quick"]
    assert main([*args, "--out", str(tmp_path / "p.json")]) == 0
    assert "estimated about" in before["out"] and "compute" in before["out"]
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("profile: ")]
    assert [line.split(",")[0] for line in lines] == [
        "profile: starting the ranks",
        "profile: layers 1/4",
        "profile: comm 2/10",
    ]
    assert all(" so far, about " in line and line.endswith(" left") for line in lines)


def test_the_a_priori_estimate_grows_with_the_work():
    from real_runner.profiler.run import estimate_phases
    from real_runner.profiler.settings import ProfilerSettings
    from real_runner.testbed import load_testbed

    quick, full = ProfilerSettings.quick(), ProfilerSettings()
    cpu1, cpu2 = load_testbed("cpu-1"), load_testbed("cpu-2")
    tiny = estimate_phases(cpu2, ["gpt__tiny"], quick, flops=1e10)
    assert set(tiny) == {"startup", "compute", "comm", "grouped", "restart"} and all(v > 0 for v in tiny.values())
    assert set(estimate_phases(cpu1, ["gpt__tiny"], quick, flops=1e10)) == {"startup", "compute", "restart"}
    no_restart = dataclasses.replace(quick, restart_steps=0)
    assert set(estimate_phases(cpu1, ["gpt__tiny"], no_restart, flops=1e10)) == {"startup", "compute"}
    assert estimate_phases(cpu2, ["gpt__tiny", "gpt__mini"], quick, flops=1e10)["restart"] == 2 * tiny["restart"]
    assert estimate_phases(cpu2, ["gpt__mini"], quick, flops=1e10)["compute"] > tiny["compute"]
    assert estimate_phases(cpu2, ["gpt__tiny"], full, flops=1e10)["compute"] > tiny["compute"]
    assert estimate_phases(cpu2, ["gpt__tiny", "gpt__mini"], quick, flops=1e10)["compute"] > tiny["compute"]
    # at a tenth of the speed, the computation takes ten times as long
    slow = estimate_phases(cpu2, ["gpt__tiny"], quick, flops=1e9)["compute"]
    assert abs(slow - 10 * tiny["compute"]) < 1e-6 * slow
