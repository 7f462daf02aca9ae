"""Plans: validation against model, batch and world size; the nearest uniform plan; JSON form."""

from __future__ import annotations

import pytest

from arena_gym.types import GpuType, Grid, ModelRef, PipeSchedule, Plan, ResourceShape, StagePlan
from estimator import default_perf_model
from estimator.plan_space import largest_micro_batches
from estimator.zoo import TransformerSpec
from real_runner.plans import model_spec, plan_from_dict, plan_to_dict, resolve_plan

TINY = model_spec("gpt__tiny")  # 6 layers in the table: embed, 4 blocks, head; 4 heads


def plan(*stages, micro=1, schedule=PipeSchedule.GPIPE):
    return Plan(tuple(StagePlan(*s) for s in stages), micro, schedule)


def test_a_uniform_plan_runs_as_given():
    p = plan((0, 3, 2, 1), (3, 6, 2, 1), micro=2, schedule=PipeSchedule.ONE_F_ONE_B)
    ex = resolve_plan(TINY, p, 8, 4)
    assert ex.plan == p and ex.notes == ()
    assert (ex.pp, ex.dp, ex.tp, ex.world_size) == (2, 2, 1, 4)
    assert ex.describe() == "pp2[dp2tp1|dp2tp1]x2 1f1b"


@pytest.mark.parametrize(
    "p,world,batch,message",
    [
        (plan((0, 6, 2, 1)), 4, 8, "needs 2 ranks .* but the world size is 4"),
        (plan((0, 6, 1, 3)), 3, 8, "tensor-parallel degree 3 does not divide the 4 heads"),
        (plan((0, 3, 1, 1), (4, 6, 1, 1)), 2, 8, r"stage 1 layers \[4, 6\) do not continue from layer 3"),
        (plan((0, 5, 1, 1)), 1, 8, "stages end at layer 5, but gpt__tiny has 6 layers"),
        (plan((0, 6, 2, 1), micro=3), 2, 8, "3 micro-batches do not divide the per-replica batch 4"),
        (plan((0, 6, 4, 1)), 4, 6, "data-parallel degree 4 does not divide the global batch 6"),
        (plan((0, 6, 1, 1), micro=0), 1, 8, "micro-batches must be >= 1"),
        (Plan((), 1), 1, 8, "plan has no stages"),
    ],
)
def test_bad_plans_fail_with_one_line_naming_the_problem(p, world, batch, message):
    with pytest.raises(ValueError, match=message) as err:
        resolve_plan(TINY, p, batch, world)
    assert "\n" not in str(err.value)


def test_stages_with_different_meshes_run_on_the_nearest_uniform_mesh():
    # 6 ranks over 2 stages: the 4-layer stage asks dp1tp4, the 2-layer stage dp1tp2 -> 3 ranks per stage
    with pytest.raises(ValueError, match="no uniform mesh of 3 ranks per stage"):
        resolve_plan(TINY, plan((0, 4, 1, 4), (4, 6, 1, 2)), 8, 6)
    # 4 ranks per stage; distance (layers x log2 steps): dp2tp2 -> 2 x 2 = 4, dp1tp4 -> 4 x 2 = 8, dp4tp1 -> 16
    ex = resolve_plan(TINY, plan((0, 4, 2, 2), (4, 6, 1, 4), micro=4), 8, 8)
    assert ex.plan == plan((0, 4, 2, 2), (4, 6, 2, 2), micro=4)
    assert ex.requested.stages[1].tp == 4 and ex.notes == (
        "stages with different meshes run on the nearest uniform mesh dp2tp2",
    )
    ex = resolve_plan(TINY, plan((0, 1, 1, 1), (1, 6, 3, 1), micro=4, schedule=PipeSchedule.ONE_F_ONE_B), 8, 4)
    assert (ex.dp, ex.tp) == (2, 1) and ex.plan.micro_batches == 4
    assert "nearest uniform mesh dp2tp1" in ex.notes[0]


def test_a_changed_micro_batch_count_and_schedule_are_recorded():
    ex = resolve_plan(TINY, plan((0, 4, 4, 1), (4, 6, 2, 2), micro=4), 8, 8)
    assert (ex.dp, ex.tp) == (4, 1) and ex.plan.micro_batches == 2
    assert any("micro-batches 4 -> 2" in n for n in ex.notes)
    ex = resolve_plan(
        TINY, plan((0, 2, 1, 1), (2, 4, 1, 1), (4, 6, 1, 1), micro=2, schedule=PipeSchedule.ONE_F_ONE_B), 8, 3
    )
    assert ex.plan.schedule is PipeSchedule.GPIPE and "running GPipe" in ex.notes[0]


def test_tied_embeddings_refuse_pipelines():
    tied = TransformerSpec("gpt__t", 2, 32, 2, seq_len=8, vocab=64, dtype="fp32")
    assert resolve_plan(tied, plan((0, 4, 2, 1)), 8, 2).dp == 2
    with pytest.raises(ValueError, match="ties its embeddings"):
        resolve_plan(tied, plan((0, 2, 1, 1), (2, 4, 1, 1)), 8, 2)


def test_plan_json_round_trip_and_errors():
    p = plan((0, 2, 1, 2), (2, 6, 1, 2), micro=4, schedule=PipeSchedule.ONE_F_ONE_B)
    assert plan_from_dict(plan_to_dict(p)) == p
    assert plan_to_dict(p)["stages"][0] == {"layers": [0, 2], "dp": 1, "tp": 2}
    with pytest.raises(ValueError, match="plan is malformed"):
        plan_from_dict({"stages": [{"layers": [0]}], "micro_batches": 1})
    with pytest.raises(ValueError, match="schedule 'zb' is unknown; valid: gpipe, 1f1b"):
        plan_from_dict({**plan_to_dict(p), "schedule": "zb"})


def test_only_dense_transformers_of_the_zoo():
    with pytest.raises(ValueError, match="unknown model 'gpt__1T'"):
        model_spec("gpt__1T")
    with pytest.raises(ValueError, match="'wide_resnet' has no live model builder"):
        model_spec("wide_resnet__500M")
    assert model_spec("gpt__mini").hidden == 256


@pytest.mark.parametrize("name", ["gpt__tiny", "gpt__mini"])
def test_the_planners_plans_for_the_presets_are_executable(name):
    perf, spec, ran = default_perf_model(), model_spec(name), 0
    for gpus in (1, 2, 4):
        shape = ResourceShape(GpuType("a100"), 1, gpus)
        assert perf.iter_time(ModelRef.parse(name), 16, shape) > 0  # the estimator costs the preset
        for stages in (1, 2, 4):
            if stages > gpus:
                continue
            p = perf.grid_plan(ModelRef.parse(name), 16, Grid(shape, stages))
            if p is None:
                continue
            ex = resolve_plan(spec, p, 16, gpus)
            assert ex.world_size == gpus and ex.plan.n_stages == stages
            assert [(s.layer_start, s.layer_end) for s in ex.plan.stages] == [
                (s.layer_start, s.layer_end) for s in p.stages
            ]
            ran += 1
    assert ran >= 5


def test_the_runner_refuses_what_the_rules_refuse_and_names_the_rule() -> None:
    spec = model_spec("gpt__tiny")  # 4 heads, 6 layer-table entries
    one = (StagePlan(0, spec.layers + 2, 1, 3),)
    with pytest.raises(ValueError, match="tensor-parallel degree 3 does not divide the 4 heads"):
        resolve_plan(spec, Plan(one, 1), 16, 3)
    with pytest.raises(ValueError, match="data-parallel degree 3 does not divide the global batch 16"):
        resolve_plan(spec, Plan((StagePlan(0, spec.layers + 2, 3, 1),), 1), 16, 3)
    with pytest.raises(ValueError, match="3 micro-batches do not divide the per-replica batch 8"):
        resolve_plan(spec, Plan((StagePlan(0, spec.layers + 2, 2, 1),), 3), 16, 2)


def test_a_mixed_plan_falls_back_to_the_largest_dividing_micro_batch_count() -> None:
    spec = model_spec("gpt__tiny")
    mixed = Plan((StagePlan(0, 3, 2, 1), StagePlan(3, spec.layers + 2, 1, 2)), 6, PipeSchedule.ONE_F_ONE_B)
    executed = resolve_plan(spec, mixed, 16, 4)
    assert executed.plan.micro_batches == largest_micro_batches(16 // executed.dp, 6)
    assert any("micro-batches 6 ->" in note for note in executed.notes)
