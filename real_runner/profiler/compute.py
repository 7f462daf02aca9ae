"""The computation phase of a profiling rank: every layer item, wrapper, optimizer and data item of the job's models.

Returns plain JSON-ready records (seconds summarise the rounds by the settings' statistic; wrapper overheads are paired
differences); :mod:`real_runner.profiler.run` turns the records of all ranks into a profile.
"""

from __future__ import annotations

import logging
import statistics
from typing import Any

import torch
import torch.distributed as dist

from real_runner.model import GPT, build_layer
from real_runner.plans import model_spec
from real_runner.profiler.layers import (
    KIND_INDEX,
    KINDS,
    backward_call_item,
    data_item,
    flat_shard,
    layer_item,
    one_rank_mesh,
    optimizer_item,
    order_items,
    parameter_counts,
    pipeline_items,
    wrap,
)
from real_runner.profiler.settings import ProfileJob, Progress, tp_degrees
from real_runner.profiler.timing import Stopwatch, paired_difference, per_model_interleaved, summarise

log = logging.getLogger(__name__)


def _layers(
    job: ProfileJob, group: dist.ProcessGroup, device: torch.device, watch: Stopwatch, progress: Progress
) -> tuple[list[dict[str, Any]], float]:
    """Plain curves and wrapper overheads of every layer kind, and the cost of one autograd backward call."""
    s = job.settings
    mesh = one_rank_mesh(group, device)
    plain: dict[str, dict[int, dict[str, Any]]] = {}  # per model: item index -> record key of a plain layer
    pairs: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}  # per model: (wrapped item, plain item, record key)

    def build(name: str) -> list:
        spec = model_spec(name)
        items: list = []
        plain[name], pairs[name] = {}, []
        tps = tp_degrees(s, spec.heads, job.devices_per_node)
        wrappers = {
            kind: (["fsdp"] if job.world_size > 1 else []) + (["tp"] if kind == "block" and max(tps) > 1 else [])
            for kind in KINDS
        }
        for kind in KINDS:
            index = KIND_INDEX[kind](spec)
            if kind == "block":  # in a step a block runs after a block: so does the first timed one (untimed primer)
                items.append(layer_item(build_layer(spec, index, tps[0]).to(device), spec, kind, s.samples[0], device))
            for tp in tps if kind == "block" else [1]:
                for n in s.samples:
                    plain[name][len(items)] = {
                        "model": name,
                        "layer": kind,
                        "variant": "compute",
                        "tp": tp,
                        "samples": n,
                    }
                    items.append(
                        layer_item(build_layer(spec, index, tp).to(device), spec, kind, n, device, s.layer_repeats)
                    )
                    if tp != 1 or n not in s.overhead_samples:
                        continue
                    reference = len(items) - 1
                    for w in wrappers[kind]:
                        key = {"model": name, "layer": kind, "variant": w, "tp": 1, "samples": n}
                        pairs[name].append((len(items), reference, key))
                        layer = wrap(build_layer(spec, index).to(device), w, mesh)
                        items.append(layer_item(layer, spec, kind, n, device, s.layer_repeats))
        items.append(backward_call_item(device))
        return items

    laps = per_model_interleaved(
        job.models, build, watch, s.rounds, s.warmup_rounds, lambda d, t: progress("layers", d, t)
    )
    out = []
    calls = []
    for name, model_laps in laps.items():
        for i, key in plain[name].items():
            fw, bw = summarise(model_laps[i], s.statistic)
            out.append({**key, "fw_s": fw, "bw_s": bw})
        for wrapped, reference, key in pairs[name]:
            fw, bw = paired_difference(model_laps[wrapped], model_laps[reference])
            out.append({**key, "fw_s": fw, "bw_s": bw})
        calls.append(summarise(model_laps[-1], s.statistic)[0])
    return out, statistics.fmean(calls)


def _pipeline(
    job: ProfileJob, group: dist.ProcessGroup, device: torch.device, watch: Stopwatch, progress: Progress
) -> list[dict[str, Any]]:
    """Per micro-batch overhead of a one-stage pipeline schedule over a plain loop in its op order (half to forward, half
    to backward)."""
    s = job.settings

    def build(name: str) -> list:
        spec = model_spec(name)
        return [i for n in s.pipeline_samples for i in pipeline_items(spec, n, s.pipeline_micro_batches, group, device)]

    laps = per_model_interleaved(
        job.models, build, watch, s.rounds, s.warmup_rounds, lambda d, t: progress("pipeline", d, t)
    )
    out = []
    for name, model_laps in laps.items():
        for i, n in enumerate(s.pipeline_samples):
            (extra,) = paired_difference(model_laps[2 * i + 1], model_laps[2 * i])
            per_mb = extra / s.pipeline_micro_batches
            key = {"model": name, "layer": "model", "variant": "pipeline", "tp": 1, "samples": n}
            out.append({**key, "fw_s": per_mb / 2, "bw_s": per_mb / 2})
    return out


def _order(job: ProfileJob, device: torch.device, watch: Stopwatch, progress: Progress) -> list[dict[str, Any]]:
    """Extra computation (a fraction) of GPipe's op order over gradient accumulation, per model, micro-batch size and
    number of micro-batches in flight."""
    s = job.settings
    cases = [(n, d) for n in s.order_samples for d in s.order_in_flight]

    def build(name: str) -> list:
        spec = model_spec(name)
        return [i for n, d in cases for i in order_items(GPT(spec).to(device), n, d, device)]

    laps = per_model_interleaved(
        job.models, build, watch, s.order_rounds, min(s.warmup_rounds, 1), lambda d, t: progress("order", d, t)
    )
    out = []
    for name, model_laps in laps.items():
        for i, (n, d) in enumerate(cases):
            (extra,) = paired_difference(model_laps[2 * i + 1], model_laps[2 * i])
            (base,) = summarise(model_laps[2 * i], "median")
            out.append({"model": name, "samples": n, "in_flight": d, "fraction": extra / base})
    return out


def _optimizer(
    job: ProfileJob, group: dist.ProcessGroup, device: torch.device, watch: Stopwatch, progress: Progress
) -> list[dict[str, Any]]:
    """AdamW steps over plain parameter sets (layers, tensor-parallel shapes, FSDP-sized shards) and the wrappers' extra."""
    mesh = one_rank_mesh(group, device)
    records: dict[str, list[dict[str, Any] | None]] = {}  # per model; None for the wrapped items (reported as pairs)
    pairs: dict[str, list[tuple[int, int, dict[str, Any]]]] = {}
    shards = [d for d in (2**k for k in range(1, job.world_size.bit_length())) if d <= job.world_size]

    def build(name: str) -> list:
        spec = model_spec(name)
        items: list = []
        records[name], pairs[name] = [], []
        tps = tp_degrees(job.settings, spec.heads, job.devices_per_node)
        for kind in KINDS:
            index = KIND_INDEX[kind](spec)
            for tp in tps if kind == "block" else [1]:
                module = build_layer(spec, index, tp).to(device)
                params = list(module.parameters())
                items.append(optimizer_item(params))
                records[name].append(
                    {"wrapper": "none", "tensors": len(params), "elements": sum(p.numel() for p in params)}
                )
                if tp != 1:
                    continue
                plain = len(items) - 1
                for d in shards:
                    flat = flat_shard(module, d, device)
                    items.append(optimizer_item(flat))
                    records[name].append(
                        {"wrapper": "none", "tensors": len(flat), "elements": sum(p.numel() for p in flat)}
                    )
                wrappers = (["fsdp"] if job.world_size > 1 else []) + (
                    ["tp"] if kind == "block" and max(tps) > 1 else []
                )
                for w in wrappers:
                    wrapped = wrap(build_layer(spec, index).to(device), w, mesh)
                    dtensors = parameter_counts(spec, kind)["tp_tensors"] if w == "tp" else len(params)
                    items.append(optimizer_item(list(wrapped.parameters())))
                    records[name].append(None)
                    pairs[name].append((len(items) - 1, plain, {"wrapper": w, "tensors": dtensors}))
        return items

    s = job.settings
    warmup = min(2, s.warmup_rounds + 1)
    laps = per_model_interleaved(
        job.models, build, watch, s.optimizer_rounds, warmup, lambda d, t: progress("optimizer", d, t)
    )
    out = []
    for name, model_laps in laps.items():
        out += [
            {**rec, "step_s": summarise(item_laps, s.statistic)[0]}
            for rec, item_laps in zip(records[name], model_laps)
            if rec is not None
        ]
        for wrapped, plain, rec in pairs[name]:
            (extra,) = paired_difference(model_laps[wrapped], model_laps[plain])
            out.append({**rec, "extra_s": extra})
    return out


def _data(job: ProfileJob, device: torch.device, watch: Stopwatch, progress: Progress) -> list[dict[str, Any]]:
    s = job.settings

    def build(name: str) -> list:
        spec = model_spec(name)
        return [data_item(spec, b, device) for b in s.batches]

    laps = per_model_interleaved(
        job.models, build, watch, s.rounds, s.warmup_rounds, lambda d, t: progress("data", d, t)
    )
    return [
        {"model": name, "batch": b, "seconds": summarise(item_laps, s.statistic)[0]}
        for name, model_laps in laps.items()
        for b, item_laps in zip(s.batches, model_laps)
    ]


def profile_compute(
    job: ProfileJob, group: dist.ProcessGroup, device: torch.device, progress: Progress
) -> dict[str, Any]:
    """Everything this rank measures on its own device; ``group`` is a one-rank group of this rank."""
    watch = Stopwatch(device, job.settings.clock)
    out: dict[str, Any] = {"params": {m: {k: parameter_counts(model_spec(m), k) for k in KINDS} for m in job.models}}
    out["curves"], out["backward_call_s"] = _layers(job, group, device, watch, progress)
    out["curves"] += _pipeline(job, group, device, watch, progress) if job.world_size > 1 else []
    out["order"] = _order(job, device, watch, progress) if job.world_size > 1 else []
    out["optimizer"] = _optimizer(job, group, device, watch, progress)
    out["data"] = _data(job, device, watch, progress)
    return out
