"""Evaluation: fixed workloads, deterministic scores and statistics, padding, the protocol and its command."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.arena import ARENA_VERSION
from agents.rl.env_factory import env_config, make_env
from arena_gym.harness.cli import main
from arena_gym.harness.evaluate import EvalConfig, evaluate, recorded_config
from arena_gym.harness.experiment import ScenarioOptions
from arena_gym.harness.scoring import (
    Evaluator,
    baseline_policies,
    mean_avg_jct,
    parse_policy_spec,
    summarise,
)
from arena_gym.harness.stats import TRACE_COLUMNS, bootstrap_ci, paired_comparison, summary_table
from arena_gym.harness.suites import custom_suite, env_suite, get_suite, part_scenario, with_options
from arena_gym.metrics import WALL_CLOCK_KEYS, padded_mean_jcts
from arena_gym.outputs import write_json
from arena_gym.types import OverheadModel
from tests.rl_cases import ENV_ID, TRACE


def test_workloads_are_the_envs_and_scores_are_deterministic(env_overrides: dict) -> None:
    config = env_config(ENV_ID, {**env_overrides, "split": "validation"})
    evaluator = Evaluator.for_split(config, "validation", (1000, 1001))
    env = make_env(ENV_ID, {**env_overrides, "split": "validation"})
    env.reset(seed=1001)
    assert evaluator.workloads[1].jobs == env.unwrapped.jobs
    assert evaluator.workloads[0].jobs != evaluator.workloads[1].jobs
    first = evaluator.score(baseline_policies(("fcfs", "srtf"))).drop(columns=list(WALL_CLOCK_KEYS))
    second = Evaluator.for_split(config, "validation", (1000, 1001)).score(baseline_policies(("fcfs", "srtf")))
    pd.testing.assert_frame_equal(first, second.drop(columns=list(WALL_CLOCK_KEYS)))
    assert list(first["policy"]) == ["fcfs", "srtf", "fcfs", "srtf"]
    assert (first["jobs_finished"] == first["jobs_total"]).all()
    assert first["padded_jct_s"].equals(first["avg_jct_s"])  # everything finished: nothing to pad
    assert list(first["overhead_class"]) == ["full"] * 4
    assert {type(v) for v in first["overhead_class"]} == {str}  # plain strings: wandb tables refuse enum objects


def test_padding_uses_the_worst_jct_up_to_the_largest_finished_count() -> None:
    padded = padded_mean_jcts({"a": [1.0, 2.0, 3.0], "b": [1.0, 10.0], "c": []})
    assert padded == {"a": 2.0, "b": pytest.approx((1 + 10 + 10) / 3), "c": 10.0}


def test_policy_specs_take_labels() -> None:
    assert parse_policy_spec("agent=sb3:run/model.zip") == ("agent", "sb3:run/model.zip")
    assert parse_policy_spec("sb3:a=b.zip") == ("sb3:a=b.zip", "sb3:a=b.zip")
    assert parse_policy_spec("arena") == ("arena", "arena")
    with pytest.raises(ValueError, match="given twice"):
        baseline_policies(("fcfs", "fcfs"))


def test_summary_and_unfinished_jobs() -> None:
    table = pd.DataFrame(
        {
            "seed": [1, 2, 1, 2],
            "policy": ["fcfs", "fcfs", "agent", "agent"],
            "avg_jct_s": [100.0, 300.0, 50.0, 150.0],
            "p95_jct_s": [1.0] * 4,
            "makespan_s": [1.0] * 4,
            "jobs_finished": [4, 4, 4, 3],
            "jobs_total": [4, 4, 4, 4],
        }
    )
    summary = summarise(table).set_index("policy")
    assert summary.loc["agent", "jct_vs_fcfs"] == pytest.approx(0.5)
    assert not summary.loc["agent", "all_finished"] and summary.loc["fcfs", "all_finished"]
    assert mean_avg_jct(table, "fcfs") == 200.0
    assert math.isinf(mean_avg_jct(table, "agent"))
    with pytest.raises(ValueError, match="not in the evaluation table"):
        mean_avg_jct(table, "arena")


def test_paired_statistics() -> None:
    rng = np.random.default_rng(0)
    reference = rng.uniform(10, 20, size=30)
    better = reference * 0.8
    result = paired_comparison(better, reference, "agent", "arena", resamples=2000)
    assert (result.wins, result.ties, result.losses) == (30, 0, 0) and result.win_share == 1.0
    assert result.diff_ci_high < 0 and result.wilcoxon_p < 1e-6 and result.mean_ratio == pytest.approx(0.8)
    assert result.mean_ci_low < result.mean < result.mean_ci_high
    same = paired_comparison(reference, reference, "arena", "arena")
    assert same.ties == 30 and math.isnan(same.wilcoxon_p) and same.mean_diff == 0.0
    assert bootstrap_ci([1.0, 2.0, 3.0], seed=1) == bootstrap_ci([1.0, 2.0, 3.0], seed=1)
    assert all(math.isnan(x) for x in bootstrap_ci([1.0]))
    noisy = reference + rng.normal(0, 3, size=30)
    mixed = paired_comparison(noisy, reference, "noise", "arena", resamples=2000)
    assert mixed.diff_ci_low < 0 < mixed.diff_ci_high  # no real difference: the interval covers 0
    with pytest.raises(ValueError, match="one value per workload"):
        paired_comparison([1.0], [1.0, 2.0], "a", "b")
    table = pd.DataFrame({"workload": ["w1", "w2"] * 2, "policy": ["x", "x", "y", "y"], "m": [1.0, 2.0, 2.0, 2.0]})
    with pytest.raises(ValueError, match="reference policy 'arena'"):
        summary_table(table, "m", "arena")
    assert summary_table(table, "m", "y").set_index("policy").loc["x", "wins"] == 1


def test_protocol_is_deterministic_and_writes_its_files(tmp_path) -> None:
    suite = custom_suite(
        (TRACE,), cluster="tiny", split="test", load_basis="factor", load_levels=(1.0,), seeds=(1, 2, 3)
    )
    config = EvalConfig(
        policies=("arena", "fcfs", "tiresias", "srtf"),
        suite="custom",
        traces=(TRACE,),
        out_dir=str(tmp_path / "a"),
        resamples=500,
        progress=False,
    )
    first = evaluate(config, suite)
    second = evaluate(EvalConfig(**{**config.__dict__, "out_dir": str(tmp_path / "b"), "workers": 2}), suite)
    timed = list(WALL_CLOCK_KEYS)
    # two worker processes: the same table
    pd.testing.assert_frame_equal(first.per_workload.drop(columns=timed), second.per_workload.drop(columns=timed))
    pd.testing.assert_frame_equal(first.summary, second.summary)
    assert (tmp_path / "a" / "jobs.csv").read_text() == (tmp_path / "b" / "jobs.csv").read_text()
    for name in (
        "per_workload.csv",
        "jobs.csv",
        "summary.csv",
        "summary.md",
        "by_trace.csv",
        "vs_reference.png",
        "cdf.png",
        "performance_profile.png",
        "config.json",
    ):
        assert (tmp_path / "a" / name).is_file(), name
    assert json.loads((tmp_path / "a" / "config.json").read_text())["arena_version"] == ARENA_VERSION
    table = first.per_workload
    assert (table["lp_avg_jct_s"] >= table["lb1_avg_jct_s"] - 1e-6).all()
    finished = table[table["jobs_finished"] == table["jobs_total"]]
    assert (finished["avg_jct_s"] >= finished["lp_avg_jct_s"] * (1 - 1e-9)).all()  # a bound holds for every policy
    summary = first.summary.set_index("policy")
    assert list(summary.index) == ["arena", "fcfs", "tiresias", "srtf"]
    assert summary.loc["arena", "ties"] == 3 and summary.loc["fcfs", "workloads"] == 3
    assert summary.loc["arena", "gap_closed"] == 0 and summary.loc["arena", "poi"] == 0.5
    assert summary.loc["arena", "iqm_score"] == 1 and summary.loc["fcfs", "mean_ratio_to_lp"] >= 1
    assert bool(summary.loc["srtf", "clairvoyant"]) and not bool(summary.loc["arena", "clairvoyant"])
    assert summary.loc["arena", "overhead_class"] == "pruned" and summary.loc["fcfs", "overhead_class"] == "full"
    assert len(pd.read_csv(tmp_path / "a" / "jobs.csv")) == first.per_workload["jobs_finished"].sum()
    # one trace (the generator): the by-trace figures are the pooled ones, the interval the window bootstrap's
    fcfs = summary.loc["fcfs"]
    assert fcfs["traces"] == 1 and fcfs["mean_diff_trace"] == pytest.approx(fcfs["mean_diff"])
    assert (fcfs["diff_ci_trace_low"], fcfs["diff_ci_trace_high"]) == (fcfs["diff_ci_low"], fcfs["diff_ci_high"])
    assert list(first.summary.columns[-7:]) == list(TRACE_COLUMNS)  # added after the columns summaries had before
    by_trace = pd.read_csv(tmp_path / "a" / "by_trace.csv").set_index("policy")
    assert set(by_trace["trace"]) == {"synthetic"} and by_trace.loc["fcfs", "windows"] == 3
    assert by_trace.loc["fcfs", "mean_ratio"] == pytest.approx(summary.loc["fcfs", "mean_ratio"])
    assert "## By trace" in (tmp_path / "a" / "summary.md").read_text()


def test_suites_need_data_or_are_built_in(tmp_path) -> None:
    synthetic = get_suite("synthetic")
    assert len(synthetic.parts[0].seeds) == 20 and not synthetic.needs_data
    with pytest.raises(ValueError, match="unknown suite"):
        get_suite("nope")
    with pytest.raises(ValueError, match="needs the real traces"):
        EvalConfig(policies=("arena",), suite="real-test", data_dir=str(tmp_path / "missing")).build_suite()
    suite = env_suite(env_config(ENV_ID, {"trace": TRACE}), seeds=(5, 6))
    assert [w.label for w in suite.workloads()] == ["synthetic:test#5@x1", "synthetic:test#6@x1"]


def test_real_test_suite_has_disjoint_windows(shared_data) -> None:
    workloads = get_suite("real-test", str(shared_data)).workloads()
    assert len(workloads) >= 20 and len({w.label for w in workloads}) == len(workloads)
    ids = [j.job_id for w in workloads for j in w.jobs]
    per_trace = {}
    for w in workloads:
        per_trace.setdefault(w.trace, []).extend(j.job_id for j in w.jobs)
    assert all(len(v) == len(set(v)) for v in per_trace.values()) and len(ids) > 1000


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policies", "fcfs", "--suite", "custom", "--trace", TRACE], "error: --reference: reference policy 'arena'"),
        (["--policies", "arena", "--suite", "custom"], "error: --suite custom needs at least one --trace"),
        (["--policies", "arena,nope"], "unknown policy 'nope'"),
        (["--policies", "arena", "--metric", "speed"], "unknown metric"),
        (["--policies", "arena", "--seed", "-1"], "argument --seed: must be in 0..4294967295: '-1'"),
        (["--policies", "arena", "--seed", "99999999999999999999"], "argument --seed: must be in 0..4294967295"),
        (["--policies", "arena", "--resamples", "5"], "error: --resamples must be >= 100, got 5"),
        (["--policies", "arena", "--window-jobs", "-1"], "error: --window-jobs must be >= 0, got -1"),
        (["--policies", "arena", "--load-basis", "peak"], "argument --load-basis: invalid choice: 'peak'"),
    ],
)
def test_evaluate_command_errors_are_one_line(tmp_path, args, message, capsys) -> None:
    assert main(["evaluate", "--out", str(tmp_path / "bad"), "--no-progress", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("arena-gym evaluate: error:") and message in err and len(err.splitlines()) == 1


def test_evaluate_command_smoke(tmp_path, capsys) -> None:
    out = tmp_path / "eval"
    code = main(
        [
            "evaluate",
            "--policies",
            "arena,fcfs",
            "--suite",
            "custom",
            "--trace",
            TRACE,
            "--cluster",
            "tiny",
            "--window-jobs",
            "0",
            "--split",
            "all",
            "--loads",
            "1",
            "--resamples",
            "200",
            "--no-progress",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    assert "wins/ties/losses" in capsys.readouterr().out
    table = pd.read_csv(out / "per_workload.csv")
    assert set(table["policy"]) == {"arena", "fcfs"} and len(table) == 40


def test_recorded_config_reads_back_what_evaluate_wrote(tmp_path: Path) -> None:

    config = EvalConfig(policies=("arena", "fcfs"), suite="synthetic", out_dir=str(tmp_path), limit=2, loads=(0.6, 1.2))
    write_json(tmp_path / "config.json", {"evaluate": config})
    assert recorded_config(tmp_path) == config


def test_recorded_config_reads_back_the_scenario_options_and_checks_types(tmp_path: Path) -> None:
    options = ScenarioOptions(perf="noisy:0.1", horizon_s=math.inf, round_s=300.0, overhead=OverheadModel(1, 2, 3, 4))
    config = EvalConfig(policies=("arena",), out_dir=str(tmp_path), scenario=options)
    write_json(tmp_path / "config.json", {"evaluate": config})
    assert recorded_config(tmp_path) == config
    (tmp_path / "config.json").write_text('{"evaluate": {"policies": ["arena"]}}')  # as the committed ones: no options
    assert recorded_config(tmp_path) == EvalConfig(policies=("arena",))
    for bad, message in [
        ('"limit": "2"', "evaluate: limit must be an integer, got '2'"),
        ('"scenario": {"horizon_s": "never"}', "evaluate: scenario: horizon_s must be None or a number"),
        ('"scenario": {"overhead": {"pruned_cap_s": -1}}', "OverheadModel.pruned_cap_s must be finite and >= 0"),
        ('"seed": -1', "evaluate: --seed must be >= 0, got -1"),
    ]:
        (tmp_path / "config.json").write_text(f'{{"evaluate": {{"policies": ["arena"], {bad}}}}}')
        with pytest.raises(ValueError, match="config.json: ") as caught:
            recorded_config(tmp_path)
        assert message in str(caught.value) and "\n" not in str(caught.value)


def test_recorded_config_refuses_what_is_not_an_evaluation(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not the config of an evaluation"):
        recorded_config(tmp_path)
    (tmp_path / "config.json").write_text('{"evaluate": {"policies": ["arena"], "colour": "red"}}')
    with pytest.raises(ValueError, match="config.json: evaluate: unknown field\\(s\\) colour; valid: "):
        recorded_config(tmp_path)
    (tmp_path / "config.json").write_text('{"evaluate": {"suite": "synthetic"}}')
    with pytest.raises(ValueError, match="config.json"):
        recorded_config(tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"seed": -1}, "--seed must be >= 0, got -1"),
        ({"limit": -2}, "--limit must be >= 0, got -2"),
        ({"traces": ("t.csv",)}, "--trace goes with --suite custom only"),
        ({"metric": "speed"}, "--metric: unknown metric 'speed'; valid: "),
        ({"wandb_mode": "loud"}, "--wandb-mode: unknown mode 'loud'; valid: disabled, offline, online"),
        ({"workers": 2, "ray": "auto"}, "give --workers \\(local processes\\) or --ray \\(a cluster\\), not both"),
    ],
)
def test_config_errors_name_the_flag(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}"):
        EvalConfig(policies=("fcfs",), **change)


def test_every_config_problem_is_named_on_one_line() -> None:
    with pytest.raises(ValueError, match="^--seed must be >= 0, got -1; --resamples must be >= 100, got 5$"):
        EvalConfig(policies=("fcfs",), seed=-1, resamples=5)


def test_the_scenario_options_are_checked_on_construction() -> None:
    with pytest.raises(ValueError, match="^--round must be finite and > 0, got 0.0$"):
        ScenarioOptions(round_s=0.0)
    with pytest.raises(ValueError, match="^--horizon must be > 0, got -5.0$"):
        ScenarioOptions(horizon_s=-5.0)
    with pytest.raises(ValueError, match="^ScenarioOptions.perf must be None or a string, got 3$"):
        ScenarioOptions(perf=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="^EvalConfig.limit must be an integer, got 1.5$"):
        EvalConfig(policies=("fcfs",), limit=1.5)  # type: ignore[arg-type]


def test_the_options_go_on_top_of_every_suite_part() -> None:
    """Unset options leave each part's scenario; set ones replace its settings, in every part (not only the first)."""
    shift = get_suite("shift")
    for part in shift.parts:
        assert part_scenario(part.config) == part_scenario(part.config, None, ScenarioOptions())
    options = ScenarioOptions(round_s=300.0, event_decisions=False, horizon_s=9e5, overhead=OverheadModel(0, 0, 0, 0))
    for part in with_options(shift, options).parts:
        sim = part_scenario(part.config, None, part.options).sim
        assert (sim.round_s, sim.event_decisions, sim.horizon_s, sim.overhead) == (300.0, False, 9e5, options.overhead)
        assert sim.overhead_class == part.config.sim_config().overhead_class
    with pytest.raises(ValueError, match="^--no-event-decisions needs --round"):
        part_scenario(shift.parts[0].config, None, ScenarioOptions(event_decisions=False))
