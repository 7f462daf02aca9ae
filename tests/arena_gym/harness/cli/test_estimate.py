"""Smoke tests of ``arena-gym estimate query | validate | calibrate``."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from arena_gym.harness.cli.estimate import configure


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="arena-gym estimate")
    configure(parser)
    args = parser.parse_args(argv)
    return args.handler(args)


def small_measured(path) -> str:
    rows = [
        "family,size,global_batch,gpu_type,num_nodes,gpus_per_node,num_gpus,iter_time_s,oom",
        "gpt,760M,128,a100,1,1,1,6.57527,0",
        "gpt,760M,128,a100,1,2,2,3.439135,0",
        "gpt,760M,128,a40,2,2,4,4.548393,0",
        "moe,690M,256,v100,1,2,2,4.452997,0",
        "gpt,15B,256,v100,1,16,16,,1",
    ]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_query_prints_the_grid_table(capsys):
    assert run(["query", "--model", "gpt__1.3B", "--batch", "128", "--gpu-type", "a100", "--pareto", "a100:1x4:2"]) == 0
    out = capsys.readouterr().out
    assert "gpt__1.3B" in out and "a100:2x4" in out and "*" in out and "Pareto set" in out and "GiB/GPU" in out


def test_query_resolves_a_cluster_with_node_counts_as_compare_does(capsys):
    argv = ["query", "--model", "gpt__1.3B", "--batch", "128.0", "--gpu-type", "a40", "--cluster"]
    assert run([*argv, "testbed-64"]) == 0
    assert "a40:4x2" in capsys.readouterr().out
    assert run([*argv, "testbed-64[a40=2]"]) == 0  # two a40 nodes of two GPUs: no shape of 8 GPUs
    out = capsys.readouterr().out
    assert "a40:2x2" in out and "a40:4x2" not in out


def test_validate_writes_predictions(tmp_path, capsys):
    measured = small_measured(tmp_path / "m.csv")
    out = tmp_path / "pred.csv"
    assert run(["validate", "--measured", measured, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "MAPE" in text and "by GPU count" in text and "by GPU type" in text and "by model family" in text
    frame = pd.read_csv(out)
    assert list(frame.columns[:9]) == [
        "family",
        "size",
        "global_batch",
        "gpu_type",
        "num_nodes",
        "gpus_per_node",
        "num_gpus",
        "iter_time_s",
        "oom",
    ]
    assert {"predicted_iter_time_s", "predicted_oom"} <= set(frame.columns)
    assert set(frame["predicted_oom"]) <= {0, 1} and len(frame) == 5


def test_calibrate_writes_parameters(tmp_path, capsys):
    measured = small_measured(tmp_path / "m.csv")
    out = tmp_path / "p.json"
    assert run(["calibrate", "--measured", measured, "--out", str(out), "--max-evals", "2"]) == 0
    from estimator.params import EstimatorParams

    params = EstimatorParams.load(out)
    assert "a100-40gb" in params.gpu_types and "parameters written" in capsys.readouterr().out
    assert params.dp_memory == {}


def test_validate_checks_a_dp_memory_table(tmp_path, capsys):
    measured = small_measured(tmp_path / "m.csv")
    dp = tmp_path / "dp.csv"
    dp.write_text("family,size,global_batch,num_gpus,mem_per_gpu_gb,oom\ngpt,1.3B,256,4,15.7,0\ngpt,1.3B,128,1,,1\n")
    assert run(["validate", "--measured", measured, "--dp-memory", str(dp)]) == 0
    out = capsys.readouterr().out
    assert "DP memory need: MAPE" in out and "over 1 profiled rows" in out and "/8 " in out


def test_calibrate_fits_the_dp_memory_table(tmp_path, capsys):
    measured = small_measured(tmp_path / "m.csv")
    dp = tmp_path / "dp.csv"
    rows = ["family,size,global_batch,num_gpus,mem_per_gpu_gb,oom"]
    for n, need in ((2, 23.9), (4, 15.7), (8, 11.8), (16, 9.9)):
        rows.append(f"gpt,1.3B,256,{n},{need},0")
    rows += ["gpt,1.3B,512,8,13.7,0", "gpt,1.3B,512,16,10.8,0", "gpt,1.3B,128,1,,1"]
    dp.write_text("\n".join(rows) + "\n")
    out = tmp_path / "p.json"
    assert (
        run(["calibrate", "--measured", measured, "--dp-memory", str(dp), "--out", str(out), "--max-evals", "2"]) == 0
    )
    from estimator.params import EstimatorParams

    fitted = EstimatorParams.load(out).dp_memory["transformer"]
    assert fitted.sharded_bytes > 0 and fitted.act_factor > 0
    assert "DP memory of transformer" in capsys.readouterr().out


def test_calibrate_from_a_profile_writes_a_calibration_file(tmp_path, capsys):
    from arena_gym.registry import make_perf
    from arena_gym.types import ClusterSpec, GpuType, ModelRef, NodeGroup, ResourceShape
    from estimator.params import EstimatorParams, default_params
    from tests.estimator.test_profile_calibration import PROFILE

    out = tmp_path / "cpu.json"
    assert run(["calibrate", "--profile", str(PROFILE), "--models", "gpt__mini", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "multipliers of cpu" in text and f"--perf calibrated:{out}" in text
    params = EstimatorParams.load(out)
    assert params.gpu_type("cpu") != default_params().gpu_type("cpu")
    perf = make_perf(f"calibrated:{out}", ClusterSpec("c", (NodeGroup(GpuType("cpu"), 1, 1),)))
    assert perf.params.gpu_type("cpu") == params.gpu_type("cpu")
    assert perf.iter_time(ModelRef.parse("gpt__mini"), 4, ResourceShape(GpuType("cpu"), 1, 1)) > 0


def test_calibrate_from_a_profile_keeps_its_restart_costs(tmp_path):
    import dataclasses

    from arena_gym.registry import make_perf
    from arena_gym.restarts import RestartCost
    from arena_gym.types import ClusterSpec, GpuType, ModelRef, NodeGroup
    from estimator.profile import load_profile
    from tests.estimator.test_profile_calibration import PROFILE

    cost = RestartCost(start_s=3.0, held_s=2.0, save_s=0.4, load_s=0.3)
    profile = tmp_path / "profile.json"
    profile.write_text(dataclasses.replace(load_profile(PROFILE), restart={"gpt__mini": cost}).to_json())
    out = tmp_path / "cpu.json"
    assert run(["calibrate", "--profile", str(profile), "--models", "gpt__mini", "--out", str(out)]) == 0
    perf = make_perf(f"calibrated:{out}", ClusterSpec("c", (NodeGroup(GpuType("cpu"), 1, 1),)))
    assert perf.restart_cost(ModelRef.parse("gpt__mini"), "cpu") == cost


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["query", "--model", "gpt__9Z", "--batch", "128"], "unknown model 'gpt__9Z'"),
        (["query", "--model", "gpt__1.3B", "--batch", "128", "--gpu-type", "z100"], "unknown GPU type 'z100'"),
        (["query", "--model", "gpt__1.3B", "--batch", "128", "--cluster", "nowhere"], "unknown cluster"),
        (["query", "--model", "gpt__1.3B", "--batch", "128", "--cluster", "tiny[h100=2]"], "is not TYPE=NODES"),
        (["query", "--model", "gpt__1.3B", "--batch", "true"], "argument --batch: not an integer: 'true'"),
        (["calibrate", "--profile", "p.json", "--models", ","], "argument --models: not comma-separated strings"),
        (["validate", "--measured", "/nonexistent.csv"], "nonexistent.csv"),
        (["calibrate", "--measured", "/nonexistent.csv"], "nonexistent.csv"),
        (["calibrate", "--profile", "/nonexistent.json"], "nonexistent.json"),
        (["calibrate", "--measured", "/nonexistent.csv", "--models", "gpt__mini"], "--models selects profiled"),
        (["validate", "--measured", "/nonexistent.csv", "--dp-memory", "/nowhere.csv"], "nonexistent.csv"),
        ([], "choose an action"),
    ],
)
def test_bad_input_is_one_line(argv, needle, capsys):
    from arena_gym.harness.cli import main

    assert main(["estimate", *argv]) == 2
    message = capsys.readouterr().err.strip()
    assert message.startswith("arena-gym estimate") and ": error: " in message  # "estimate query:" when parsing
    assert needle in message and "\n" not in message
