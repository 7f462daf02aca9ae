"""Smoke runs of every CLI command on built-in defaults, and one-line errors for bad input."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from arena_gym.harness.cli import main

SMALL = "synthetic:n_jobs=30,rate_per_h=30,max_gpus=4"


def test_simulate_writes_results(tmp_path, capsys):
    out = tmp_path / "sim"
    assert (
        main(["simulate", "--policy", "fcfs", "--trace", SMALL, "--cluster", "tiny", "--out", str(out), "--seed", "2"])
        == 0
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["jobs_finished"] == 30
    assert json.loads((out / "config.json").read_text())["seed"] == 2
    assert "fcfs: 30/30 jobs finished" in capsys.readouterr().out


def test_compare_leaderboard(tmp_path, capsys):
    out = tmp_path / "cmp"
    assert (
        main(
            [
                "compare",
                "--policies",
                "fcfs,srtf",
                "--trace",
                SMALL,
                "--cluster",
                "tiny",
                "--seeds",
                "0,1",
                "--out",
                str(out),
                "--pad-jct",
                "fcfs",
            ]
        )
        == 0
    )
    board = pd.read_csv(out / "leaderboard.csv")
    assert sorted(board.policy) == ["fcfs", "fcfs", "srtf", "srtf"] and set(board.seed) == {0, 1}
    assert {
        "avg_jct_s",
        "p95_jct_s",
        "avg_queue_s",
        "makespan_s",
        "avg_throughput",
        "peak_throughput",
        "jobs_finished",
        "reconfigurations",
        "padded_jct_s",
    } <= set(board.columns)
    assert (out / "leaderboard.md").read_text().startswith("| policy |")
    assert "| srtf |" in capsys.readouterr().out


def test_same_seed_same_metrics(tmp_path):
    runs = []
    for name in ("a", "b"):
        main(["simulate", "--policy", "srtf", "--trace", SMALL, "--cluster", "tiny", "--out", str(tmp_path / name)])
        m = json.loads((tmp_path / name / "metrics.json").read_text())
        m.pop("sched_ms_per_decision")
        runs.append(m)
    assert runs[0] == runs[1]


def test_trace_info_and_convert(tmp_path, capsys):
    assert main(["trace", "info", SMALL, "--cluster", "tiny"]) == 0
    assert json.loads(capsys.readouterr().out)["jobs"] == 30
    out = tmp_path / "t.csv"
    assert main(["trace", "convert", SMALL, "--cluster", "tiny", "--out", str(out)]) == 0
    assert len(pd.read_csv(out)) == 30


@pytest.mark.parametrize(
    "argv, message",
    [
        (["simulate", "--policy", "nope", "--trace", SMALL, "--cluster", "tiny"], "unknown policy 'nope'; valid:"),
        (["simulate", "--cluster", "mars", "--trace", SMALL], "unknown cluster 'mars'"),
        (["simulate", "--trace", "missing.csv", "--cluster", "tiny"], "missing.csv"),
        (["simulate", "--trace", SMALL, "--cluster", "tiny", "--perf", "magic"], "unknown performance model 'magic'"),
        (["compare", "--trace", SMALL, "--cluster", "tiny", "--workers", "0"], "argument --workers: must be in 1..256"),
    ],
)
def test_bad_input_one_line_error(tmp_path, capsys, argv, message):
    assert main(argv + ["--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and err.startswith("arena-gym ")


def test_malformed_trace_names_file_and_row(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"
        "a,0,100,gpt__1.3B,10,128,2,a40\nb,-5,100,gpt__1.3B,10,128,2,a40\n"
    )
    assert main(["simulate", "--trace", str(bad), "--cluster", "tiny", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "bad.csv:3" in err and not (tmp_path / "o").exists()


def test_bad_argument_values_exit_2(capsys):
    assert main(["simulate", "--horizon", "-3"]) == 2
    err = capsys.readouterr().err
    assert err == "arena-gym simulate: error: argument --horizon: must be > 0: '-3' (see arena-gym simulate --help)\n"


def test_help_exits_0(capsys):
    assert main(["simulate", "--help"]) == 0
    assert "--strict" in capsys.readouterr().out


def test_compare_logs_to_wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    out = tmp_path / "cmp"
    assert (
        main(["compare", "--policies", "fcfs", "--trace", SMALL, "--cluster", "tiny", "--out", str(out), "--wandb"])
        == 0
    )
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))
