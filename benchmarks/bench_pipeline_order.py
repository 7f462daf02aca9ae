"""A pipeline stage's computation in the op orders of the schedules, on one device in thread CPU time.

The profiler times each layer's backward right after its forward. A pipeline stage runs its
micro-batches' forwards (``F``) and backwards (``B``) in its schedule's order: gradient
accumulation ``F0 B0 F1 B1 ...``, 1F1B with up to ``S - j`` micro-batches in flight, GPipe with all
of them in flight (every forward, then every backward). This benchmark runs the same ops of each
stage of an even two-stage split (and of the whole model) in those orders, in this process, with
no communication and no pipeline machinery, and reports per micro-batch the thread CPU time, the
extra over gradient accumulation, and the minor page faults and system time the order causes.

Every timed run starts with one untimed micro-batch of the same module (a run that follows a
different module's run starts cold, which would otherwise dominate the short orders); the orders
run interleaved, ``--rounds`` times, and the median is reported. ``--keep-freed-memory`` applies
the allocator settings of the runner's CPU ranks (:mod:`real_runner.allocator`: glibc keeps freed
memory in the process), which this process does not have by default, so the two runs separate the
page faults from the rest.

Usage: ``python benchmarks/bench_pipeline_order.py [--model gpt__tiny] [--samples 2] [--micro-batches 8]
[--keep-freed-memory] [--out FILE]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from arena_gym.harness.out_dirs import machine
from arena_gym.outputs import code_version, write_json
from arena_gym.types import PipeSchedule
from estimator.pipeline import stage_order
from real_runner.allocator import keep_freed_memory
from real_runner.model import GPT, loss_fn, n_layers
from real_runner.plans import model_spec


def orders(micro_batches: int, stage: int, n_stages: int) -> dict[str, list[tuple[str, int]]]:
    """The op order of each schedule for one stage (gradient accumulation is the one-stage order)."""
    out = {"accumulation": stage_order(0, 1, micro_batches, PipeSchedule.GPIPE)}
    if n_stages > 1:
        out["1f1b"] = stage_order(stage, n_stages, micro_batches, PipeSchedule.ONE_F_ONE_B)
    out["gpipe"] = stage_order(stage, max(n_stages, 2), micro_batches, PipeSchedule.GPIPE)
    return out


def stage_runner(module: GPT, first: bool, last: bool, samples: int, micro_batches: int) -> Callable:
    """A function running ``module``'s ops in a given order: (thread CPU s, minor faults, system s)."""
    spec = module.spec
    gen = torch.Generator().manual_seed(0)
    tokens = [torch.randint(0, spec.vocab, (samples, spec.seq_len), generator=gen) for _ in range(micro_batches + 1)]
    hidden = [
        torch.randn(samples, spec.seq_len, spec.hidden, generator=gen).requires_grad_(True)
        for _ in range(micro_batches + 1)
    ]
    grad = torch.ones(samples, spec.seq_len, spec.hidden)

    def forward(k: int) -> torch.Tensor:
        out = module(tokens[k] if first else hidden[k])
        return loss_fn(out, tokens[k]) if last else out

    def backward(out: torch.Tensor) -> None:
        out.backward() if last else out.backward(grad)

    def run(order: list[tuple[str, int]]) -> tuple[float, int, float]:
        module.zero_grad(set_to_none=True)
        backward(forward(micro_batches))  # the untimed warm start
        live: dict[int, torch.Tensor] = {}
        r0, t0 = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
        for kind, k in order:
            if kind == "F":
                live[k] = forward(k)
            else:
                backward(live.pop(k))
        t1, r1 = time.thread_time(), resource.getrusage(resource.RUSAGE_THREAD)
        return t1 - t0, r1.ru_minflt - r0.ru_minflt, r1.ru_stime - r0.ru_stime

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="gpt__tiny")
    parser.add_argument("--samples", type=int, default=2, help="sequences per micro-batch")
    parser.add_argument("--micro-batches", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--warmup-rounds", type=int, default=2)
    parser.add_argument("--keep-freed-memory", action="store_true", help="glibc keeps freed memory (mallopt)")
    parser.add_argument("--out", default="results/bench_pipeline_order.json")
    args = parser.parse_args()
    if args.micro_batches < 2 or args.rounds <= args.warmup_rounds:
        raise SystemExit("need --micro-batches >= 2 and --rounds > --warmup-rounds")
    load_before = os.getloadavg()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    if args.keep_freed_memory and not keep_freed_memory():
        raise SystemExit("--keep-freed-memory needs glibc's mallopt")
    spec = model_spec(args.model)
    total = n_layers(spec)
    half = total // 2
    parts = {"stage 0": (0, half, 0), "stage 1": (half, total, 1), "whole model": (0, total, 0)}
    cases = []
    for name, (start, end, j) in parts.items():
        n_stages = 1 if name == "whole model" else 2
        run = stage_runner(GPT(spec, start, end), start == 0, end == total, args.samples, args.micro_batches)
        for order_name, order in orders(args.micro_batches, j, n_stages).items():
            cases.append((name, order_name, run, order, []))
    for r in range(args.rounds):
        for *_, run, order, laps in cases:
            lap = run(order)
            if r >= args.warmup_rounds:
                laps.append(lap)
    rows, base = [], {}
    print(f"{args.model}, {args.samples} sequences x {args.micro_batches} micro-batches, per micro-batch:")
    for name, order_name, _, _, laps in cases:
        cpu = statistics.median(lap[0] for lap in laps) / args.micro_batches
        base.setdefault(name, cpu)
        row = {
            "part": name,
            "order": order_name,
            "cpu_s_per_micro_batch": cpu,
            "extra_pct": 100 * (cpu / base[name] - 1),
            "minor_faults": statistics.median(lap[1] for lap in laps),
            "system_s": statistics.median(lap[2] for lap in laps),
        }
        rows.append(row)
        print(
            f"  {name:12s} {order_name:13s} {1e3 * cpu:8.2f} ms ({row['extra_pct']:+5.1f}%)  "
            f"{row['minor_faults']:6.0f} page faults, {1e3 * row['system_s']:5.1f} ms system per step"
        )
    path = write_json(
        Path(args.out),
        {"config": vars(args), "code_version": code_version(), "machine": machine(load_before), "rows": rows},
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
