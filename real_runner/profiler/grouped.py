"""Wrapped layers timed on real groups: a DTensor tensor-parallel block on a tensor-parallel group and
FSDP2 units on a data-parallel group, forward and backward with their collectives.

The one-device profile (:mod:`real_runner.profiler.compute`) times the wrappers on a one-rank mesh,
where they issue no collectives, and the collective tables (:mod:`real_runner.profiler.comm`) time
the collectives alone. Inside a training step the sum of the two is optimistic for tensor
parallelism (reference/stack.md §11: 10-38 %): DTensor issues functional collectives and waits on
them between small matrix products, each one waits for the slower rank, and the communication
threads compete with the computation for the core. This phase measures that directly, on one
layer at a time: every rank builds the same wrapped layer on its own group of ``g`` consecutive
ranks (all groups of a size at once, so every device is busy as in training) and times its
forward and backward in wall time (the waits are the point), interleaved over rounds like the
other items, with a barrier before each item, and keeps the median over rounds
(``ProfilerSettings.grouped_statistic``: a pause of the shared machine hits some rounds only).
Each model's items are built and interleaved in rounds of their own, as a training rank runs one
model: gpt__tiny's tensor-parallel block at 16 sequences read 12-20 % slower with gpt__mini's
blocks run between its rounds.

* ``tp``: one block under :data:`real_runner.executor.TP_LAYOUT` on a group of ``tp`` ranks, for
  every profiled tensor-parallel degree above one and every profiled sample count;
* ``fsdp`` / ``fsdp_sync``: each layer kind under FSDP2 on a group of ``dp`` ranks, arranged as the
  executor arranges it: a block is its own unit inside a root (gathered for forward, resharded,
  gathered again for backward), the embedding and the head are parameters of the root unit
  (gathered once); ``fsdp`` without gradient synchronisation (the micro-batches of a step but the
  last: the executor accumulates gradients unsharded), ``fsdp_sync`` with it (the last
  micro-batch: the gradients are reduce-scattered in backward, with FSDP2's copies around it).

Groups are formed inside a node (``g`` up to the devices per node); plans whose groups span nodes
are composed from the tables.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard

from estimator.zoo import TransformerSpec
from real_runner.model import build_layer
from real_runner.plans import model_spec
from real_runner.profiler.layers import KIND_INDEX, KINDS, layer_item, wrap
from real_runner.profiler.settings import ProfileJob, Progress, tp_degrees
from real_runner.profiler.timing import Item, Stopwatch, per_model_interleaved, summarise


def _after_barrier(item: Item) -> Item:
    """``item``, started after a barrier of the default group."""

    def run(watch: Stopwatch) -> list[float]:
        dist.barrier()
        return item(watch)

    return run


class _Root(nn.Module):
    """A parameter-less root around one layer, so FSDP2 treats a wrapped block as a non-root unit (as in the executor)."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The layer's forward."""
        return self.layer(x)


def fsdp_unit(layer: nn.Module, kind: str, mesh: DeviceMesh) -> nn.Module:
    """``layer`` under FSDP2 on ``mesh`` as the executor shards it: blocks as their own unit inside a root,
    embedding and head as parameters of the root unit."""
    if kind == "block":
        fully_shard(layer, mesh=mesh)
        return fully_shard(_Root(layer), mesh=mesh)
    return fully_shard(layer, mesh=mesh)


def group_sizes(job: ProfileJob) -> list[int]:
    """Group sizes timed: powers of two from 2 up to the devices per node that divide the world size."""
    out, g = [], 2
    while g <= job.devices_per_node:
        if job.world_size % g == 0:
            out.append(g)
        g *= 2
    return out


def profile_grouped(job: ProfileJob, rank: int, device: torch.device, progress: Progress) -> list[dict[str, Any]]:
    """This rank's grouped curves: per (model, layer kind, wrapper, group size) seconds at every profiled sample count.

    Every rank calls this (groups are created collectively) and builds the same items in the same order.
    """
    s = job.settings
    sizes = group_sizes(job)
    if not sizes:
        return []
    meshes = {}
    for g in sizes:
        own, _ = dist.new_subgroups(group_size=g)
        meshes[g] = DeviceMesh.from_group(own, device.type)

    def tp_block(spec: TransformerSpec, tp: int) -> nn.Module:
        return wrap(build_layer(spec, KIND_INDEX["block"](spec)).to(device), "tp", meshes[tp])

    def unit(spec: TransformerSpec, kind: str, dp: int) -> nn.Module:
        return fsdp_unit(build_layer(spec, KIND_INDEX[kind](spec)).to(device), kind, meshes[dp])

    keys: dict[str, list[dict[str, Any] | None]] = {}  # per model, each item's record key (None: an untimed primer)

    def model_items(name: str) -> list:
        """One model's items, each after a barrier (all ranks of a group start it together); keys in ``keys``."""
        spec = model_spec(name)
        items: list = []
        keys[name] = []
        tps = [t for t in tp_degrees(s, spec.heads, job.devices_per_node) if t in meshes]
        # in a step a block runs after a block: so does the first timed block of a group (untimed primers)
        if tps:
            items.append(layer_item(tp_block(spec, tps[0]), spec, "block", s.samples[0], device))
            keys[name].append(None)
        for tp in tps:
            for n in s.samples:
                items.append(layer_item(tp_block(spec, tp), spec, "block", n, device, s.layer_repeats))
                keys[name].append({"model": name, "layer": "block", "wrapper": "tp", "group": tp, "samples": n})
        for dp in sizes:
            for kind in KINDS:
                if kind == "block":
                    items.append(layer_item(unit(spec, kind, dp), spec, kind, s.samples[0], device))
                    keys[name].append(None)
                for n in s.samples:
                    for wrapper in ("fsdp", "fsdp_sync"):
                        wrapped = unit(spec, kind, dp)
                        wrapped.set_requires_gradient_sync(wrapper == "fsdp_sync")
                        items.append(layer_item(wrapped, spec, kind, n, device, s.layer_repeats))
                        keys[name].append({"model": name, "layer": kind, "wrapper": wrapper, "group": dp, "samples": n})
        return [_after_barrier(item) for item in items]

    watch = Stopwatch(device, "wall")
    laps = per_model_interleaved(
        job.models, model_items, watch, s.rounds, s.warmup_rounds, lambda d, t: progress("grouped", d, t)
    )
    records = []
    for name, model_laps in laps.items():
        for key, item_laps in zip(keys[name], model_laps):
            if key is None:
                continue
            fw, bw = summarise(item_laps, s.grouped_statistic)
            records.append({**key, "fw_s": fw, "bw_s": bw})
    return records
