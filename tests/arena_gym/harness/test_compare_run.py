"""compare(): policies x traces x seeds into run directories and one leaderboard, equal to single runs."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

from arena_gym.harness.compare import CompareConfig, compare
from arena_gym.harness.experiment import RunConfig, load_jobs, run
from arena_gym.harness.stats import summary_table
from arena_gym.metrics import WALL_CLOCK_KEYS

TRACES = ("synthetic:n_jobs=24", "synthetic:n_jobs=16,arrival=bursty")
#: A policy given as module:attr runs beside the registered ones.
LATEST = "tests.arena_gym.harness.test_compare_run:latest_first"


def latest_first(name: str):
    """FCFS's decisions, but pending jobs tried newest first: a module:attr factory for compare."""
    from agents.fcfs import FCFS
    from arena_gym.types import Decision

    class LatestFirst(FCFS):
        def decide(self, snapshot):
            decision = super().decide(snapshot)
            return Decision(allocations=tuple(reversed(decision.allocations)))

    return LatestFirst(name=name)


#: Perf models built by :func:`counted_perf` (a ``module:attr`` perf spec).
BUILT: list[int] = []


def counted_perf(cluster, seed):
    """The estimator, counting every build by seed."""
    from estimator import default_perf_model

    BUILT.append(seed)
    return default_perf_model(cluster)


def stable(metrics: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in metrics.items() if k not in WALL_CLOCK_KEYS}


def test_every_run_is_written_and_equals_a_single_run(tmp_path):
    base = RunConfig(policy="fcfs", cluster="tiny")
    config = CompareConfig(("fcfs", "srtf", LATEST), TRACES, (0, 1), base)
    results, board = compare(config, tmp_path / "out", progress=False, plots=False)
    assert [(r.config.trace, r.config.seed, r.config.policy) for r in results] == [
        (t, s, p) for t in TRACES for s in (0, 1) for p in config.policies
    ]
    scenario = base.scenario()
    for r in results[:3]:
        single = run(r.config, jobs=load_jobs(r.config.trace, scenario.cluster, scenario.truth, r.config.seed))
        compared = {k: v for k, v in r.metrics.items() if k != "jobs_unplaceable_type"}
        assert stable(compared) == pytest.approx(stable(single.metrics), nan_ok=True)
    assert len(board) == 12 and set(board["policy"]) == {"fcfs", "srtf", LATEST}
    for trace, seed in [(t, s) for t in TRACES for s in (0, 1)]:
        rows = board[(board["trace"] == trace) & (board["seed"] == seed)]
        assert list(rows["avg_jct_s"]) == sorted(rows["avg_jct_s"])  # best first within a (trace, seed)
    run_dirs = sorted(p.parent.name for p in (tmp_path / "out").rglob("metrics.json"))
    assert len(run_dirs) == 12 and "fcfs-seed0" in run_dirs
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["code_version"] and written["run_dirs"]["policies"][LATEST]
    assert (tmp_path / "out" / "leaderboard.csv").read_text().count("\n") == 13
    written_board = pd.read_csv(tmp_path / "out" / "leaderboard.csv")
    assert set(written_board["code_version"]) == {written["code_version"]}  # every row names the code that ran it


def test_its_workloads_are_the_suite_of_its_grid_and_the_paired_view_is_evaluates(tmp_path):
    base = RunConfig(policy="fcfs", cluster="tiny")
    config = CompareConfig(("fcfs", "srtf"), TRACES, (0, 1), base, pad_reference="max", reference="fcfs")
    suite = config.suite(config.scenarios())
    workloads = suite.workloads()
    assert [w.label for w in workloads] == [f"{t}@seed{s}" for t in TRACES for s in (0, 1)]
    results, board = compare(config, tmp_path / "out", progress=False, plots=False)
    assert [r.record.jobs for r in results[::2]] == [w.jobs for w in workloads]
    paired = pd.read_csv(tmp_path / "out" / "paired.csv").set_index("policy")
    # srtf against fcfs, by hand from the leaderboard: one pair per (trace, seed)
    wide = board.pivot(index=["trace", "seed"], columns="policy", values="padded_jct_s")
    diff = wide["srtf"] - wide["fcfs"]
    assert paired.loc["srtf", "workloads"] == 4
    assert paired.loc["srtf", "wins"] == int((diff < 0).sum()) and paired.loc["srtf", "losses"] == int((diff > 0).sum())
    assert paired.loc["srtf", "mean_ratio"] == pytest.approx(float((wide["srtf"] / wide["fcfs"]).mean()))
    assert paired.loc["srtf", "mean_diff"] == pytest.approx(float(diff.mean()))
    assert paired.loc["fcfs", "mean_ratio"] == 1.0 and paired.loc["fcfs", "ties"] == 4
    assert bool(paired.loc["srtf", "clairvoyant"]) and not bool(paired.loc["fcfs", "clairvoyant"])
    evaluated = summary_table(
        board.assign(workload=[w.label for w in workloads for _ in (0, 1)]), config.metric, "fcfs"
    )
    assert evaluated.set_index("policy")["mean_ratio"].to_dict() == pytest.approx(paired["mean_ratio"].to_dict())


def test_the_perf_model_is_built_once_per_seed_and_shared_by_its_runs(tmp_path):
    BUILT.clear()
    base = RunConfig(policy="fcfs", cluster="tiny", perf=f"{__name__}:counted_perf")
    results, _ = compare(CompareConfig(("fcfs", "srtf"), TRACES, (0, 1), base), tmp_path / "o", False, False)
    assert len(results) == 8 and BUILT == [0, 1]


def test_parallel_workers_give_the_serial_results(tmp_path):
    base = RunConfig(policy="fcfs", cluster="tiny")
    serial = CompareConfig(("fcfs", "srtf"), TRACES[:1], (3,), base)
    one, _ = compare(serial, tmp_path / "serial", progress=False, plots=False)
    two, _ = compare(dataclasses.replace(serial, workers=2), tmp_path / "parallel", progress=False, plots=False)
    assert [stable(r.metrics) for r in two] == [pytest.approx(stable(r.metrics), nan_ok=True) for r in one]
    assert [r.record.events for r in one] == [r.record.events for r in two]


def test_a_failing_run_leaves_no_results_directory(tmp_path):
    config = CompareConfig(("fcfs", "no-such-policy"), TRACES[:1], (0,), RunConfig(policy="fcfs", cluster="tiny"))
    with pytest.raises(ValueError, match="unknown policy 'no-such-policy'"):
        compare(config, tmp_path / "out", progress=False, plots=False)
    assert not (tmp_path / "out").exists()


def test_a_run_in_this_process_shows_its_finished_jobs_before_it_ends(tmp_path, monkeypatch):
    import arena_gym.harness.compare as compare_module
    import arena_gym.loop as loop

    events: list[str] = []

    class Recorded(loop._DelayedBar):
        def update(self, n: int) -> None:
            events.append("jobs finished")
            super().update(n)

    def recorded_run(*args, **kwargs):
        result = run(*args, **kwargs)
        events.append("run ended")
        return result

    monkeypatch.setattr(loop, "_DelayedBar", Recorded)
    monkeypatch.setattr(compare_module, "run", recorded_run)
    config = CompareConfig(("fcfs", "srtf"), TRACES[:1], (0,), RunConfig(policy="fcfs", cluster="tiny"))
    compare(config, tmp_path / "out", progress=True, plots=False)
    assert events.count("run ended") == 2
    assert events[0] == "jobs finished"  # within the first run, before it ended
    assert events.index("run ended") < len(events) - 1 and events[-1] == "run ended"
    events.clear()
    compare(config, tmp_path / "quiet", progress=False, plots=False)
    assert events == ["run ended", "run ended"]
