"""--model-spec: user-defined models reach the estimator through simulate, compare and trace."""

from __future__ import annotations

import json

from arena_gym.harness.cli import main

MODEL = {"name": "gpt__mine", "layers": 4, "hidden": 512, "heads": 8}
TRACE = (
    "job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s\n"
    "a,0,gpt__mine,32,50,a40,2,\n"
    "b,10,gpt__mine,64,20,a10,1,\n"
)


def _files(tmp_path):
    spec, trace = tmp_path / "models.json", tmp_path / "trace.csv"
    spec.write_text(json.dumps([MODEL]))
    trace.write_text(TRACE)
    return spec, trace


def test_simulate_runs_a_trace_of_a_user_model(tmp_path, capsys):
    spec, trace = _files(tmp_path)
    sim = ["simulate", "--trace", str(trace), "--cluster", "tiny", "--no-plots"]
    assert main([*sim, "--out", str(tmp_path / "without")]) == 2
    assert "unknown model 'gpt__mine'" in capsys.readouterr().err
    assert main([*sim, "--model-spec", str(spec), "--out", str(tmp_path / "run")]) == 0
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["jobs_finished"] == 2
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["config"]["model_spec"] == str(spec)


def test_compare_and_trace_take_the_spec(tmp_path):
    spec, trace = _files(tmp_path)
    assert (
        main(
            [
                "compare",
                "--policies",
                "fcfs,srtf",
                "--trace",
                str(trace),
                "--cluster",
                "tiny",
                "--no-plots",
                "--model-spec",
                str(spec),
                "--out",
                str(tmp_path / "cmp"),
            ]
        )
        == 0
    )
    assert (tmp_path / "cmp" / "leaderboard.csv").is_file()
    assert main(["trace", "info", str(trace), "--cluster", "tiny", "--model-spec", str(spec)]) == 0


def test_bad_spec_is_a_one_line_parse_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "gpt__x", "layers": 2, "hidden": 64, "heads": 4, "widht": 3}))
    code = main(["simulate", "--model-spec", str(bad), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "unknown field(s) widht" in err
    assert main(["simulate", "--model-spec", str(tmp_path / "absent.json"), "--out", str(tmp_path / "run")]) == 2
    assert "No such file" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


SHADOW_TRACE = (
    "job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s\na,0,gpt__1.3B,32,50,a40,2,\n"
)


def _simulate(tmp_path, capsys, *args: str) -> tuple[int, str]:
    out = tmp_path / f"run{len(list(tmp_path.glob('run*')))}"
    code = main(["simulate", "--cluster", "tiny", "--no-plots", "--out", str(out), *args])
    return code, capsys.readouterr().err.strip()


def test_a_user_model_named_like_a_zoo_model_is_refused_unless_allowed(tmp_path, capsys):
    spec, trace = tmp_path / "models.json", tmp_path / "trace.csv"
    spec.write_text(json.dumps([MODEL, {**MODEL, "name": "gpt__1.3B"}]))
    trace.write_text(SHADOW_TRACE)
    code, err = _simulate(tmp_path, capsys, "--trace", str(trace), "--model-spec", str(spec))
    assert code == 2 and len(err.splitlines()) == 1
    assert f"--model-spec {spec}: model(s) gpt__1.3B would replace the zoo's model(s) of that name" in err
    code, _ = _simulate(tmp_path, capsys, "--trace", str(trace), "--model-spec", str(spec), "--allow-shadowing")
    assert code == 0


def test_a_cluster_or_trace_file_that_shadows_a_built_in_name_is_refused_unless_allowed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny").write_text(json.dumps({"gpu_types": {"a40": {"nodes": 1, "gpus_per_node": 2}}}))
    code, err = _simulate(tmp_path, capsys, "--trace", "synthetic:n_jobs=2")
    assert code == 2 and "cluster 'tiny' names both a preset and a file here; write ./tiny for the file" in err
    code, err = _simulate(tmp_path, capsys, "--trace", "synthetic:n_jobs=2", "--cluster", "./tiny")
    assert code == 2 and "cluster name 'tiny' is a preset's, but the contents differ from it" in err
    code, _ = _simulate(tmp_path, capsys, "--trace", "synthetic:n_jobs=2", "--cluster", "./tiny", "--allow-shadowing")
    assert code == 0
    (tmp_path / "tiny").unlink()
    (tmp_path / "synthetic").write_text(SHADOW_TRACE)
    code, err = _simulate(tmp_path, capsys, "--trace", "synthetic")
    assert code == 2 and "trace 'synthetic' names both a built-in trace and a file here; write ./synthetic" in err
    code, _ = _simulate(tmp_path, capsys, "--trace", "synthetic", "--allow-shadowing")
    assert code == 0
    metrics = json.loads(sorted(tmp_path.glob("run*"))[-1].joinpath("metrics.json").read_text())
    assert metrics["jobs_submitted"] == 1  # the file's one job, not the generator's


def test_evaluate_takes_the_spec(tmp_path, capsys):
    spec, trace = _files(tmp_path)
    custom = ["--suite", "custom", "--trace", str(trace), "--cluster", "tiny", "--split", "all", "--window-jobs", "0"]
    argv = ["evaluate", "--policies", "fcfs,srtf", "--reference", "fcfs", *custom, "--load-basis", "factor"]
    argv += ["--loads", "1", "--no-bounds", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "without")]) == 2
    assert "unknown model 'gpt__mine'" in capsys.readouterr().err
    assert main([*argv, "--model-spec", str(spec), "--out", str(tmp_path / "e")]) == 0
    config = json.loads((tmp_path / "e" / "config.json").read_text())
    assert config["evaluate"]["scenario"]["model_spec"] == str(spec)
