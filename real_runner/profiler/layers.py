"""Computation profile on one device: the runner's layers at per-device shapes, the wrappers' overheads,
the optimizer step and the global batch's construction.

Every layer kind of a model (embedding, one block: identical blocks are profiled once, head with
the loss) is timed forward and backward as plain torch at the per-device shapes a plan implies:
``samples`` sequences per micro-batch, blocks with the ``heads / tp`` local heads of tensor
parallelism (:func:`real_runner.model.build_layer`). The wrappers the executor applies are timed
on a one-rank mesh of the same device, paired with the plain layer in the same round, and stored
as their extra seconds: DTensor tensor parallelism (``real_runner.executor.TP_LAYOUT``) on a
block, FSDP2 (``fully_shard``) on each layer kind, and a one-stage pipeline schedule
(``ScheduleGPipe``) over the whole model against a plain loop in the same op order. Collectives are
not part of these times (a one-rank mesh skips them); they come from the collective tables. The op
order's own cost is timed on the whole model as plain torch: micro-batches in flight (every forward,
then every backward) against gradient accumulation (each backward right after its forward).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import parallelize_module

from estimator.zoo import TransformerSpec
from real_runner.data import global_batch, replica_slice
from real_runner.executor import TP_LAYOUT
from real_runner.model import GPT, build_layer, loss_fn, n_layers
from real_runner.profiler.timing import Item, Stopwatch

KIND_INDEX = {"embed": lambda spec: 0, "block": lambda spec: 1, "head": lambda spec: n_layers(spec) - 1}
KINDS = tuple(KIND_INDEX)


@dataclass(frozen=True)
class ItemKey:
    """What an item measures: (model, layer kind, variant, tp, samples); variant ``compute`` or a wrapper."""

    model: str
    layer: str
    variant: str
    tp: int
    samples: int


def _inputs(spec: TransformerSpec, kind: str, samples: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(samples)
    tokens = torch.randint(0, spec.vocab, (samples, spec.seq_len), generator=gen).to(device)
    if kind == "embed":
        return tokens, tokens
    hidden = torch.randn(samples, spec.seq_len, spec.hidden, generator=gen).to(device).requires_grad_(True)
    return hidden, tokens


def layer_item(
    module: nn.Module, spec: TransformerSpec, kind: str, samples: int, device: torch.device, repeats: int = 1
) -> Item:
    """Forward and backward of one layer (the head with the loss), ``repeats`` times back to back; grads cleared
    outside the timing.

    With ``repeats > 1`` the first call warms the layer's code paths and buffers and the laps are the mean of
    the others (the time of a layer run again at once, as a pipeline stage runs it on consecutive micro-batches).
    """
    x, y = _inputs(spec, kind, samples, device)
    grad = None if kind == "head" else torch.ones(samples, spec.seq_len, spec.hidden, device=device)

    def once(watch: Stopwatch) -> list[float]:
        module.zero_grad(set_to_none=True)
        x.grad = None
        watch.mark()
        out = loss_fn(module(x), y) if kind == "head" else module(x)
        watch.mark()
        out.backward(grad)
        watch.mark()
        return watch.laps()

    def run(watch: Stopwatch) -> list[float]:
        calls = [once(watch) for _ in range(repeats)][1 if repeats > 1 else 0 :]
        return [sum(lap[i] for lap in calls) / len(calls) for i in range(2)]

    return run


def backward_call_item(device: torch.device) -> Item:
    """One autograd backward call over a one-element graph: the fixed cost every layer's timed backward contains."""
    x = torch.zeros(1, device=device, requires_grad=True)

    def run(watch: Stopwatch) -> list[float]:
        x.grad = None
        y = (x * 2.0).sum()
        watch.mark()
        y.backward()
        watch.mark()
        return watch.laps()

    return run


def one_rank_mesh(group: dist.ProcessGroup, device: torch.device) -> DeviceMesh:
    """A DeviceMesh over a one-rank process group (the wrappers run without collectives)."""
    return DeviceMesh.from_group(group, device.type)


def wrap(module: nn.Module, wrapper: str, mesh: DeviceMesh) -> nn.Module:
    """Apply the executor's wrapper: ``tp`` (DTensor TP layout on a block) or ``fsdp`` (FSDP2)."""
    if wrapper == "tp":
        parallelize_module(module, mesh, TP_LAYOUT)
    elif wrapper == "fsdp":
        fully_shard(module, mesh=mesh)
    else:
        raise ValueError(f"unknown wrapper {wrapper!r}")
    return module


def pipeline_items(
    spec: TransformerSpec,
    samples: int,
    micro_batches: int,
    group: dist.ProcessGroup,
    device: torch.device,
    seed: int = 0,
) -> tuple[Item, Item]:
    """(plain loop in GPipe's op order, one-stage ``ScheduleGPipe``) over the whole model, ``micro_batches`` of
    ``samples``: their difference is the schedule's machinery alone."""
    x, y = global_batch(seed, 0, samples * micro_batches, spec.seq_len, spec.vocab)
    x, y = x.to(device), y.to(device)
    plain_model = GPT(spec, seed=seed).to(device)
    pipe_model = GPT(spec, seed=seed).to(device)
    stage = PipelineStage(pipe_model, 0, 1, device, group=group)
    schedule = ScheduleGPipe(stage, n_microbatches=micro_batches, loss_fn=loss_fn)

    def plain(watch: Stopwatch) -> list[float]:
        plain_model.zero_grad(set_to_none=True)
        watch.mark()
        losses = [
            loss_fn(plain_model(xm), ym) / micro_batches
            for xm, ym in zip(x.chunk(micro_batches), y.chunk(micro_batches))
        ]
        for loss in losses:
            loss.backward()
        watch.mark()
        return watch.laps()

    def piped(watch: Stopwatch) -> list[float]:
        pipe_model.zero_grad(set_to_none=True)
        watch.mark()
        schedule.step(x, target=y, losses=[])
        watch.mark()
        return watch.laps()

    return plain, piped


def order_items(model: GPT, samples: int, in_flight: int, device: torch.device, seed: int = 0) -> tuple[Item, Item]:
    """(gradient accumulation, GPipe's op order) over ``model`` (the whole model), ``in_flight`` micro-batches of
    ``samples``.

    Gradient accumulation runs each micro-batch's backward right after its forward; GPipe's order runs every
    forward, then every backward, with all their activations held. Each call first runs one untimed micro-batch
    (a call after a different item starts cold, which would otherwise outweigh the order).
    """
    spec = model.spec
    x, y = global_batch(seed, 0, samples * (in_flight + 1), spec.seq_len, spec.vocab)
    xs, ys = x.to(device).chunk(in_flight + 1), y.to(device).chunk(in_flight + 1)

    def loss(k: int) -> torch.Tensor:
        return loss_fn(model(xs[k]), ys[k])

    def item(held: bool) -> Item:
        def run(watch: Stopwatch) -> list[float]:
            model.zero_grad(set_to_none=True)
            loss(in_flight).backward()
            watch.mark()
            if held:
                for out in [loss(k) for k in range(in_flight)]:
                    out.backward()
            else:
                for k in range(in_flight):
                    loss(k).backward()
            watch.mark()
            return watch.laps()

        return run

    return item(False), item(True)


def parameter_counts(spec: TransformerSpec, kind: str) -> dict[str, int]:
    """Tensors and elements of a layer kind, and those DTensor tensor parallelism turns into DTensors / shards."""
    index = KIND_INDEX[kind](spec)
    full = build_layer(spec, index)
    tensors = sum(1 for _ in full.parameters())
    elements = sum(p.numel() for p in full.parameters())
    if kind != "block" or spec.heads % 2:
        return {"tensors": tensors, "elements": elements, "tp_tensors": 0, "tp_elements": 0}
    half = sum(p.numel() for p in build_layer(spec, index, tp=2).parameters())
    wrapped = sum(1 for name, _ in full.named_parameters() if name.rsplit(".", 1)[0] in TP_LAYOUT)
    return {"tensors": tensors, "elements": elements, "tp_tensors": wrapped, "tp_elements": 2 * (elements - half)}


def optimizer_item(params: list[torch.Tensor], lr: float = 1e-3) -> Item:
    """One AdamW step and ``zero_grad(set_to_none=True)`` over ``params`` (gradients refilled outside the timing)."""
    optim = torch.optim.AdamW(params, lr=lr)
    grads = [torch.full_like(p.to_local() if isinstance(p, DTensor) else p, 1e-3) for p in params]

    def run(watch: Stopwatch) -> list[float]:
        with torch.no_grad():
            for p, g in zip(params, grads):
                p.grad = DTensor.from_local(g, p.device_mesh, p.placements) if isinstance(p, DTensor) else g.clone()
        watch.mark()
        optim.step()
        optim.zero_grad(set_to_none=True)
        watch.mark()
        return watch.laps()

    return run


def flat_shard(module: nn.Module, shards: int, device: torch.device) -> list[torch.Tensor]:
    """Plain parameters with the tensor count of ``module`` and ``1 / shards`` of each tensor's elements (an FSDP2 shard)."""
    return [nn.Parameter(torch.zeros(max(1, -(-p.numel() // shards)), device=device)) for p in module.parameters()]


def data_item(spec: TransformerSpec, batch: int, device: torch.device) -> Item:
    """Construction of a global batch of ``batch`` sequences and its move to the device (every rank does it each step)."""

    def run(watch: Stopwatch) -> list[float]:
        watch.mark()
        x, y = global_batch(0, 1, batch, spec.seq_len, spec.vocab)
        x, y = replica_slice(x, y, 0, 1)
        x.to(device), y.to(device)
        watch.mark()
        return watch.laps()

    return run
