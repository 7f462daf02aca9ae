"""Multi-rank cases of mixed precision and recomputation, run inside one spawn of persistent processes.

Every plan kind of the loss oracle trains in bf16 with recomputation and in fp16 with a gradient
scaler; then a chain of generations switches precision through checkpoints (fp32 -> bf16 under DP2
-> fp16 under PP2 -> bf16 under TP2 -> fp32). Rank 0 writes the losses as JSON into the work
directory (``precision_oracle.json`` and ``precision_chain{j}.jsonl``).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import torch

from estimator.zoo import TransformerSpec
from real_runner.executor import Trainer
from real_runner.job import RunContext, run_job
from real_runner.plans import ExecutedPlan, model_spec, resolve_plan
from real_runner.precision import PRECISIONS
from real_runner.worker import prepare
from tests.real_runner.distributed_cases import (
    BATCH,
    LR,
    MODEL,
    ORACLE,
    ORACLE_STEPS,
    SEED,
    _write,
    chain_spec,
    make_plan,
    process_group,
)
from tests.real_runner.distributed_cases import F as ONE_F_ONE_B

#: (precision, remat) modes the oracle plans run in, keyed by a label.
MODES = {"bf16 remat": ("bf16", True), "fp16 remat": ("fp16", True), "bf16": ("bf16", False)}
#: The plans of each mode: bf16 with recomputation runs every oracle plan, the others one per plan kind.
MODE_PLANS = {
    "bf16 remat": tuple(ORACLE),
    "fp16 remat": ("dp2 (fsdp2)", "tp2", "pp2 1f1b"),
    "bf16": ("dp2 (fsdp2)", "tp2", "pp2 gpipe"),
}
#: The precision chain: (precision, plan, steps) per generation, each resuming the previous checkpoint.
PRECISION_CHAIN = (
    ("fp32", make_plan((0, 6, 1, 1)), 2),
    ("bf16", make_plan((0, 6, 2, 1)), 2),
    ("fp16", make_plan((0, 2, 1, 1), (2, 6, 1, 1), micro=4, schedule=ONE_F_ONE_B), 2),
    ("bf16", make_plan((0, 6, 1, 2)), 2),
    ("fp32", make_plan((0, 6, 1, 1)), 2),
)


def reference(precision: str, remat: bool, steps: int) -> list[float]:
    """The single-process loss trajectory in ``precision``."""
    spec = model_spec(MODEL)
    trainer = mode_trainer(spec, resolve_plan(spec, make_plan((0, 6, 1, 1)), BATCH, 1), 0, precision, remat)
    return [trainer.train_step(s) for s in range(steps)]


def mode_trainer(spec: TransformerSpec, executed: ExecutedPlan, rank: int, precision: str, remat: bool) -> Trainer:
    """A CPU trainer of the chain's model, batch, learning rate and seed in ``precision``."""
    return Trainer(
        spec,
        executed,
        rank=rank,
        global_batch=BATCH,
        lr=LR,
        seed=SEED,
        device=torch.device("cpu"),
        precision=PRECISIONS[precision],
        remat=remat,
    )


def precision_case(proc: int, nprocs: int, workdir: str) -> None:
    """The oracle plans in every mode, then the precision chain through checkpoints with ``run_job``."""
    torch.set_num_threads(1)
    work, spec, cpu = Path(workdir), model_spec(MODEL), torch.device("cpu")
    out: dict[str, dict[str, list[float]]] = {}
    for label, (precision, remat) in MODES.items():
        out[label] = {}
        for name in MODE_PLANS[label]:
            plan = ORACLE[name]
            world = plan.num_gpus
            if proc >= world or world > nprocs:
                continue
            with process_group(work, f"{label}-{name}".replace(" ", "_"), proc, world, "gloo"):
                trainer = mode_trainer(spec, resolve_plan(spec, plan, BATCH, world), proc, precision, remat)
                out[label][name] = [trainer.train_step(s) for s in range(ORACLE_STEPS)]
    if proc == 0:
        _write(work, "precision_oracle", out)
    done = 0
    for j, (precision, plan, steps) in enumerate(PRECISION_CHAIN):
        world = plan.num_gpus
        done += steps
        if proc >= world:
            continue
        job = replace(
            chain_spec(work, plan, done, j),
            progress_path=str(work / f"precision_chain{j}.jsonl"),
            precision=precision,
            remat="on" if j % 2 else "off",
        )
        with process_group(work, f"pchain{j}", proc, world, "gloo"):
            executed, resume = prepare(job, world)
            run_job(job, executed, resume, RunContext(proc, world, cpu, time.time()), lambda: False)
