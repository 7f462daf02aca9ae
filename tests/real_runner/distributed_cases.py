"""Multi-rank cases run inside ONE spawn of persistent processes (torch.multiprocessing, file-store groups).

Each case forms a new process group of the size it needs (processes beyond it wait for the next
case), runs, destroys the group and clears DTensor's caches. Rank 0 of each case writes its results
as JSON into the work directory; the parent test compares them with a single-process reference.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from arena_gym.types import PipeSchedule, Plan, StagePlan
from real_runner import checkpoint
from real_runner.checkpoint_files import select_checkpoint
from real_runner.executor import Trainer, reset_distributed_caches
from real_runner.job import RunContext, run_job
from real_runner.plans import model_spec, resolve_plan
from real_runner.rank_cli import exit_now
from real_runner.spec import WorkerSpec
from real_runner.worker import prepare

MODEL, BATCH, LR, SEED = "gpt__tiny", 8, 1e-3, 0
ORACLE_STEPS = 6
G, F = PipeSchedule.GPIPE, PipeSchedule.ONE_F_ONE_B


def make_plan(*stages: tuple[int, int, int, int], micro: int = 1, schedule: PipeSchedule = G) -> Plan:
    """A plan from (layer_start, layer_end, dp, tp) tuples."""
    return Plan(tuple(StagePlan(*s) for s in stages), micro, schedule)


#: name -> plan; every plan reproduces the single-process losses (gpt__tiny's layer table has 6 layers).
ORACLE = {
    "dp2 (fsdp2)": make_plan((0, 6, 2, 1)),
    "dp2, 2 micro-batches accumulated": make_plan((0, 6, 2, 1), micro=2),
    "tp2": make_plan((0, 6, 1, 2)),
    "pp2 gpipe": make_plan((0, 3, 1, 1), (3, 6, 1, 1), micro=4),
    "pp2 1f1b": make_plan((0, 2, 1, 1), (2, 6, 1, 1), micro=4, schedule=F),
    "dp2 x tp2": make_plan((0, 6, 2, 2), micro=2),
    "pp2 x dp2": make_plan((0, 3, 2, 1), (3, 6, 2, 1), micro=2, schedule=F),
    "pp2 x tp2": make_plan((0, 4, 1, 2), (4, 6, 1, 2), micro=2, schedule=F),
}


@dataclass(frozen=True)
class Segment:
    """One generation of the resharding chain: a plan, steps to train, ranks reversed or not."""

    name: str
    plan: Plan
    steps: int
    reverse_ranks: bool = False


#: single -> DP2 -> TP2 -> PP2 (GPipe) -> DP2 x TP2 -> PP2 (1F1B) -> single, through checkpoints.
CHAIN = (
    Segment("single", make_plan((0, 6, 1, 1)), 3),
    Segment("dp2", make_plan((0, 6, 2, 1)), 3),
    Segment("tp2, ranks reversed", make_plan((0, 6, 1, 2)), 3, reverse_ranks=True),
    Segment("pp2 gpipe", make_plan((0, 3, 1, 1), (3, 6, 1, 1), micro=2), 3),
    Segment("dp2 x tp2, ranks reversed", make_plan((0, 6, 2, 2)), 3, reverse_ranks=True),
    Segment("pp2 1f1b", make_plan((0, 2, 1, 1), (2, 6, 1, 1), micro=4, schedule=F), 3),
    Segment("single", make_plan((0, 6, 1, 1), micro=2), 3),
)
CHAIN_STEPS = sum(s.steps for s in CHAIN)
#: Steps trained after the chain by the optimizer-restored run and the negative control.
CONTROL_STEPS = 3


def max_diff(a: list[float], b: list[float]) -> float:
    """The largest absolute difference between two loss curves of the same length."""
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def chain_spec(work: Path, plan: Plan, target: int, index: int) -> WorkerSpec:
    """The job spec of chain segment ``index`` (the first starts fresh, the others must resume)."""
    return WorkerSpec(
        "chain",
        MODEL,
        BATCH,
        plan,
        target,
        str(work / "ckpt"),
        str(work / f"chain{index}.jsonl"),
        seed=SEED,
        lr=LR,
        require_checkpoint=index > 0,
    )


def reference_losses(steps: int) -> list[float]:
    """The uninterrupted single-process loss trajectory."""
    spec = model_spec(MODEL)
    executed = resolve_plan(spec, make_plan((0, 6, 1, 1)), BATCH, 1)
    trainer = Trainer(spec, executed, rank=0, global_batch=BATCH, lr=LR, seed=SEED, device=torch.device("cpu"))
    return [trainer.train_step(s) for s in range(steps)]


@contextlib.contextmanager
def process_group(workdir: Path, tag: str, rank: int, world: int, backend: str) -> Iterator[None]:
    """The default process group of ``world`` ranks (none for one), torn down after a closing barrier."""
    if world == 1:
        yield
        return
    dist.init_process_group(
        backend,
        init_method=f"file://{workdir}/store-{tag}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=90),
    )
    try:
        yield
        dist.barrier()  # no rank tears its pairs down while another still drains its last collective
    finally:
        dist.destroy_process_group()
        reset_distributed_caches()


def _device(proc: int, backend: str) -> torch.device:
    return torch.device("cuda", proc) if backend == "nccl" else torch.device("cpu")


def _write(workdir: Path, name: str, data: object) -> None:
    (workdir / f"{name}.json").write_text(json.dumps(data))


def oracle_case(proc: int, nprocs: int, workdir: str, backend: str) -> None:
    """Every ORACLE plan that fits in ``nprocs`` ranks, ORACLE_STEPS steps each; results in oracle.json."""
    torch.set_num_threads(1)
    work = Path(workdir)
    spec, device, out = model_spec(MODEL), _device(proc, backend), {}
    if backend == "nccl":
        torch.cuda.set_device(device)
    for i, (name, plan) in enumerate(ORACLE.items()):
        world = plan.num_gpus
        if proc >= world or world > nprocs:
            continue
        with process_group(work, f"oracle{i}", proc, world, backend):
            executed = resolve_plan(spec, plan, BATCH, world)
            trainer = Trainer(spec, executed, rank=proc, global_batch=BATCH, lr=LR, seed=SEED, device=device)
            out[name] = [trainer.train_step(s) for s in range(ORACLE_STEPS)]
    if proc == 0:
        _write(work, "oracle", out)


def chain_case(proc: int, nprocs: int, workdir: str) -> None:
    """The ORACLE plans, then the CHAIN through checkpoints with ``run_job``, then the control pair."""
    oracle_case(proc, nprocs, workdir, "gloo")
    work = Path(workdir)
    done = 0
    for j, seg in enumerate(CHAIN):
        world = seg.plan.num_gpus
        done += seg.steps
        if proc >= world:
            continue
        rank = world - 1 - proc if seg.reverse_ranks else proc
        spec = chain_spec(work, seg.plan, done, j)
        with process_group(work, f"chain{j}", rank, world, "gloo"):
            executed, resume = prepare(spec, world)
            run_job(spec, executed, resume, RunContext(rank, world, torch.device("cpu"), time.time()), lambda: False)
    # the final checkpoint under DP2, with and without the optimizer state: only the first may match
    spec = model_spec(MODEL)
    executed = resolve_plan(spec, ORACLE["dp2 (fsdp2)"], BATCH, 2)
    out = {}
    for restore in (True, False):
        if proc >= 2:
            continue
        with process_group(work, f"control{restore}", proc, 2, "gloo"):
            trainer = Trainer(
                spec, executed, rank=proc, global_batch=BATCH, lr=LR, seed=SEED, device=torch.device("cpu")
            )
            info = select_checkpoint(work / "ckpt", chain_spec(work, executed.plan, 1, 0).identity(), require=True)
            step = checkpoint.load(trainer, info, restore_optimizer=restore)
            out["restored" if restore else "fresh optimizer"] = [
                trainer.train_step(step + s) for s in range(CONTROL_STEPS)
            ]
    if proc == 0:
        _write(work, "control", out)


def _exit_after(proc: int, fn, *args) -> None:
    """``fn(proc, *args)``, then exit at once as the runner's ranks do: a process that used gloo with DTensor, FSDP2 or
    pipelining can abort in the interpreter's teardown of torch's threads ("terminate called without an active
    exception"), after its work is done."""
    fn(proc, *args)
    exit_now(0)


def spawn(fn, nprocs: int, args: tuple, timeout_s: float) -> None:
    """Run ``fn(proc, *args)`` in ``nprocs`` spawned processes; kill them and fail after ``timeout_s``."""
    ctx = mp.start_processes(_exit_after, args=(fn, *args), nprocs=nprocs, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=max(0.1, deadline - time.monotonic())):
        if time.monotonic() >= deadline:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            raise TimeoutError(f"spawned processes did not finish within {timeout_s:.0f} s")
