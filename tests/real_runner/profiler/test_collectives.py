"""The composition counts the collectives the executor really issues (DTensor TP, FSDP2), on 2 gloo ranks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from arena_gym.types import Plan, StagePlan  # noqa: E402
from estimator.profiled import step_collectives  # noqa: E402
from tests.estimator.test_profile import synthetic_profile  # noqa: E402
from tests.real_runner.distributed_cases import process_group, spawn  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(300)]

PLANS = {"tp2 x2": Plan((StagePlan(0, 6, 1, 2),), 2), "dp2 x2": Plan((StagePlan(0, 6, 2, 1),), 2)}


def _kind(op: object) -> str | None:
    name = str(op)
    if "c10d" not in name:
        return None
    for key, kind in (
        ("allgather", "all_gather"),
        ("all_gather", "all_gather"),
        ("reduce_scatter", "reduce_scatter"),
        ("all_reduce", "all_reduce"),
        ("allreduce", "all_reduce"),
    ):
        if key in name:
            return kind
    return None


def _count(rank: int, work: str) -> None:
    from torch.profiler import ProfilerActivity, profile

    from real_runner.executor import Trainer
    from real_runner.plans import model_spec, resolve_plan

    torch.set_num_threads(1)
    spec = model_spec("gpt__tiny")
    out = {}
    with process_group(Path(work), "count", rank, 2, "gloo"):
        for name, plan in PLANS.items():
            trainer = Trainer(
                spec,
                resolve_plan(spec, plan, 8, 2),
                rank=rank,
                global_batch=8,
                lr=1e-3,
                seed=0,
                device=torch.device("cpu"),
            )
            trainer.train_step(0)
            with profile(activities=[ProfilerActivity.CPU]) as recorder:
                trainer.train_step(1)
            # the process group's own ops (c10d::), which the functional collectives of DTensor call too
            counts: dict[str, int] = {}
            for event in recorder.key_averages():
                kind = _kind(event.key) if event.key.startswith("c10d::") else None
                if kind is not None:
                    counts[kind] = counts.get(kind, 0) + event.count
            out[name] = counts
    if rank == 0:
        (Path(work) / "counts.json").write_text(json.dumps(out))


def test_composition_counts_the_executors_collectives(tmp_path):
    spawn(_count, 2, (str(tmp_path),), timeout_s=240)
    measured = json.loads((tmp_path / "counts.json").read_text())
    info = synthetic_profile().model("gpt__tiny")
    for name, plan in PLANS.items():
        expected = {k: v for k, v in step_collectives(info, plan).items() if v}
        assert measured[name] == expected, name
