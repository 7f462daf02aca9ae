"""The sim-vs-live twin: overheads measured from a live run, charged the same way in the simulation."""

import math

import pytest

from agents.fcfs import FCFS
from arena_gym.records import EpisodeRecord, Event, EventKind
from arena_gym.types import ClusterSpec, GpuType, JobId, NodeGroup, ResourceShape
from real_runner.live.sim_vs_live import CheckpointedPerf, LiveOverheads, compare_runs, measure_overheads, simulate_same
from real_runner.progress import ProgressRecord
from tests.helpers import GPT, MOE, job, uniform_model

CLUSTER = ClusterSpec("one", (NodeGroup(GpuType("a40"), 1, 2),))


def _record(jobs, events) -> EpisodeRecord:
    return EpisodeRecord("fcfs", CLUSTER, tuple(jobs), tuple(events), 0.0, 100.0, math.inf, 0, 0.0)


def _steps(job_id: str, start: float, n: int, iter_s: float) -> list[ProgressRecord]:
    return [ProgressRecord(start + (i + 1) * iter_s, "step", job_id, i + 1, 1.0, iter_s) for i in range(n)]


def test_overheads_are_the_mean_start_with_final_saves_and_the_periodic_save_share():
    jobs = [job("a", 0, 10, "a40", 1, GPT), job("b", 0, 4, "a40", 1, MOE)]
    events = [
        Event(0.0, EventKind.ALLOCATE, JobId("a")),
        Event(3.0, EventKind.RUN, JobId("a")),
        Event(1.0, EventKind.ALLOCATE, JobId("b")),
        Event(6.0, EventKind.RUN, JobId("b")),
        Event(8.0, EventKind.PREEMPT, JobId("b")),  # no RUN after it: not a measured start
    ]
    a = _steps("a", 3.0, 10, 0.5)  # steps end at t = 8
    a.insert(5, ProgressRecord(5.6, "checkpoint", "a", 5, ckpt_step=5, info={"save_s": 0.25}))
    a += [
        ProgressRecord(8.4, "checkpoint", "a", 10, ckpt_step=10, info={"save_s": 0.4}),  # the final save
        ProgressRecord(8.5, "done", "a", 10, ckpt_step=10),
    ]
    b = _steps("b", 6.0, 2, 1.0)  # never finished: no tail
    overheads = measure_overheads(_record(jobs, events), {"a": a, "b": b})
    assert overheads.start_s == pytest.approx((3.0 + 5.0 + 0.5) / 2)
    assert overheads.save_share == pytest.approx({GPT.name: 0.25 / 5.0, MOE.name: 0.0})


def test_checkpointed_perf_stretches_times_by_the_models_share_only():
    perf = uniform_model(types=("a40",))
    stretched = CheckpointedPerf(perf, {GPT.name: 0.1})
    shape = ResourceShape(GpuType("a40"), 1, 2)
    assert stretched.iter_time(GPT, 128, shape) == pytest.approx(1.1 * perf.iter_time(GPT, 128, shape))
    assert stretched.dp_iter_time(GPT, 128, shape) == pytest.approx(1.1 * perf.dp_iter_time(GPT, 128, shape))
    assert stretched.iter_time(MOE, 128, shape) == perf.iter_time(MOE, 128, shape)
    assert stretched.proxy_plan(GPT, 128, shape) == perf.proxy_plan(GPT, 128, shape)


def test_the_twin_charges_the_start_and_the_save_share():
    perf = uniform_model(types=("a40",), counts=(1, 2))
    jobs = [job("a", 0, 100, "a40", 1, GPT)]
    plain = simulate_same(jobs, FCFS("fcfs"), CLUSTER, perf, LiveOverheads())
    charged = simulate_same(jobs, FCFS("fcfs"), CLUSTER, perf, LiveOverheads(2.0, {GPT.name: 0.1}))
    cmp = compare_runs(plain, charged, LiveOverheads(2.0, {GPT.name: 0.1}))
    (row,) = cmp.jobs.itertuples(index=False)
    assert row.sim_jct_s == pytest.approx(2.0 + 1.1 * row.live_jct_s)
    assert cmp.summary()["sim_start_s"] == 2.0 and cmp.summary()[f"sim_save_share_{GPT.name}"] == 0.1
