"""JSON forms of the domain objects the journal stores: jobs, allocations, rank slots (no torch)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from arena_gym.types import Allocation, GpuType, Grid, JobId, JobSpec, ModelRef, Placement, ResourceShape
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
