"""JSON forms of the domain objects the journal stores: jobs, allocations, rank slots, core operations (no torch)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from arena_gym.core.oplog import OP_KINDS, Close, Commit, Fail, Finish, Op, Progress, Run, Submit
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


def job_from_dict(data: Mapping[str, Any]) -> JobSpec:
    """Inverse of :func:`job_to_dict`."""
    gpu_type = data.get("requested_gpu_type")
    return JobSpec(
        JobId(str(data["job_id"])),
        ModelRef.parse(str(data["model"])),
        int(data["global_batch"]),
        int(data["iterations"]),
        float(data["submit_time"]),
        None if gpu_type is None else GpuType(str(gpu_type)),
        None if data.get("requested_gpus") is None else int(data["requested_gpus"]),
        None if data.get("deadline") is None else float(data["deadline"]),
        DeadlineSource(str(data.get("deadline_source", DeadlineSource.DECLARED.value))),
    )


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


def alloc_from_dict(data: Mapping[str, Any]) -> Allocation:
    """Inverse of :func:`alloc_to_dict`."""
    gpu_type = GpuType(str(data["gpu_type"]))
    shape = ResourceShape(gpu_type, int(data["n_nodes"]), int(data["gpus_per_node"]))
    plan = data.get("plan")
    return Allocation(
        Grid(shape, int(data["n_stages"])),
        Placement(gpu_type, tuple(int(n) for n in data["nodes"]), shape.gpus_per_node),
        None if plan is None else plan_from_dict(plan),
    )


def slots_to_list(slots: tuple[RankSlot, ...]) -> list[dict[str, Any]]:
    """Rank slots as JSON-ready data."""
    return [{"node": s.node, "host": s.host, "device": s.device, "pin_core": s.pin_core} for s in slots]


def slots_from_list(data: list[Mapping[str, Any]]) -> tuple[RankSlot, ...]:
    """Inverse of :func:`slots_to_list`."""
    return tuple(
        RankSlot(
            int(d["node"]), str(d["host"]), int(d["device"]), None if d.get("pin_core") is None else int(d["pin_core"])
        )
        for d in data
    )


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

#: An operation from its journal row (time, job id, data), by kind.
_OP_READERS: dict[str, Callable[[float, JobId, Mapping[str, Any]], Op]] = {
    "submit": lambda t, job, data: Submit(t, job),
    "commit": lambda t, job, data: Commit(
        t,
        tuple(JobId(j) for j in data["preempt"]),
        tuple((JobId(j), alloc_from_dict(a)) for j, a in data["alloc"]),
        tuple(float(o) for o in data.get("overhead", [0.0] * len(data["alloc"]))),
    ),
    "run": lambda t, job, data: Run(t, job, None if data.get("iter_time") is None else float(data["iter_time"])),
    "progress": lambda t, job, data: Progress(t, job, float(data["done"]), float(data["iter_time"])),
    "fail": lambda t, job, data: Fail(t, job, float(data["done"]), str(data.get("reason", ""))),
    "finish": lambda t, job, data: Finish(t, job),
    "close": lambda t, job, data: Close(t),
}


def op_to_row(op: Op) -> tuple[str, str, dict[str, Any]]:
    """An operation of the core's log as a journal row: (kind, job id or "", JSON-ready data); its time apart."""
    job_id, data = _OP_ROWS[type(op)](op)
    return op.kind, job_id, data


def op_from_row(t: float, kind: str, job_id: str, data: Mapping[str, Any]) -> Op:
    """Inverse of :func:`op_to_row`; ValueError naming an unknown kind."""
    reader = _OP_READERS.get(kind)
    if reader is None:
        raise ValueError(f"journal: unknown operation {kind!r}; valid: {', '.join(OP_KINDS)}")
    return reader(t, JobId(job_id), data)
