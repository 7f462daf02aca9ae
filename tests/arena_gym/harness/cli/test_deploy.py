"""``arena-gym deploy`` refuses bad input with one line and exit code 2, before any process starts or file is written."""

from __future__ import annotations

import json

import pytest

from arena_gym.harness.cli import main
from real_runner.live.journal import Journal


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(["deploy", *args])
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "nope"], "unknown policy 'nope'"),
        (["--testbed", "cpu-9"], "unknown testbed 'cpu-9'"),
        (["--trace", "live:work=0"], "work must be in"),
        (["--time-scale", "-1"], "--time-scale: must be finite and > 0"),
        (["--launcher", "slurm"], "invalid choice: 'slurm'"),
        (["--perf", "noisy:"], "needs an argument"),
        (["--precision", "fp64"], "invalid choice: 'fp64'"),
    ],
)
def test_bad_settings_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, args, message) -> None:
    out = tmp_path / "out"
    code, err = run(capsys, *args, "--out", str(out))
    assert code == 2 and message in err and len(err.splitlines()) == 1
    assert not out.exists()


def test_the_precision_flag_reaches_the_jobs_live_config() -> None:
    import argparse

    from arena_gym.harness.cli.deploy import _config, configure
    from arena_gym.harness.deploy import DeployConfig

    parser = argparse.ArgumentParser()
    configure(parser)
    assert _config(parser.parse_args(["--precision", "bf16"])).live_config().precision == "bf16"
    assert _config(parser.parse_args([])).live_config().precision == "auto"  # the testbed's, then the device's
    with pytest.raises(ValueError, match="^deploy: precision 'fp64' is unknown"):
        DeployConfig(precision="fp64")
    with pytest.raises(ValueError, match="^--time-scale must be finite and > 0, got 0.0$"):
        DeployConfig(time_scale=0.0)


def test_jobs_the_runner_cannot_train_or_machines_it_cannot_reach_are_refused(tmp_path, capsys) -> None:
    trace = tmp_path / "moe.csv"
    trace.write_text(
        "job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s\nm1,0,moe__2.4B,32,10,cpu,1,\n"
    )
    code, err = run(capsys, "--trace", str(trace), "--out", str(tmp_path / "a"))
    assert code == 2 and "the runner cannot train moe__2.4B" in err
    lab = tmp_path / "lab.json"
    lab.write_text(json.dumps({"device_type": "a100", "nodes": [{"host": "10.0.0.1", "devices": [0]}]}))
    code, err = run(capsys, "--testbed", str(lab), "--trace", "live:gpu_type=a100", "--out", str(tmp_path / "b"))
    assert code == 2 and "names host(s) 10.0.0.1; use the ray launcher" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_resume_takes_its_settings_from_the_journal_and_an_unfinished_one_is_not_overwritten(tmp_path, capsys) -> None:
    code, err = run(capsys, "--resume", str(tmp_path))
    assert code == 2 and "no deployment journal" in err
    journal = Journal(tmp_path / Journal.FILENAME)
    with journal.transaction():
        journal.set_meta("status", "running")
    journal.close()
    code, err = run(capsys, "--resume", str(tmp_path), "--policy", "fcfs", "--round", "5", "--stale-timeout", "9")
    assert code == 2 and "drop --policy, --round, --stale-timeout" in err
    code, err = run(capsys, "--resume", str(tmp_path))
    assert code == 2 and "holds no deployment settings" in err
    before = sorted(p.name for p in tmp_path.iterdir())
    code, err = run(capsys, "--testbed", "cpu-1", "--trace", "live:n_jobs=1", "--out", str(tmp_path))
    assert code == 2 and "holds an unfinished deployment (running); resume it with --resume" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_cuda_testbed_on_a_machine_without_cuda_is_refused_before_anything_is_launched(tmp_path, capsys) -> None:
    from real_runner.preflight import probe_machine

    if probe_machine(gpu=True).cuda:
        pytest.skip("this machine has CUDA")
    lab = tmp_path / "lab.json"
    lab.write_text(
        json.dumps({"name": "lab", "device_type": "a100", "nodes": [{"host": "localhost", "devices": [0, 1]}]})
    )
    out = tmp_path / "out"
    code, err = run(capsys, "--testbed", str(lab), "--trace", "live:gpu_type=a100", "--out", str(out))
    assert code == 2 and len(err.splitlines()) == 1
    assert err.endswith("preflight: testbed lab names a100 (CUDA) devices, but CUDA is not available on this machine; "
                        "use a cpu testbed (cpu-1, cpu-2, cpu-4) or a machine with GPUs")  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.json"]


def test_the_sim_vs_live_report_says_when_an_oversubscribed_testbed_explains_the_error() -> None:
    from arena_gym.harness.cli.deploy import sim_vs_live_notes

    over = {"sim_avg_jct_error": -0.36, "oversubscription": 2.0}
    [note] = sim_vs_live_notes(over, "profile:p.json")
    assert note.startswith("the testbed is oversubscribed 2.0x on this machine's cores") and "\n" not in note
    assert len(sim_vs_live_notes(over, "estimator")) == 2
    assert sim_vs_live_notes({"sim_avg_jct_error": -0.02, "oversubscription": 1.0}, "profile:p.json") == []
    assert sim_vs_live_notes({"sim_avg_jct_error": float("nan"), "oversubscription": 2.0}, "estimator") == []
