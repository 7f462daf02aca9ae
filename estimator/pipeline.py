"""Event simulation of a pipeline schedule's op order (GPipe and 1F1B as ``torch.distributed.pipelining`` runs them).

Each stage executes its forward (``F``) and backward (``B``) ops of the micro-batches in a fixed
order; an op starts when its stage is free and its input has arrived:

* ``F(j, k)`` needs ``F(j-1, k)`` plus the point-to-point time of boundary ``j-1``;
* ``B(j, k)`` needs ``B(j+1, k)`` plus the point-to-point time of boundary ``j``; on the last
  stage it needs only its own ``F(S-1, k)``.

Orders: GPipe runs every forward, then every backward. 1F1B (``Schedule1F1B``) runs
``min(B, S - j)`` forwards on stage ``j`` (so the last stage one), then alternates one backward
and one forward until the forwards are done, then the remaining backwards. A single stage runs
``F0 B0 F1 B1 ...`` (gradient accumulation). Sends are asynchronous: a stage does not wait for
its own sends.

The op order depends only on (stages, micro-batches, schedule); durations may be arrays, and
the simulation is vectorised over their leading axes.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from arena_gym.types import PipeSchedule

Op = tuple[int, str, int]  # (stage, "F" or "B", micro-batch)


def stage_order(stage: int, n_stages: int, micro_batches: int, schedule: PipeSchedule) -> list[tuple[str, int]]:
    """The ops of one stage in execution order."""
    B = micro_batches
    if n_stages == 1:
        return [op for k in range(B) for op in (("F", k), ("B", k))]
    if schedule is PipeSchedule.GPIPE:
        return [("F", k) for k in range(B)] + [("B", k) for k in range(B)]
    warmup = min(B, n_stages - stage)
    ops = [("F", k) for k in range(warmup)]
    f, b = warmup, 0
    while b < B:
        ops.append(("B", b))
        b += 1
        if f < B:
            ops.append(("F", f))
            f += 1
    return ops


@lru_cache(maxsize=512)
def global_order(n_stages: int, micro_batches: int, schedule: PipeSchedule) -> tuple[Op, ...]:
    """A topological order of every op of every stage (each stage's ops stay in their order)."""
    orders = [stage_order(j, n_stages, micro_batches, schedule) for j in range(n_stages)]
    pos = [0] * n_stages
    done: set[Op] = set()
    out: list[Op] = []
    total = sum(len(o) for o in orders)
    while len(out) < total:
        progressed = False
        for j in range(n_stages):
            while pos[j] < len(orders[j]):
                kind, k = orders[j][pos[j]]
                if kind == "F":
                    dep = (j - 1, "F", k) if j > 0 else None
                else:
                    dep = (j + 1, "B", k) if j < n_stages - 1 else (j, "F", k)
                if dep is not None and dep not in done:
                    break
                op = (j, kind, k)
                out.append(op)
                done.add(op)
                pos[j] += 1
                progressed = True
        if not progressed:
            raise RuntimeError(
                f"schedule {schedule.value} with {n_stages} stages and {micro_batches} micro-batches deadlocks"
            )
    return tuple(out)


def simulate(
    fw: np.ndarray,
    bw: np.ndarray,
    p2p: np.ndarray,
    micro_batches: int,
    schedule: PipeSchedule,
    start: np.ndarray | float = 0.0,
) -> np.ndarray:
    """Finish time of each stage's last op: ``[..., S]``.

    ``fw``/``bw``: seconds of one forward/backward op per stage ``[..., S]``; ``p2p``: seconds to move
    a micro-batch's boundary tensor from stage ``j`` to ``j + 1`` (and its gradient back), ``[..., S]``
    (the last entry is unused); ``start``: when each stage may begin (broadcasts to ``[..., S]``).
    """
    fw, bw, p2p = np.broadcast_arrays(np.asarray(fw, float), np.asarray(bw, float), np.asarray(p2p, float))
    S = fw.shape[-1]
    free = [np.broadcast_to(np.asarray(start, float), fw.shape)[..., j].copy() for j in range(S)]
    f_end: dict[tuple[int, int], np.ndarray] = {}
    b_end: dict[tuple[int, int], np.ndarray] = {}
    for j, kind, k in global_order(S, micro_batches, schedule):
        if kind == "F":
            ready = f_end[(j - 1, k)] + p2p[..., j - 1] if j > 0 else None
            dur = fw[..., j]
        else:
            ready = b_end[(j + 1, k)] + p2p[..., j] if j < S - 1 else f_end[(j, k)]
            dur = bw[..., j]
        begin = free[j] if ready is None else np.maximum(free[j], ready)
        free[j] = begin + dur
        (f_end if kind == "F" else b_end)[(j, k)] = free[j]
    return np.stack(free, axis=-1)


def closed_form(fw: np.ndarray, bw: np.ndarray, p2p: np.ndarray, micro_batches: int) -> np.ndarray:
    """The artifact's GPipe formula (docs/arena.md §4.1) for comparison: ``(B-1) max + sum`` per direction."""
    fw, bw, p2p = (np.asarray(x, float) for x in (fw, bw, p2p))
    r = p2p[..., :-1]
    B = micro_batches
    one = lambda x: (B - 1) * x.max(axis=-1) + x.sum(axis=-1)  # noqa: E731
    comm = (B - 1) * r.max(axis=-1, initial=0.0) + r.sum(axis=-1)
    return one(fw) + one(bw) + 2 * comm
