"""What each rank of a two-stage pipeline spends per step under GPipe and 1F1B, and the schedules' machinery.

The composition prices a pipeline stage as its layers' computation (times the op-order cost of the
micro-batches in flight) plus the schedule's machinery per micro-batch, timed once on a one-stage
``ScheduleGPipe`` at ``pipeline_micro_batches``. This benchmark checks those pieces where they run:

* ``ranks``: the runner's own :class:`~real_runner.executor.Trainer` on 2 gloo ranks (a core each,
  glibc keeping freed memory as in the runner), the even two-stage split under each schedule and
  micro-batch count, interleaved; per rank the median wall time, thread CPU time and involuntary
  context switches of a step (steps start together after a barrier).
* ``one stage``: in this process, the whole model as gradient accumulation, as a loop in GPipe's op
  order, and as one-stage ``ScheduleGPipe`` / ``Schedule1F1B``, in thread CPU time: the op order's
  cost and each schedule's machinery at each micro-batch count, with no communication.

Usage: ``python benchmarks/bench_pipeline_ranks.py [--model gpt__tiny] [--micro-batches 2,8,16]
[--batch 16] [--rounds 4] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from arena_gym.harness.out_dirs import machine
from arena_gym.outputs import code_version, write_json
from arena_gym.types import PipeSchedule, Plan, StagePlan
from real_runner.allocator import keep_freed_memory
from real_runner.data import global_batch
from real_runner.executor import Trainer
from real_runner.model import GPT, loss_fn, n_layers
from real_runner.plans import model_spec, resolve_plan

SCHEDULES = (PipeSchedule.GPIPE, PipeSchedule.ONE_F_ONE_B)
STEPS, WARMUP = 6, 2  # steps per plan and round, the first WARMUP untimed


def _plans(model: str, micro_batches: list[int]) -> dict[str, Plan]:
    total = n_layers(model_spec(model))
    half = total // 2
    even = (StagePlan(0, half, 1, 1), StagePlan(half, total, 1, 1))
    return {f"{s.value} x{b}": Plan(even, b, s) for s in SCHEDULES for b in micro_batches}


def _rank(rank: int, work: str, model: str, micro_batches: list[int], batch: int, rounds: int) -> None:
    """One rank: every plan's trainer, ``rounds`` interleaved rounds of ``STEPS`` steps; laps to ``work``."""
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[rank]})
    torch.set_num_threads(1)
    keep_freed_memory()
    store = dist.FileStore(f"{work}/store", 2)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=300))
    spec = model_spec(model)
    trainers = {
        name: Trainer(
            spec,
            resolve_plan(spec, plan, batch, 2),
            rank=rank,
            global_batch=batch,
            lr=1e-3,
            seed=0,
            device=torch.device("cpu"),
        )
        for name, plan in _plans(model, micro_batches).items()
    }
    laps: dict[str, list[list[float]]] = {name: [] for name in trainers}
    step = 0
    for _ in range(rounds):
        for name, trainer in trainers.items():
            for i in range(STEPS):
                dist.barrier()
                wall, cpu = time.perf_counter(), time.thread_time()
                switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw
                trainer.train_step(step)
                step += 1
                if i >= WARMUP:
                    laps[name].append(
                        [
                            time.perf_counter() - wall,
                            time.thread_time() - cpu,
                            resource.getrusage(resource.RUSAGE_THREAD).ru_nivcsw - switches,
                        ]
                    )
    Path(f"{work}/rank{rank}.json").write_text(json.dumps(laps))
    dist.barrier()
    dist.destroy_process_group()


def ranks(model: str, micro_batches: list[int], batch: int, rounds: int, timeout_s: float = 1200) -> list[dict]:
    """Per plan and rank: median wall, thread CPU (seconds) and involuntary switches of a step."""
    with tempfile.TemporaryDirectory() as work:
        ctx = mp.start_processes(
            _rank, args=(work, model, micro_batches, batch, rounds), nprocs=2, join=False, start_method="spawn"
        )
        deadline = time.monotonic() + timeout_s
        while not ctx.join(timeout=max(0.1, deadline - time.monotonic())):
            if time.monotonic() >= deadline:
                for p in ctx.processes:
                    p.kill()
                raise SystemExit(f"the two ranks did not finish within {timeout_s:.0f} s")
        laps = [json.loads(Path(f"{work}/rank{r}.json").read_text()) for r in (0, 1)]
    rows = []
    for name in laps[0]:
        for r in (0, 1):
            wall, cpu, switches = zip(*laps[r][name], strict=True)
            rows.append(
                {
                    "plan": name,
                    "rank": r,
                    "wall_s": statistics.median(wall),
                    "cpu_s": statistics.median(cpu),
                    "involuntary_switches": statistics.median(switches),
                }
            )
    return rows


def one_stage(model: str, micro_batches: int, batch: int, rounds: int) -> dict[str, float]:
    """Thread CPU seconds of a step of the whole model: gradient accumulation, GPipe's order, both schedules."""
    spec = model_spec(model)
    x, y = global_batch(0, 0, batch, spec.seq_len, spec.vocab)
    chunks = list(zip(x.chunk(micro_batches), y.chunk(micro_batches), strict=True))
    models = {k: GPT(spec, seed=0) for k in ("accumulation", "gpipe order", "ScheduleGPipe", "Schedule1F1B")}
    stages = {
        k: cls(
            PipelineStage(models[k], 0, 1, torch.device("cpu"), group=dist.group.WORLD), micro_batches, loss_fn=loss_fn
        )
        for k, cls in (("ScheduleGPipe", ScheduleGPipe), ("Schedule1F1B", Schedule1F1B))
    }

    def accumulation() -> None:
        for xm, ym in chunks:
            (loss_fn(models["accumulation"](xm), ym) / micro_batches).backward()

    def gpipe_order() -> None:
        for loss in [loss_fn(models["gpipe order"](xm), ym) / micro_batches for xm, ym in chunks]:
            loss.backward()

    runs: dict[str, Callable[[], None]] = {
        "accumulation": accumulation,
        "gpipe order": gpipe_order,
        **{k: (lambda s=s: s.step(x, target=y, losses=[])) for k, s in stages.items()},
    }
    laps: dict[str, list[float]] = {k: [] for k in runs}
    for r in range(rounds + WARMUP):
        for k, run in runs.items():
            models[k].zero_grad(set_to_none=True)
            t0 = time.thread_time()
            run()
            if r >= WARMUP:
                laps[k].append(time.thread_time() - t0)
    return {k: statistics.median(v) for k, v in laps.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt__tiny")
    parser.add_argument("--micro-batches", default="2,8,16", help="comma-separated micro-batch counts")
    parser.add_argument("--batch", type=int, default=16, help="global batch")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (4 timed steps of each plan each)")
    parser.add_argument("--out", default="results/bench_pipeline_ranks.json")
    args = parser.parse_args()
    try:
        micro = [int(b) for b in args.micro_batches.split(",")]
    except ValueError:
        raise SystemExit(f"--micro-batches must be comma-separated integers, got {args.micro_batches!r}") from None
    if len(os.sched_getaffinity(0)) < 2 or any(b < 2 or args.batch % b for b in micro) or args.rounds < 1:
        raise SystemExit("needs 2 cores, micro-batch counts >= 2 that divide --batch, and --rounds >= 1")
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    keep_freed_memory()
    rows = ranks(args.model, micro, args.batch, args.rounds)
    by = {(r["plan"], r["rank"]): r for r in rows}
    print(f"{args.model}, batch {args.batch}, two stages on 2 gloo ranks, per step (median):")
    for b in micro:
        for rank in (0, 1):
            g, f = by[(f"gpipe x{b}", rank)], by[(f"1f1b x{b}", rank)]
            print(
                f"  x{b:<3d} rank {rank}: wall {1e3 * g['wall_s']:6.1f} / {1e3 * f['wall_s']:6.1f} ms, thread CPU "
                f"{1e3 * g['cpu_s']:6.1f} / {1e3 * f['cpu_s']:6.1f} ms (GPipe / 1F1B, {100 * (g['cpu_s'] / f['cpu_s'] - 1):+5.1f}%), "
                f"switches {g['involuntary_switches']:.0f} / {f['involuntary_switches']:.0f}"
            )
    single = []
    with tempfile.TemporaryDirectory() as work:
        dist.init_process_group("gloo", store=dist.FileStore(f"{work}/store", 1), rank=0, world_size=1)
        try:
            print("one stage, the whole model in this process, thread CPU per step against accumulation:")
            for b in micro:
                times = one_stage(args.model, b, args.batch, 3 * args.rounds)
                base = times["accumulation"]
                single.append({"micro_batches": b, **{f"{k}_s": v for k, v in times.items()}})
                print(
                    f"  x{b:<3d} "
                    + ", ".join(f"{k} {1e3 * v:6.1f} ms ({100 * (v / base - 1):+5.1f}%)" for k, v in times.items())
                )
        finally:
            dist.destroy_process_group()
    path = write_json(
        Path(args.out),
        {
            "config": vars(args),
            "code_version": code_version(),
            "machine": machine(load_before),
            "ranks": rows,
            "one_stage": single,
        },
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
