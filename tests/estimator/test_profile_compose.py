"""Composition of a profile into plan times: the pipeline event simulation, hand-checked plans, and the
``profiled:PROFILE.json`` performance model behind the planner, proxy plans, tables and the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arena_gym.registry import perf_registry
from arena_gym.types import (
    ClusterSpec,
    GpuType,
    Grid,
    ModelRef,
    NodeGroup,
    PipeSchedule,
    Plan,
    ResourceShape,
    StagePlan,
)
from estimator.perfmodel import EstimatorPerfModel
from estimator.pipeline import closed_form, simulate, stage_order
from estimator.planner import PlannerConfig
from estimator.profiled import ProfiledPerfModel, executable_plans
from estimator.zoo import get_model
from tests.estimator.test_profile import LINKS, grouped_profile, order_profile, synthetic_profile

G, F = PipeSchedule.GPIPE, PipeSchedule.ONE_F_ONE_B
TINY = ModelRef.parse("gpt__tiny")
CPU2 = ClusterSpec("cpu-2", (NodeGroup(GpuType("cpu"), 1, 2),))
SHAPE = ResourceShape(GpuType("cpu"), 1, 2)


def comm(op: str, nbytes: float) -> float:
    lat, bw = LINKS[op]
    return lat + max(nbytes, 1024) / bw  # the tables start at 1 KiB: smaller messages cost the 1 KiB time


# ----------------------------------------------------------------------------------------------
# event simulation


def test_1f1b_runs_torchs_op_order():
    assert stage_order(0, 2, 4, F) == [("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)]
    assert stage_order(1, 2, 4, F) == [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]
    assert stage_order(0, 1, 2, G) == [("F", 0), ("B", 0), ("F", 1), ("B", 1)]  # one stage: gradient accumulation


def test_gpipe_simulation_by_hand():
    # stage 0: F=8.5, B=16.9; stage 1: F=16.1, B=28.1; 0.1 per transfer; 2 micro-batches (see the schedule below)
    end = simulate([8.5, 16.1], [16.9, 28.1], [0.1, 0.0], 2, G)
    # stage 0: F00 0-8.5, F01 8.5-17; stage 1: F10 8.6-24.7, F11 24.7-40.8, B10 40.8-68.9, B11 68.9-97.0
    # stage 0: B00 waits for B10 + 0.1: 69.0-85.9, B01 waits for B11 + 0.1: 97.1-114.0
    np.testing.assert_allclose(end, [114.0, 97.0])


def test_1f1b_simulation_by_hand():
    end = simulate([1.0, 2.0], [2.0, 4.0], [0.0, 0.0], 3, F)
    # stage 1 (F0 B0 F1 B1 F2 B2): F0 1-3, B0 3-7, F1 7-9, B1 9-13, F2 13-15, B2 15-19
    # stage 0 (F0 F1 B0 F2 B1 B2): F0 0-1, F1 1-2, B0 7-9, F2 9-10, B1 13-15, B2 19-21
    np.testing.assert_allclose(end, [21.0, 19.0])


def test_balanced_pipelines_match_the_closed_form_and_simulation_vectorises():
    fw, bw = np.full((3, 4), 1.0), np.full((3, 4), 2.0)
    for sched in (G, F):
        np.testing.assert_allclose(simulate(fw, bw, np.zeros((3, 4)), 8, sched).max(axis=-1), (8 + 4 - 1) * 3.0)
    np.testing.assert_allclose(closed_form(fw, bw, np.zeros((3, 4)), 8), 33.0)


# ----------------------------------------------------------------------------------------------
# hand-checked plans


def _opt(kind_counts: list[tuple[int, float, int]]) -> float:
    """AdamW: 1e-5 s per tensor + 1e-9 s per element + the wrapper's extra per DTensor."""
    return sum(t * 1e-5 + e * 1e-9 + wrapped for t, e, wrapped in kind_counts)


def test_data_parallel_plan_by_hand():
    est = ProfiledPerfModel(synthetic_profile(), CPU2).estimate(TINY, 16, SHAPE, Plan((StagePlan(0, 6, 2, 1),), 1))
    n = 8  # 16 samples / 1 micro-batch / dp 2
    fw = (1e-4 * n + 2e-4) + 4 * (1e-3 * n + 2e-4) + (2e-3 * n + 2e-4)  # compute + FSDP2 overhead per layer
    bw = (2e-4 * n + 3e-4) + 4 * (2e-3 * n + 3e-4) + (3e-3 * n + 3e-4) - 5 * 1e-5  # one autograd call, not six
    block, root = 49984 * 4, (69632 + 65664) * 4  # FSDP units: every block, and the root (embedding + head)
    fw += 4 * comm("all_gather", block) + comm("all_gather", root)
    bw += 4 * comm("all_gather", block) + comm("all_gather", root)  # every unit is gathered again for the backward
    sync = 4 * comm("reduce_scatter", block) + comm("reduce_scatter", root)
    opt = _opt([(2, 69632 / 2, 2 * 3e-5), *[(16, 49984 / 2, 16 * 3e-5)] * 4, (3, 65664 / 2, 3 * 3e-5)])
    glob = 16 * 1e-4 + comm("all_reduce", 4) + comm("all_reduce", 8)  # batch, loss and control all-reduces
    assert est.total_s == pytest.approx(fw + bw + sync + opt + glob, rel=1e-9)
    parts = est.compute_s + est.intra_stage_comm_s + est.inter_stage_comm_s + est.bubble_s
    assert parts == pytest.approx(est.total_s) and est.inter_stage_comm_s == 0.0
    assert est.feasible


def test_tensor_parallel_plan_by_hand():
    est = ProfiledPerfModel(synthetic_profile(), CPU2).estimate(TINY, 16, SHAPE, Plan((StagePlan(0, 6, 1, 2),), 2))
    n = 8  # 16 samples / 2 micro-batches, replicated over the tp group
    act = n * 64 * 64 * 4
    fw = 1e-4 * n + 4 * (6e-4 * n + 5e-4 + 2 * comm("all_reduce", act)) + 2e-3 * n  # local heads + DTensor + 2 AR
    bw = 2e-4 * n + 4 * (1.2e-3 * n + 1e-3 + 4 * comm("all_reduce", act)) + 3e-3 * n - 5e-5  # 4 AR: q, k, v, fc1
    opt = _opt([(2, 69632, 0), *[(16, 49984 - 49600 / 2, 12 * 2e-5)] * 4, (3, 65664, 0)])
    glob = 16 * 1e-4 + comm("all_reduce", 4) + comm("all_reduce", 8)
    assert est.total_s == pytest.approx(2 * (fw + bw) + opt + glob, rel=1e-9)


def test_pipeline_plan_by_hand():
    plan = Plan((StagePlan(0, 3, 1, 1), StagePlan(3, 6, 1, 1)), 2, G)
    est = ProfiledPerfModel(synthetic_profile(), CPU2).estimate(TINY, 16, SHAPE, plan)
    n = 8
    f0, b0 = 1e-4 * n + 2 * 1e-3 * n + 1e-4, 2e-4 * n + 2 * 2e-3 * n + 1e-4 - 2e-5  # + the schedule's overhead
    f1, b1 = 2 * 1e-3 * n + 2e-3 * n + 1e-4, 2 * 2e-3 * n + 3e-3 * n + 1e-4 - 2e-5  # - 2 of 3 autograd calls
    end = simulate([f0, f1], [b0, b1], [comm("send_recv", n * 64 * 64 * 4), 0.0], 2, G)
    opt0 = _opt([(2, 69632, 0), (16, 49984, 0), (16, 49984, 0)])
    opt1 = _opt([(16, 49984, 0), (16, 49984, 0), (3, 65664, 0)])
    glob = 16 * 1e-4 + comm("all_reduce", 4) + comm("all_reduce", 8)
    assert est.total_s == pytest.approx(max(end[0] + opt0, end[1] + opt1) + glob, rel=1e-9)
    assert est.inter_stage_comm_s > 0 and est.bubble_s > 0
    assert est.compute_s + est.intra_stage_comm_s + est.inter_stage_comm_s + est.bubble_s == pytest.approx(est.total_s)


@pytest.mark.parametrize("schedule, in_flight", [(G, (2, 2)), (F, (2, 1))])
def test_micro_batches_in_flight_scale_each_stages_computation(schedule, in_flight):
    plan = Plan((StagePlan(0, 3, 1, 1), StagePlan(3, 6, 1, 1)), 2, schedule)
    est = ProfiledPerfModel(order_profile(), CPU2).estimate(TINY, 16, SHAPE, plan)
    n = 8  # beyond the profiled 4 samples: the fraction at 4, 0.04 with 2 in flight, 0 with 1
    scale = [1.04 if d == 2 else 1.0 for d in in_flight]
    cf = [1e-4 * n + 2 * 1e-3 * n, 2 * 1e-3 * n + 2e-3 * n]
    cb = [2e-4 * n + 2 * 2e-3 * n - 2e-5, 2 * 2e-3 * n + 3e-3 * n - 2e-5]
    fw = [c * k + 1e-4 for c, k in zip(cf, scale)]  # the schedule's overhead is not scaled
    bw = [c * k + 1e-4 for c, k in zip(cb, scale)]
    end = simulate(fw, bw, [comm("send_recv", n * 64 * 64 * 4), 0.0], 2, schedule)
    opt0 = _opt([(2, 69632, 0), (16, 49984, 0), (16, 49984, 0)])
    opt1 = _opt([(16, 49984, 0), (16, 49984, 0), (3, 65664, 0)])
    glob = 16 * 1e-4 + comm("all_reduce", 4) + comm("all_reduce", 8)
    assert est.total_s == pytest.approx(max(end[0] + opt0, end[1] + opt1) + glob, rel=1e-9)
    single = Plan((StagePlan(0, 6, 1, 1),), 2, G)  # one stage runs gradient accumulation: nothing in flight
    one = ResourceShape(GpuType("cpu"), 1, 1)
    assert ProfiledPerfModel(order_profile(), CPU2).estimate(TINY, 16, one, single).total_s == pytest.approx(
        ProfiledPerfModel(synthetic_profile(), CPU2).estimate(TINY, 16, one, single).total_s, rel=1e-12
    )


def test_grouped_fsdp_units_replace_the_one_rank_overheads_and_the_gathers():
    est = ProfiledPerfModel(grouped_profile(), CPU2).estimate(TINY, 16, SHAPE, Plan((StagePlan(0, 6, 2, 1),), 2))
    n = 4  # 16 samples / 2 micro-batches / dp 2
    fw = 6 * (1e-3 + 1.5e-3 * n)  # computation and gathers of every unit, timed together without gradient sync
    bw = 6 * (2e-3 + 2.5e-3 * n) - 5 * 1e-5  # one autograd call per stage, not six
    sync = 6 * 4e-3  # the last micro-batch's measured synchronisation of every unit, once per step
    opt = _opt([(2, 69632 / 2, 2 * 3e-5), *[(16, 49984 / 2, 16 * 3e-5)] * 4, (3, 65664 / 2, 3 * 3e-5)])
    glob = 16 * 1e-4 + comm("all_reduce", 4) + comm("all_reduce", 8)
    assert est.total_s == pytest.approx(2 * (fw + bw) + sync + opt + glob, rel=1e-9)
    # a pipeline keeps its parameters gathered across micro-batches, unlike the grouped units: the tables stay in use
    plan = Plan((StagePlan(0, 3, 2, 1), StagePlan(3, 6, 2, 1)), 2, G)
    shape4 = ResourceShape(GpuType("cpu"), 1, 4)
    cpu4 = ClusterSpec("c", (NodeGroup(GpuType("cpu"), 1, 4),))
    assert ProfiledPerfModel(grouped_profile(), cpu4).estimate(TINY, 16, shape4, plan).total_s == pytest.approx(
        ProfiledPerfModel(synthetic_profile(), cpu4).estimate(TINY, 16, shape4, plan).total_s
    )


def test_a_grouped_tensor_parallel_block_replaces_local_heads_dtensor_and_the_all_reduces():
    est = ProfiledPerfModel(grouped_profile(), CPU2).estimate(TINY, 16, SHAPE, Plan((StagePlan(0, 6, 1, 2),), 2))
    n = 8
    fw = 1e-4 * n + 4 * (1e-3 + 5e-4 * n) + 2e-3 * n  # embedding and head replicated; blocks as timed on the group
    bw = 2e-4 * n + 4 * (2e-3 + 1e-3 * n) + 3e-3 * n - 5e-5
    opt = _opt([(2, 69632, 0), *[(16, 49984 - 49600 / 2, 12 * 2e-5)] * 4, (3, 65664, 0)])
    glob = 16 * 1e-4 + comm("all_reduce", 4) + comm("all_reduce", 8)
    assert est.total_s == pytest.approx(2 * (fw + bw) + opt + glob, rel=1e-9)
    # a degree the profile did not time on a group composes from the tables as before
    cpu4 = ClusterSpec("c", (NodeGroup(GpuType("cpu"), 1, 4),))
    shape4 = ResourceShape(GpuType("cpu"), 1, 4)
    two_d = Plan((StagePlan(0, 6, 2, 2),), 1)
    with pytest.raises(Exception, match="tp=4"):
        ProfiledPerfModel(grouped_profile(), cpu4).estimate(TINY, 16, shape4, Plan((StagePlan(0, 6, 1, 4),), 1))
    assert (
        ProfiledPerfModel(grouped_profile(), cpu4).estimate(TINY, 16, shape4, two_d).total_s
        < ProfiledPerfModel(synthetic_profile(), cpu4).estimate(TINY, 16, shape4, two_d).total_s
    )


def test_non_uniform_meshes_are_refused_with_the_reason():
    plan = Plan((StagePlan(0, 3, 1, 1), StagePlan(3, 6, 1, 1)), 2, G)
    model = ProfiledPerfModel(synthetic_profile(), ClusterSpec("c", (NodeGroup(GpuType("cpu"), 1, 4),)))
    bad = Plan((StagePlan(0, 3, 2, 1), StagePlan(3, 6, 1, 2)), 2, G)
    with pytest.raises(ValueError, match="uniform meshes"):
        model.estimate(TINY, 16, ResourceShape(GpuType("cpu"), 1, 4), bad)
    assert model.estimate(TINY, 16, SHAPE, plan).feasible


# ----------------------------------------------------------------------------------------------
# the performance model


@pytest.fixture
def perf(tmp_path):
    path = tmp_path / "PROFILE.json"
    path.write_text(synthetic_profile().to_json())
    return perf_registry().make(f"profiled:{path}", cluster=CPU2)


def test_registry_builds_the_profiled_model(perf):
    assert isinstance(perf, ProfiledPerfModel) and perf.name == "profiled"


def test_proxy_plans_are_executable_and_their_estimate_is_the_table_time(perf):
    for shape in (ResourceShape(GpuType("cpu"), 1, 1), SHAPE):
        t = perf.iter_time(TINY, 16, shape)
        plan = perf.proxy_plan(TINY, 16, shape)
        assert math.isfinite(t) and plan is not None and plan.num_gpus == shape.num_gpus
        assert len({(s.dp, s.tp) for s in plan.stages}) == 1  # uniform mesh, as the runner runs it
        assert (16 // plan.stages[0].dp) % plan.micro_batches == 0
        assert perf.estimate(TINY, 16, shape, plan).total_s == pytest.approx(t)
        candidates = executable_plans(get_model("gpt__tiny"), 16, shape, PlannerConfig())
        assert plan in candidates
        assert t == pytest.approx(min(perf.estimate(TINY, 16, shape, p).total_s for p in candidates))
        assert perf.dp_iter_time(TINY, 16, shape) >= t - 1e-12


def test_grids_tables_and_pareto_sets(perf):
    one, two = (perf.grid_iter_time(TINY, 16, Grid(SHAPE, s)) for s in (1, 2))
    assert min(one, two) == pytest.approx(perf.iter_time(TINY, 16, SHAPE))
    plans = perf.plan_grid(TINY, 16, Grid(SHAPE, 2))
    assert plans.best is not None and plans.best.plan.n_stages == 2 and plans.best.total_s == pytest.approx(two)
    table = perf.table(TINY, 16, "cpu")
    assert table.shapes and np.isfinite(table.time).any()


def test_pairs_the_profile_does_not_cover_fall_back_to_the_estimator(perf):
    shape = ResourceShape(GpuType("a100"), 1, 4)
    big = ModelRef.parse("gpt__1.3B")
    assert perf.iter_time(big, 64, shape) == EstimatorPerfModel(CPU2).iter_time(big, 64, shape)
    mini_cpu = ModelRef.parse("gpt__mini")  # on the profiled type but not profiled: the nominal cpu entry
    assert perf.iter_time(mini_cpu, 16, SHAPE) == EstimatorPerfModel(CPU2).iter_time(mini_cpu, 16, SHAPE)


def test_the_simulator_runs_jobs_at_the_profiled_speed(tmp_path):
    import json

    from arena_gym.harness.experiment import RunConfig, run
    from arena_gym.types import JobId, JobSpec, OverheadModel

    profile = tmp_path / "PROFILE.json"
    profile.write_text(synthetic_profile().to_json())
    cluster = tmp_path / "cpu2.json"
    cluster.write_text(json.dumps({"name": "cpu-2", "gpu_types": {"cpu": {"nodes": 1, "gpus_per_node": 2}}}))
    jobs = (JobSpec(JobId("a"), TINY, 16, 1000, 0.0, GpuType("cpu"), 2),)
    result = run(
        RunConfig(
            policy="fcfs",
            trace="synthetic",
            cluster=str(cluster),
            perf=f"profiled:{profile}",
            overhead=OverheadModel(0, 0, 0, 0, 0),
        ),
        jobs=jobs,
    )
    iter_s = ProfiledPerfModel(synthetic_profile(), CPU2).iter_time(TINY, 16, SHAPE)
    assert result.metrics["jobs_finished"] == 1
    assert result.metrics["avg_jct_s"] == pytest.approx(1000 * iter_s, rel=1e-6)
