"""JSON forms of the domain objects the journal stores: jobs, allocations, rank slots, core operations (no torch).

Each is read back through :mod:`arena_gym.fields` (the dataclass's annotations, or those of the local form
where the JSON is shaped otherwise): a missing, unknown or mistyped field is a one-line :class:`FieldError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from arena_gym.core.oplog import OP_KINDS, Close, Commit, Fail, Finish, Op, Progress, Run, Submit
from arena_gym.fields import FieldError, build, check, short
from arena_gym.types import (
    Allocation,
    DeadlineSource,
    GpuType,
    Grid,
    JobId,
    JobSpec,
    ModelRef,
    Placement,
    ResourceShape,
)
from real_runner.launchers.base import RankSlot
from real_runner.plans import plan_from_dict, plan_to_dict


def job_to_dict(job: JobSpec) -> dict[str, Any]:
    """A job spec as JSON-ready data."""
    return {
        "job_id": job.job_id,
        "model": job.model.name,
        "global_batch": job.global_batch,
        "iterations": job.iterations,
        "submit_time": job.submit_time,
        "requested_gpu_type": job.requested_gpu_type,
        "requested_gpus": job.requested_gpus,
        "deadline": job.deadline,
        "deadline_source": job.deadline_source.value,
    }


def job_from_dict(data: Any) -> JobSpec:
    """Inverse of :func:`job_to_dict`; a one-line ValueError naming a missing, unknown or bad field."""
    return build(JobSpec, data, "job", {"model": _model, "deadline_source": _deadline_source})


def _model(value: Any) -> ModelRef:
    return ModelRef.parse(check(value, str, "job: model"))


def _deadline_source(value: Any) -> DeadlineSource:
    try:
        return DeadlineSource(value)
    except (TypeError, ValueError):
        valid = ", ".join(s.value for s in DeadlineSource)
        raise FieldError(f"job: deadline_source must be one of {valid}, got {short(value)}") from None


def alloc_to_dict(alloc: Allocation) -> dict[str, Any]:
    """An allocation (grid, placement, optional plan) as JSON-ready data."""
    shape, p = alloc.grid.shape, alloc.placement
    return {
        "gpu_type": shape.gpu_type,
        "n_nodes": shape.n_nodes,
        "gpus_per_node": shape.gpus_per_node,
        "n_stages": alloc.grid.n_stages,
        "nodes": list(p.nodes),
        "plan": None if alloc.plan is None else plan_to_dict(alloc.plan),
    }


@dataclass(frozen=True)
class _AllocationForm:
    """An allocation as :func:`alloc_to_dict` writes it: its grid's shape and stages, its nodes, its plan's form."""

    gpu_type: GpuType
    n_nodes: int
    gpus_per_node: int
    n_stages: int
    nodes: tuple[int, ...]
    plan: Mapping[str, Any] | None = None


def alloc_from_dict(data: Any) -> Allocation:
    """Inverse of :func:`alloc_to_dict`; a one-line ValueError naming the bad field."""
    form = build(_AllocationForm, data, "allocation")
    shape = ResourceShape(form.gpu_type, form.n_nodes, form.gpus_per_node)
    return Allocation(
        Grid(shape, form.n_stages),
        Placement(form.gpu_type, form.nodes, form.gpus_per_node),
        None if form.plan is None else plan_from_dict(form.plan),
    )


def slots_to_list(slots: tuple[RankSlot, ...]) -> list[dict[str, Any]]:
    """Rank slots as JSON-ready data."""
    return [{"node": s.node, "host": s.host, "device": s.device, "pin_core": s.pin_core} for s in slots]


def slots_from_list(data: Any) -> tuple[RankSlot, ...]:
    """Inverse of :func:`slots_to_list`; a one-line ValueError naming the bad slot and field."""
    return tuple(build(RankSlot, d, f"slot {i}") for i, d in enumerate(check(data, list, "slots")))


#: An operation's journal row without its time: (job id or "", JSON-ready data), by record type.
_OP_ROWS: dict[type, Callable[[Any], tuple[str, dict[str, Any]]]] = {
    Submit: lambda op: (op.job_id, {}),
    Commit: lambda op: (
        "",
        {
            "preempt": list(op.preemptions),
            "alloc": [[job_id, alloc_to_dict(alloc)] for job_id, alloc in op.allocations],
            **({"overhead": list(op.overheads)} if any(op.overheads) else {}),
        },
    ),
    Run: lambda op: (op.job_id, {"iter_time": op.iter_time}),
    Progress: lambda op: (op.job_id, {"done": op.iterations_done, "iter_time": op.iter_time}),
    Fail: lambda op: (op.job_id, {"done": op.iterations_done, "reason": op.reason}),
    Finish: lambda op: (op.job_id, {}),
    Close: lambda op: ("", {}),
}


@dataclass(frozen=True)
class _NoData:
    """The data of a row whose operation is its time and job alone (submit, finish, close)."""


@dataclass(frozen=True)
class _CommitData:
    """A commit row's data (no ``overhead``: none was charged)."""

    preempt: tuple[JobId, ...]
    alloc: tuple[tuple[JobId, Mapping[str, Any]], ...]
    overhead: tuple[float, ...] | None = None


@dataclass(frozen=True)
class _RunData:
    """A run row's data."""

    iter_time: float | None = None


@dataclass(frozen=True)
class _ProgressData:
    """A progress row's data."""

    done: float
    iter_time: float


@dataclass(frozen=True)
class _FailData:
    """A fail row's data (journals written before the reason lack it)."""

    done: float
    reason: str = ""


#: By kind: the form of a journal row's data, and the operation from its time, job id and that form.
_OP_READERS: dict[str, tuple[type, Callable[[float, JobId, Any], Op]]] = {
    "submit": (_NoData, lambda t, job, row: Submit(t, job)),
    "commit": (
        _CommitData,
        lambda t, job, row: Commit(
            t,
            row.preempt,
            tuple((j, alloc_from_dict(a)) for j, a in row.alloc),
            (0.0,) * len(row.alloc) if row.overhead is None else row.overhead,
        ),
    ),
    "run": (_RunData, lambda t, job, row: Run(t, job, row.iter_time)),
    "progress": (_ProgressData, lambda t, job, row: Progress(t, job, row.done, row.iter_time)),
    "fail": (_FailData, lambda t, job, row: Fail(t, job, row.done, row.reason)),
    "finish": (_NoData, lambda t, job, row: Finish(t, job)),
    "close": (_NoData, lambda t, job, row: Close(t)),
}


def op_to_row(op: Op) -> tuple[str, str, dict[str, Any]]:
    """An operation of the core's log as a journal row: (kind, job id or "", JSON-ready data); its time apart."""
    job_id, data = _OP_ROWS[type(op)](op)
    return op.kind, job_id, data


def op_from_row(t: float, kind: str, job_id: str, data: Any) -> Op:
    """Inverse of :func:`op_to_row`; a one-line ValueError naming an unknown kind or a bad field of the data."""
    reader = _OP_READERS.get(kind)
    if reader is None:
        raise ValueError(f"journal: unknown operation {kind!r}; valid: {', '.join(OP_KINDS)}")
    form, make = reader
    return make(t, JobId(job_id), build(form, data, f"{kind} data"))
