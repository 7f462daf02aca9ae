"""The simulator charges a profile's measured (re)start costs: first start, move and resume, each by its kind."""

from __future__ import annotations

import dataclasses
import json

import pytest

from arena_gym.records import EventKind
from arena_gym.restarts import RestartCost, RestartKind
from arena_gym.scenario import scaled_overhead
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import (
    Allocation,
    ClusterSpec,
    Decision,
    GpuType,
    Grid,
    JobId,
    JobSpec,
    ModelRef,
    NodeGroup,
    OverheadModel,
    Placement,
    ResourceShape,
)
from estimator.profiled import ProfiledPerfModel
from tests.estimator.test_profile import synthetic_profile

TINY, MINI = ModelRef.parse("gpt__tiny"), ModelRef.parse("gpt__mini")
CPU = GpuType("cpu")
CPU2 = ClusterSpec("cpu-2", (NodeGroup(CPU, 1, 2),))
COST = RestartCost(start_s=4.0, held_s=3.0, save_s=5.0, load_s=1.5)


def measured_profile():
    return dataclasses.replace(synthetic_profile(), restart={"gpt__tiny": COST})


def on(gpus: int) -> Allocation:
    shape = ResourceShape(CPU, 1, gpus)
    return Allocation(Grid(shape, 1), Placement(CPU, (0,), gpus))


def test_a_jobs_jct_grows_by_exactly_its_measured_start(tmp_path):
    from arena_gym.harness.experiment import RunConfig, run

    cluster = tmp_path / "cpu2.json"
    cluster.write_text(json.dumps({"name": "cpu-2", "gpu_types": {"cpu": {"nodes": 1, "gpus_per_node": 2}}}))
    jobs = (JobSpec(JobId("a"), TINY, 16, 1000, 0.0, CPU, 2),)
    jct = {}
    for name, profile in (("without", synthetic_profile()), ("with", measured_profile())):
        path = tmp_path / f"{name}.json"
        path.write_text(profile.to_json())
        config = RunConfig(
            policy="fcfs", trace="synthetic", cluster=str(cluster), perf=f"profiled:{path}", overhead=OverheadModel()
        )
        jct[name] = run(config, jobs=jobs).metrics["avg_jct_s"]
    # fcfs pays the unpruned search (300 s on 2 GPUs) either way; the measured start replaces the 0 s resume
    assert jct["with"] - jct["without"] == pytest.approx(COST.seconds(RestartKind.FIRST), abs=1e-9)


def test_first_start_move_and_resume_pay_their_kinds_and_other_models_the_constants():
    truth = ProfiledPerfModel(measured_profile(), CPU2)
    sim = SimBackend(CPU2, truth, config=SimConfig(overhead=scaled_overhead(2.0), round_s=50.0, overhead_class="none"))
    a, b = JobId("a"), JobId("b")
    snap = sim.reset([JobSpec(a, TINY, 16, 10**6, 0.0), JobSpec(b, MINI, 16, 10**6, 0.0)])
    assert snap is not None
    sim.apply(Decision(allocations=((a, on(1)),)))
    sim.advance()
    sim.apply(Decision(allocations=((a, on(2)),)))  # a move: the old generation saves while the new one starts
    sim.advance()
    sim.apply(Decision(preemptions=(a,)))
    sim.apply(Decision(allocations=((b, on(1)),)))  # not in the profile: the constants (0 s resume)
    sim.advance()
    sim.apply(Decision(preemptions=(b,), allocations=((a, on(1)),)))  # a resume from its checkpoint
    charged = [(e.job_id, e.overhead_s) for e in sim.events if e.kind is EventKind.ALLOCATE]
    assert charged == [
        (a, 2.0 * COST.seconds(RestartKind.FIRST)),  # scaled like every other overhead
        (a, 2.0 * (5.0 + 4.0 - 3.0 + 1.5)),
        (b, 0.0),
        (a, 2.0 * COST.seconds(RestartKind.RESUME)),
    ]
    sim.check_invariants()


def test_the_default_estimator_charges_the_constants():
    from estimator.perfmodel import EstimatorPerfModel

    sim = SimBackend(CPU2, EstimatorPerfModel(CPU2), config=SimConfig(overhead=OverheadModel(ckpt_resume_s=7.0)))
    a = JobId("a")
    sim.reset([JobSpec(a, TINY, 16, 100, 0.0)])
    sim.apply(Decision(allocations=((a, on(1)),)))
    (alloc,) = [e for e in sim.events if e.kind is EventKind.ALLOCATE]
    assert alloc.overhead_s == 10.0 + 7.0  # Arena's pruned search on one GPU, plus the resume constant
