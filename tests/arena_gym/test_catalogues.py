"""A model family and a GPU type are each one module: a temporary module registers a toy family
(and another a toy GPU type), and simulate, the env and a live CPU job run them, no other file touched."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap
from pathlib import Path

import pytest

from arena_gym.families import get_family, unregister_family
from arena_gym.hardware import get_gpu, unregister_gpu

FAMILY_MODULE = """
from arena_gym.families import ModelFamily, TraceMix, register_family
from estimator.zoo import TransformerSpec, build_transformer

FAMILY = ModelFamily(
    name="toy",
    kind="toy",
    sizes={
        "s": TransformerSpec("toy__s", 2, 32, 2, seq_len=16, vocab=128, dtype="fp32", tied_embeddings=False, remat=False)
    },
    build=build_transformer,
    optimizer_bytes=8,
    trace=TraceMix(sizes=("s",), batches=(8,), min_gpus={"s": 1}, nominal_iter_s={"s": 1.0}),
    live="transformer",
    efficiency={"eta_compute": 0.5, "eta_memory": 0.5, "tile_rows": 64.0},
)
SIM_ONLY = ModelFamily(
    name="toysim", kind="transformer", sizes={"s": FAMILY.sizes["s"].__class__("toysim__s", 2, 32, 2)},
    build=build_transformer, optimizer_bytes=8,
)
register_family(FAMILY)
register_family(SIM_ONLY)
"""

GPU_MODULE = """
from arena_gym.hardware import GpuSpec, register_gpu

register_gpu(
    GpuSpec("toygpu", 16, 500, 100, 100, 50, 10, "pcie4", 2, "eth-25g", "a toy part for tests"),
    aliases=("toy-gpu",),
)
"""

TRACE = """job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s
t1,0,toy__s,8,200,toygpu,1,
t2,5,toy__s,8,300,toygpu,2,
t3,9,toysim__s,8,100,,1,
"""


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The two temporary modules imported (registering the family and the type); removed afterwards."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "toy_family.py").write_text(textwrap.dedent(FAMILY_MODULE))
    (src / "toy_gpu.py").write_text(textwrap.dedent(GPU_MODULE))
    monkeypatch.syspath_prepend(str(src))
    importlib.import_module("toy_family")
    importlib.import_module("toy_gpu")
    (tmp_path / "toy.csv").write_text(TRACE)
    (tmp_path / "cluster.json").write_text(
        json.dumps({"name": "toy-4", "gpu_types": {"toygpu": {"nodes": 2, "gpus_per_node": 2}}})
    )
    yield tmp_path
    for name in ("toy_family", "toy_gpu"):
        sys.modules.pop(name, None)
    unregister_family("toy")
    unregister_family("toysim")
    unregister_gpu("toygpu")


def test_the_toy_family_and_type_are_in_every_catalogue(toy: Path) -> None:
    from estimator.costmodel import usable_memory_gib
    from estimator.params import default_params
    from estimator.zoo import get_model, known_models
    from traces.recipe import default_feasible, family_sizes, nominal_iter_time
    from traces.table import parse_model

    assert get_family("toy").live == "transformer" and get_gpu("toy-gpu").name == "toygpu"
    assert "toy__s" in known_models() and get_model("toy__s").kind == "toy"
    assert default_params().kind("toy").eta_compute == 0.5  # its own efficiency, no calibration file
    assert parse_model("toy__s").family == "toy"
    assert family_sizes()["toy"] == ("s",)
    model = parse_model("toy__s")
    assert default_feasible(model, 8, "toygpu", 1) is False  # 16 GB: twice the fewest GPUs
    assert default_feasible(model, 8, "toygpu", 2) is True
    assert nominal_iter_time(model, 8, "a40", 1) == 1.0
    # a type without the recipe's figures: its FP16 peak over the A40's, 1.5x per doubling
    assert nominal_iter_time(model, 8, "toy-gpu", 4) == pytest.approx(149.7 / 100 / 1.5**2)
    assert usable_memory_gib(get_gpu("toygpu"), 0.8) == pytest.approx(12.8)


def test_simulate_runs_the_toy_family_on_the_toy_type(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from arena_gym.harness.cli import main

    out = toy / "out"
    code = main(
        ["simulate", "--policy", "arena", "--trace", str(toy / "toy.csv"), "--cluster", str(toy / "cluster.json"),
         "--out", str(out)]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["jobs_finished"] == 3


def test_the_env_steps_through_the_toy_workload(toy: Path) -> None:
    from envs.arena_env import ArenaSchedEnv

    env = ArenaSchedEnv(trace=str(toy / "toy.csv"), cluster=str(toy / "cluster.json"), max_pending=4)
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    done, steps = False, 0
    while not done and steps < 200:
        mask = info["action_mask"]
        action = int(mask.nonzero()[0][-1])
        obs, _, terminated, truncated, info = env.step(action)
        done, steps = terminated or truncated, steps + 1
    assert done


def test_a_live_cpu_job_trains_the_toy_family(toy: Path) -> None:
    pytest.importorskip("torch")
    import time

    import torch

    from arena_gym.types import Plan, StagePlan
    from real_runner.job import RunContext, run_job
    from real_runner.spec import WorkerSpec
    from real_runner.worker import prepare

    spec = WorkerSpec(
        job_id="t1", model="toy__s", global_batch=8, plan=Plan((StagePlan(0, 4, 1, 1),), 1), target_step=3,
        checkpoint_dir=str(toy / "ckpt"), progress_path=str(toy / "progress.jsonl"), device="cpu",
    )  # fmt: skip
    executed, resume = prepare(spec, 1)
    result = run_job(spec, executed, resume, RunContext(0, 1, torch.device("cpu"), time.time()), lambda: False)
    assert (result.event, result.step) == ("done", 3)


def test_a_family_without_a_live_builder_is_refused_in_one_line(toy: Path) -> None:
    from real_runner.plans import model_spec

    with pytest.raises(
        ValueError, match="^model family 'toysim' has no live model builder: it runs in the simulator only$"
    ):
        model_spec("toysim__s")
