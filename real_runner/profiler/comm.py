"""Collective tables measured with the testbed's backend (gloo on CPU, nccl on GPUs), inside a training-like loop.

Collectives in a training step are slower than back-to-back in a tight loop (reference/stack.md
§11: a 1 MB all-reduce took 3.6 ms inside training, 0.5 ms isolated): between two of them every
rank computes, its communication threads go idle, and the ranks arrive with the skew their
computation's noise gives them. So every timed collective here follows a fixed amount of
computation (``gap_s`` of matrix products, the same work on every rank), and its time is the
mean over the group's ranks of each rank's wait-plus-transfer (what a step loses on average).

Groups: every power-of-two size from 2 up to the testbed's devices, inside one node (consecutive
ranks) and spread over nodes (the same number of ranks on each node), as the plans' groups are.
``send_recv`` is a ping-pong between two ranks (half the round trip), and the first rank computes
half a gap more and takes an untimed "ready" message the second sends just before its receive, so
the second is already waiting however slow its own computation ran: a pipeline's
waits for the previous stage are the composition's event simulation (:mod:`estimator.pipeline`),
so the table holds the transfer alone, the idle peer's wake-up included (docs/profiler.md).
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from real_runner.profiler.settings import ProfileJob, Progress
from real_runner.profiler.timing import Stopwatch

log = logging.getLogger(__name__)

ELEMENT_BYTES = 4  # fp32 buffers
#: Edge of the square matrices multiplied in the gap between two collectives.
GAP_MATRIX = 128
#: Untimed all-reduces on every new group before its table is measured.
GROUP_WARMUP = 5
#: Tag of the send/recv peer's "about to wait" message (apart from the timed messages' tag 0).
READY_TAG = 1


@dataclass(frozen=True)
class GroupSpec:
    """One tabulated group: the ranks (global ids) and the nodes they span."""

    op: str
    ranks: tuple[int, ...]
    nodes: int


def group_specs(job: ProfileJob) -> list[GroupSpec]:
    """Every (op, group) the job tabulates."""
    n_nodes, gpn = job.nodes, job.devices_per_node
    shapes: list[tuple[tuple[int, ...], int]] = []
    p = 2
    while p <= job.world_size:
        if p <= gpn:
            shapes.append((tuple(range(p)), 1))
        if n_nodes > 1:
            nodes = min(p, n_nodes)
            per = p // nodes
            if per <= gpn:
                shapes.append((tuple(node * gpn + i for node in range(nodes) for i in range(per)), nodes))
        p *= 2
    out = []
    for op in job.settings.comm_ops:
        for ranks, nodes in shapes:
            if op == "send_recv" and len(ranks) != 2:
                continue
            out.append(GroupSpec(op, ranks, nodes))
    return out


class _Gap:
    """A fixed amount of matrix products (the same on every rank), calibrated to take about ``gap_s`` on rank 0."""

    def __init__(self, gap_s: float, device: torch.device) -> None:
        self.a = torch.randn(GAP_MATRIX, GAP_MATRIX, device=device)
        self.b = torch.randn(GAP_MATRIX, GAP_MATRIX, device=device)
        watch = Stopwatch(device, "cpu")
        for _ in range(3):
            self.a @ self.b
        watch.mark()
        for _ in range(20):
            self.a @ self.b
        watch.mark()
        each = max(watch.laps()[0] / 20, 1e-7)
        count = torch.tensor([gap_s / each if gap_s > 0 else 0.0], device=device)
        dist.broadcast(count, src=0)
        self.count = int(count.item())

    def __call__(self, fraction: float = 1.0) -> None:
        for _ in range(round(self.count * fraction)):
            self.a @ self.b


def _collective(
    op: str, nbytes: int, p: int, index: int, group: dist.ProcessGroup, peer: int, device: torch.device
) -> Callable[[], None]:
    """The blocking call of one collective of ``nbytes`` (rounded up to a multiple of ``p`` fp32 elements)."""
    elems = max(p, -(-nbytes // ELEMENT_BYTES))
    elems += (-elems) % p
    buf = torch.ones(elems, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(buf, group=group)
    if op == "all_gather":
        part = torch.ones(elems // p, device=device)
        return lambda: dist.all_gather_into_tensor(buf, part, group=group)
    if op == "reduce_scatter":
        part = torch.empty(elems // p, device=device)
        return lambda: dist.reduce_scatter_tensor(part, buf, group=group)
    if op == "all_to_all":
        out = torch.empty_like(buf)
        return lambda: dist.all_to_all_single(out, buf, group=group)
    if op == "send_recv":
        other = torch.empty_like(buf)
        if index == 0:
            return lambda: (dist.send(buf, peer, group=group), dist.recv(other, peer, group=group))
        return lambda: _echo(buf, other, peer, group)
    raise ValueError(f"unknown collective {op!r}")


def _echo(buf: torch.Tensor, other: torch.Tensor, peer: int, group: dist.ProcessGroup) -> None:
    """The second rank's half of the ping-pong: tell the pinging rank it is about to wait, then echo."""
    ready = dist.isend(torch.zeros(1, device=buf.device), peer, group=group, tag=READY_TAG)
    dist.recv(other, peer, group=group)
    dist.send(buf, peer, group=group)
    ready.wait()


def profile_comm(job: ProfileJob, rank: int, device: torch.device, progress: Progress) -> list[dict[str, Any]]:
    """This rank's timings of every tabulated collective: per group, seconds per size and round.

    Every rank calls this (groups are created collectively); ranks outside a group compute the
    same gaps meanwhile, keeping their devices as busy as in training.
    """
    s = job.settings
    sizes = s.sizes()
    gap = _Gap(s.gap_s, device)
    watch = Stopwatch(device)
    specs = group_specs(job)
    out = []
    for i, spec in enumerate(specs):
        group = dist.new_group(list(spec.ranks))
        member = rank in spec.ranks
        if member:  # a new group connects lazily: its first collectives are slow
            ping = torch.zeros(1, device=device)
            for _ in range(GROUP_WARMUP):
                dist.all_reduce(ping, group=group)
        times: list[list[float]] = []
        pings = member and spec.op == "send_recv" and spec.ranks.index(rank) == 0
        ready = torch.zeros(1, device=device)
        for nbytes in sizes:
            call = None
            if member:
                index = spec.ranks.index(rank)
                peer = spec.ranks[1 - index] if spec.op == "send_recv" else -1
                call = _collective(spec.op, nbytes, len(spec.ranks), index, group, peer, device)
            row = []
            for r in range(s.comm_warmup + s.comm_rounds):
                gap()
                if call is None:
                    continue
                if pings:  # the peer is waiting in its receive by now: the transfer alone is timed
                    gap(0.5)
                    dist.recv(ready, spec.ranks[1], group=group, tag=READY_TAG)
                watch.mark()
                call()
                watch.mark()
                (t,) = watch.laps()
                if r >= s.comm_warmup:
                    row.append(t / 2 if spec.op == "send_recv" else t)
            times.append(row)
        dist.barrier()
        progress("comm", i + 1, len(specs))
        if member and (pings or spec.op != "send_recv"):
            out.append(
                {"op": spec.op, "ranks": list(spec.ranks), "nodes": spec.nodes, "bytes": sizes, "seconds": times}
            )
    return out


def trimmed_mean(values: list[float], trim: float = 0.1) -> float:
    """Mean without the ``trim`` fraction of the lowest and of the highest values."""
    xs = sorted(values)
    k = int(len(xs) * trim)
    kept = xs[k : len(xs) - k] or xs
    return statistics.fmean(kept)
