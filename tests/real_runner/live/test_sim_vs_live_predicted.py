"""The predicted simulation: the simulator's own claim from the performance model, a profile's restart costs charged."""

from __future__ import annotations

import dataclasses
import inspect
import math

import pytest

from agents.fcfs import FCFS
from arena_gym.metrics import job_outcomes
from arena_gym.perf import NoisyPerfModel
from arena_gym.restarts import RestartCost, RestartKind
from arena_gym.types import ClusterSpec, GpuType, JobId, JobSpec, ModelRef, NodeGroup, ResourceShape
from estimator.profiled import ProfiledPerfModel
from real_runner.live.sim_vs_live import (
    LiveOverheads,
    PeriodicSaves,
    compare_runs,
    predicted_starts,
    simulate_predicted,
    simulate_same,
)
from tests.estimator.test_profile import synthetic_profile
from tests.helpers import GPT, job, uniform_model

TINY = ModelRef.parse("gpt__tiny")
CPU = GpuType("cpu")
CPU2 = ClusterSpec("cpu-2", (NodeGroup(CPU, 1, 2),))
COST = RestartCost(start_s=4.0, held_s=3.0, save_s=0.5, load_s=1.5)


def profiled(restart: bool = True) -> ProfiledPerfModel:
    """The synthetic gpt__tiny profile of cpu-2, with (version 5) or without measured restart costs."""
    profile = synthetic_profile()
    return ProfiledPerfModel(dataclasses.replace(profile, restart={"gpt__tiny": COST}) if restart else profile, CPU2)


def jct(record, job_id: str = "a") -> float:
    return next(o.jct for o in job_outcomes(record) if o.job_id == job_id and o.jct is not None)


def test_a_jobs_predicted_jct_is_its_steps_plus_the_profiles_start_exactly():
    jobs = [JobSpec(JobId("a"), TINY, 16, 100, 0.0, CPU, 1)]
    perf = profiled()
    step_s = perf.iter_time(TINY, 16, ResourceShape(CPU, 1, 1))
    predicted = simulate_predicted(jobs, FCFS(), CPU2, perf)
    assert jct(predicted) == pytest.approx(100 * step_s + 4.5, abs=1e-9)  # start_s and closing save_s, no search
    assert jct(predicted) - jct(simulate_predicted(jobs, FCFS(), CPU2, profiled(restart=False))) == pytest.approx(
        COST.seconds(RestartKind.FIRST), abs=1e-9
    )
    # fcfs's own overhead class (the unpruned search, 150 s per GPU) is not charged: the live runner has none
    assert FCFS().ap_search == "full"
    assert predicted_starts(perf, CPU2, jobs) == {"gpt__tiny": 4.5}


def test_the_prediction_takes_nothing_measured_live_and_a_model_without_figures_charges_nothing():
    assert list(inspect.signature(simulate_predicted).parameters) == [
        "jobs",
        "policy",
        "cluster",
        "perf",
        "round_s",
        "checkpoint_every_s",
        "checkpoint_every_steps",
        "step_noise",
        "start_noise",
        "noise_seed",
    ]
    cluster = ClusterSpec("one", (NodeGroup(GpuType("a40"), 1, 2),))
    perf = uniform_model(types=("a40",), counts=(1, 2))
    jobs = [job("a", 0, 100, "a40", 1, GPT)]
    plain = simulate_same(jobs, FCFS(), cluster, perf, LiveOverheads())
    assert jct(simulate_predicted(jobs, FCFS(), cluster, perf)) == pytest.approx(jct(plain))
    assert predicted_starts(perf, cluster, jobs) == {}


def test_noise_stretches_the_truths_steps_and_starts_by_the_noisy_factors():
    jobs = [JobSpec(JobId("a"), TINY, 16, 100, 0.0, CPU, 1)]
    perf, one = profiled(), ResourceShape(CPU, 1, 1)
    step_s = perf.iter_time(TINY, 16, one)
    factor = NoisyPerfModel(perf, 0.1, 7).iter_time(TINY, 16, one) / step_s
    assert factor != pytest.approx(1.0, abs=1e-3)
    noisy = simulate_predicted(jobs, FCFS(), CPU2, perf, step_noise=0.1, noise_seed=7)
    assert jct(noisy) == pytest.approx(100 * step_s * factor + 4.5, abs=1e-9)  # the profile's start still charged
    assert jct(simulate_predicted(jobs, FCFS(), CPU2, perf, step_noise=0.1, noise_seed=7)) == jct(noisy)
    assert jct(simulate_predicted(jobs, FCFS(), CPU2, perf, step_noise=0.1, noise_seed=8)) != jct(noisy)
    clean = jct(simulate_predicted(jobs, FCFS(), CPU2, perf))
    assert jct(simulate_predicted(jobs, FCFS(), CPU2, perf, noise_seed=8)) == clean
    start = NoisyPerfModel(perf, 0.0, 7, start_sigma=0.2).restart_cost(TINY, "cpu")
    assert start is not None and start.start_s != pytest.approx(COST.start_s, abs=1e-3)
    slow_start = jct(simulate_predicted(jobs, FCFS(), CPU2, perf, start_noise=0.2, noise_seed=7))
    assert slow_start == pytest.approx(100 * step_s + start.start_s + COST.save_s, abs=1e-9)  # steps as profiled


def test_the_comparison_carries_the_prediction_beside_the_twin():
    perf = profiled()
    jobs = [JobSpec(JobId("a"), TINY, 16, 100, 0.0, CPU, 1), JobSpec(JobId("b"), TINY, 16, 50, 0.0, CPU, 1)]
    live = simulate_same(jobs, FCFS(), CPU2, perf, LiveOverheads(3.0))  # stands in for the live run
    twin = simulate_same(jobs, FCFS(), CPU2, perf, LiveOverheads(2.0))
    pred = simulate_predicted(jobs, FCFS(), CPU2, perf)
    cmp = compare_runs(live, twin, LiveOverheads(2.0), pred, predicted_starts(perf, CPU2, jobs))
    assert list(cmp.jobs.columns[-4:]) == ["sim_jct_s", "jct_error", "pred_jct_s", "pred_jct_error"]
    rows = {r.job_id: r for r in cmp.jobs.itertuples(index=False)}
    for job_id in ("a", "b"):
        assert rows[job_id].pred_jct_s == pytest.approx(rows[job_id].live_jct_s + 1.5)  # 4.5 s against 3 s a start
        assert rows[job_id].sim_jct_s == pytest.approx(rows[job_id].live_jct_s - 1.0)
    live_avg = (jct(live, "a") + jct(live, "b")) / 2
    assert cmp.avg_jct_pred_s == pytest.approx(live_avg + 1.5)
    assert cmp.avg_jct_pred_error == pytest.approx(1.5 / live_avg)
    assert cmp.avg_jct_error == pytest.approx(-1.0 / live_avg)  # the twin's, as before
    summary = cmp.summary()
    assert summary["avg_jct_pred_s"] == cmp.avg_jct_pred_s and summary["avg_jct_pred_error"] == cmp.avg_jct_pred_error
    assert summary["median_abs_job_pred_jct_error"] == pytest.approx(float(cmp.jobs["pred_jct_error"].abs().median()))
    assert summary["pred_start_s_gpt__tiny"] == 4.5 and summary["sim_start_s"] == 2.0
    without = compare_runs(live, twin, LiveOverheads(2.0))  # no prediction: its figures are NaN, the twin's kept
    assert math.isnan(without.avg_jct_pred_s) and math.isnan(without.summary()["avg_jct_pred_error"])
    assert without.avg_jct_error == cmp.avg_jct_error


@pytest.mark.parametrize(
    ("every_s", "every_steps", "saves_per_step_s"),
    [
        (10.0, 0, lambda step_s: 1 / 10.0),  # by time: one save per 10 s of steps
        (0.0, 20, lambda step_s: 1 / (20 * step_s)),  # by steps: one per 20 steps
        (0.05, 1000, lambda step_s: 1 / 0.05 + 1 / (1000 * step_s)),  # the step saves are the rarer: both count
        (10.0, 20, lambda step_s: 1 / (20 * step_s)),  # the step saves restart the timer before it is due
    ],
)
def test_the_prediction_charges_periodic_saves_at_the_measured_save_time(every_s, every_steps, saves_per_step_s):
    jobs = [JobSpec(JobId("a"), TINY, 16, 100, 0.0, CPU, 1)]
    perf = profiled()
    step_s = perf.iter_time(TINY, 16, ResourceShape(CPU, 1, 1))
    predicted = simulate_predicted(
        jobs, FCFS(), CPU2, perf, checkpoint_every_s=every_s, checkpoint_every_steps=every_steps
    )
    expected_step = step_s * (1 + COST.save_s * saves_per_step_s(step_s))
    assert jct(predicted) == pytest.approx(100 * expected_step + COST.seconds(RestartKind.FIRST), rel=1e-9)


def test_periodic_saves_keep_the_restart_costs_and_a_model_without_a_save_time_is_not_stretched():
    perf = profiled()
    saves = PeriodicSaves(perf, every_s=10.0)
    shape = ResourceShape(CPU, 1, 1)
    assert saves.restart_cost(TINY, "cpu") == COST
    assert saves.iter_time(TINY, 16, shape) == pytest.approx(perf.iter_time(TINY, 16, shape) * 1.05)
    bare = PeriodicSaves(profiled(restart=False), every_s=10.0)
    assert bare.restart_cost(TINY, "cpu") is None
    assert bare.iter_time(TINY, 16, shape) == profiled(restart=False).iter_time(TINY, 16, shape)
