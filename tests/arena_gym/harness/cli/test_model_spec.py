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
