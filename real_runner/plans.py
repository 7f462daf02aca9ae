"""From an estimator :class:`~arena_gym.types.Plan` to the plan the runner executes (no torch here).

The rules of what runs are the plan space's (:mod:`estimator.plan_space`); this module applies them
to one plan, with messages that name the problem.

``resolve_plan`` checks a plan against the model, the global batch and the world size (one-line
``ValueError`` naming the problem) and maps it to what ``torch.distributed.pipelining`` can run:

* every stage on the same (dp, tp) mesh: a plan whose stages differ is mapped to the nearest
  uniform mesh (same world size, same layer ranges; the mesh closest in log2 degrees, weighted by
  each stage's layer count; then the smaller tp), and its micro-batch count to the largest one
  that still divides the per-replica batch;
* ``Schedule1F1B`` needs at least as many micro-batches as stages: such plans run with GPipe.

Every change is recorded in :attr:`ExecutedPlan.notes`. Layer indices are those of the estimator's
layer table ``[embed, block0 .. block{L-1}, head]``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from arena_gym.families import live_family
from arena_gym.types import PipeSchedule, Plan, StagePlan
from estimator.plan_space import dp_fits, executed_schedule, largest_micro_batches, micro_fits, tp_fits, uniform_meshes
from estimator.zoo import TransformerSpec, get_model

#: The architectures the runner can build (``ModelFamily.live`` names one): ``transformer``, the torch GPT
#: of :mod:`real_runner.model`, which trains any dense :class:`TransformerSpec`.
LIVE_ARCHITECTURES = ("transformer",)


def model_spec(name: str) -> TransformerSpec:
    """The :class:`TransformerSpec` the runner trains for a model name; a one-line ValueError for an
    unknown model, a family without a live model builder (``ModelFamily.live``) or one the runner lacks."""
    arch = get_model(name)
    family = live_family(arch.family)
    if family.live not in LIVE_ARCHITECTURES:
        raise ValueError(
            f"model family {family.name!r} is trained live by architecture {family.live!r}, which the runner "
            f"does not have; valid: {', '.join(LIVE_ARCHITECTURES)}"
        )
    if arch.experts or set(arch.config) != set(TransformerSpec.__dataclass_fields__):
        raise ValueError(f"model {arch.name}: the runner trains dense transformers only, not {arch.kind} models")
    return TransformerSpec(**arch.config)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """JSON-ready form of a plan: ``{"stages": [{"layers": [a, b], "dp": .., "tp": ..}], "micro_batches", "schedule"}``."""
    return {
        "stages": [{"layers": [s.layer_start, s.layer_end], "dp": s.dp, "tp": s.tp} for s in plan.stages],
        "micro_batches": plan.micro_batches,
        "schedule": plan.schedule.value,
    }


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """Inverse of :func:`plan_to_dict`; ValueError naming the malformed field."""
    try:
        stages = tuple(
            StagePlan(int(s["layers"][0]), int(s["layers"][1]), int(s["dp"]), int(s["tp"])) for s in data["stages"]
        )
        micro = int(data["micro_batches"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise ValueError(
            f"plan is malformed ({type(exc).__name__}: {exc}); expected "
            '{"stages": [{"layers": [start, end], "dp": D, "tp": T}, ...], "micro_batches": M, '
            '"schedule": "gpipe"|"1f1b"}'
        ) from None
    schedule = str(data.get("schedule", PipeSchedule.GPIPE.value))
    valid = [s.value for s in PipeSchedule]
    if schedule not in valid:
        raise ValueError(f"plan schedule {schedule!r} is unknown; valid: {', '.join(valid)}")
    return Plan(stages, micro, PipeSchedule(schedule))


@dataclass(frozen=True)
class ExecutedPlan:
    """The plan that runs (uniform meshes), the plan that was asked for, and what changed."""

    requested: Plan
    plan: Plan
    notes: tuple[str, ...] = ()

    @property
    def pp(self) -> int:
        """Pipeline stages."""
        return self.plan.n_stages

    @property
    def dp(self) -> int:
        """Data-parallel degree of every stage."""
        return self.plan.stages[0].dp

    @property
    def tp(self) -> int:
        """Tensor-parallel degree of every stage."""
        return self.plan.stages[0].tp

    @property
    def world_size(self) -> int:
        """Ranks in total: pp x dp x tp."""
        return self.pp * self.dp * self.tp

    def describe(self) -> str:
        """Compact text, e.g. ``pp2[dp1tp1|dp1tp1]x4 1f1b``."""
        return f"{self.plan.describe()} {self.plan.schedule.value}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (executed plan, requested plan, notes)."""
        return {
            "plan": plan_to_dict(self.plan),
            "requested": plan_to_dict(self.requested),
            "notes": list(self.notes),
            "pp": self.pp,
            "dp": self.dp,
            "tp": self.tp,
        }


def _check_structure(spec: TransformerSpec, plan: Plan) -> None:
    total = spec.layers + 2
    if not plan.stages:
        raise ValueError("plan has no stages")
    if plan.micro_batches < 1:
        raise ValueError(f"plan {plan.describe()}: micro-batches must be >= 1, got {plan.micro_batches}")
    prev = 0
    for i, st in enumerate(plan.stages):
        if st.dp < 1 or st.tp < 1:
            raise ValueError(f"plan {plan.describe()}: stage {i} degrees dp{st.dp}tp{st.tp} must be >= 1")
        if st.layer_start != prev or st.layer_end <= st.layer_start:
            raise ValueError(
                f"plan {plan.describe()}: stage {i} layers [{st.layer_start}, {st.layer_end}) do not "
                f"continue from layer {prev}; stages must tile layers 0..{total} of {spec.name}"
            )
        if not tp_fits(spec.heads, st.tp):
            raise ValueError(
                f"plan {plan.describe()}: stage {i} tensor-parallel degree {st.tp} does not divide "
                f"the {spec.heads} heads of {spec.name}"
            )
        prev = st.layer_end
    if prev != total:
        raise ValueError(
            f"plan {plan.describe()}: stages end at layer {prev}, but {spec.name} has {total} layers "
            f"(embedding, {spec.layers} blocks, head)"
        )
    if spec.tied_embeddings and plan.n_stages > 1:
        raise ValueError(
            f"plan {plan.describe()}: {spec.name} ties its embeddings, which the runner supports "
            "only in single-stage plans"
        )


def _uniform_mesh(spec: TransformerSpec, plan: Plan, per_stage: int, global_batch: int) -> tuple[int, int]:
    layers = [s.layer_end - s.layer_start for s in plan.stages]
    best: tuple[float, int, int] | None = None
    for dp, tp in uniform_meshes(spec.heads, global_batch, per_stage):
        dist = sum(n * (abs(math.log2(s.tp / tp)) + abs(math.log2(s.dp / dp))) for n, s in zip(layers, plan.stages))
        if best is None or (dist, tp) < best[:2]:
            best = (dist, tp, dp)
    if best is None:
        raise ValueError(
            f"plan {plan.describe()}: no uniform mesh of {per_stage} ranks per stage fits "
            f"{spec.heads} heads and global batch {global_batch}"
        )
    return best[2], best[1]


def resolve_plan(spec: TransformerSpec, plan: Plan, global_batch: int, world_size: int) -> ExecutedPlan:
    """Validate ``plan`` for ``spec``, ``global_batch`` and ``world_size`` ranks; map it to an executable one."""
    _check_structure(spec, plan)
    if plan.num_gpus != world_size:
        raise ValueError(
            f"plan {plan.describe()} needs {plan.num_gpus} ranks (sum over stages of dp x tp) "
            f"but the world size is {world_size}"
        )
    notes: list[str] = []
    dp, tp = plan.stages[0].dp, plan.stages[0].tp
    micro = plan.micro_batches
    uniform = all((s.dp, s.tp) == (dp, tp) for s in plan.stages)
    if not uniform:
        if world_size % plan.n_stages:
            raise ValueError(
                f"plan {plan.describe()}: {world_size} ranks cannot be split evenly over {plan.n_stages} stages"
            )
        dp, tp = _uniform_mesh(spec, plan, world_size // plan.n_stages, global_batch)
        notes.append(f"stages with different meshes run on the nearest uniform mesh dp{dp}tp{tp}")
    if not dp_fits(global_batch, dp):
        raise ValueError(
            f"plan {plan.describe()}: data-parallel degree {dp} does not divide the global batch {global_batch}"
        )
    per_replica = global_batch // dp
    if not micro_fits(per_replica, micro):
        if uniform:
            raise ValueError(
                f"plan {plan.describe()}: {micro} micro-batches do not divide the per-replica batch "
                f"{per_replica} (global batch {global_batch} / dp {dp})"
            )
        micro = largest_micro_batches(per_replica, micro)
        notes.append(f"micro-batches {plan.micro_batches} -> {micro} to divide the per-replica batch {per_replica}")
    schedule = executed_schedule(plan.schedule, plan.n_stages, micro)
    if schedule is not plan.schedule:
        notes.append(f"1F1B needs >= {plan.n_stages} micro-batches, got {micro}: running GPipe")
    stages = tuple(StagePlan(s.layer_start, s.layer_end, dp, tp) for s in plan.stages)
    return ExecutedPlan(plan, Plan(stages, micro, schedule), tuple(notes))
