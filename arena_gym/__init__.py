"""arena-gym: a research gym for scheduling large-model training jobs on heterogeneous GPU clusters.

The public API, importable from here (each name loads its module on first use, so
``import arena_gym`` is cheap and never imports torch, stable-baselines3 or matplotlib)::

    from arena_gym import SimBackend, load_cluster, make_perf, make_policy, load_jobs, run_episode, compute_metrics

    cluster = load_cluster("tiny")
    perf = make_perf("estimator", cluster)
    jobs = load_jobs("synthetic:n_jobs=20", cluster, perf, seed=0)
    record = run_episode(SimBackend(cluster, perf), make_policy("arena"), jobs)
    avg_jct_s = compute_metrics(record)["avg_jct_s"]

Upper-layer objects (``default_perf_model`` from the estimator) are resolved through the
registries, never imported here at module level: ``arena_gym`` is the bottom layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: The distribution's version (pyproject.toml reads it from here).
__version__ = "0.1.0"

#: Public name -> ``module:attr`` it is loaded from on first use.
_EXPORTS: dict[str, str] = {
    # the loop, the simulator, runs
    "run_episode": "arena_gym.loop:run_episode",
    "SimBackend": "arena_gym.sim:SimBackend",
    "SimConfig": "arena_gym.sim:SimConfig",
    "RunConfig": "arena_gym.experiment:RunConfig",
    "run": "arena_gym.experiment:run",
    "load_jobs": "arena_gym.experiment:load_jobs",
    "make_perf": "arena_gym.registry:make_perf",
    "make_policy": "arena_gym.registry:make_policy",
    "load_cluster": "arena_gym.cluster:load_cluster",
    "compute_metrics": "arena_gym.metrics:compute_metrics",
    # registries
    "policy_registry": "arena_gym.registry:policy_registry",
    "perf_registry": "arena_gym.registry:perf_registry",
    "trace_registry": "arena_gym.registry:trace_registry",
    # protocols
    "Policy": "arena_gym.protocols:Policy",
    "ClusterBackend": "arena_gym.protocols:ClusterBackend",
    "PerfModel": "arena_gym.types:PerfModel",
    "InvalidDecision": "arena_gym.protocols:InvalidDecision",
    # domain types
    "GPU_COUNTS": "arena_gym.types:GPU_COUNTS",
    "GpuType": "arena_gym.types:GpuType",
    "JobId": "arena_gym.types:JobId",
    "ModelRef": "arena_gym.types:ModelRef",
    "NodeGroup": "arena_gym.types:NodeGroup",
    "ClusterSpec": "arena_gym.types:ClusterSpec",
    "JobSpec": "arena_gym.types:JobSpec",
    "ResourceShape": "arena_gym.types:ResourceShape",
    "Grid": "arena_gym.types:Grid",
    "StagePlan": "arena_gym.types:StagePlan",
    "Plan": "arena_gym.types:Plan",
    "OverheadModel": "arena_gym.types:OverheadModel",
    "Placement": "arena_gym.types:Placement",
    "Allocation": "arena_gym.types:Allocation",
    "Decision": "arena_gym.types:Decision",
    "JobStatus": "arena_gym.types:JobStatus",
    "JobView": "arena_gym.types:JobView",
    "Snapshot": "arena_gym.types:Snapshot",
    "best_locality": "arena_gym.types:best_locality",
    "localities": "arena_gym.types:localities",
    # records
    "EpisodeRecord": "arena_gym.records:EpisodeRecord",
    "Event": "arena_gym.records:Event",
    "EventKind": "arena_gym.records:EventKind",
}

__all__ = sorted([*_EXPORTS, "default_perf_model"])

if TYPE_CHECKING:  # static checkers see the real objects
    from arena_gym.cluster import load_cluster
    from arena_gym.experiment import RunConfig, load_jobs, run
    from arena_gym.loop import run_episode
    from arena_gym.metrics import compute_metrics
    from arena_gym.protocols import ClusterBackend, InvalidDecision, Policy
    from arena_gym.records import EpisodeRecord, Event, EventKind
    from arena_gym.registry import make_perf, make_policy, perf_registry, policy_registry, trace_registry
    from arena_gym.sim import SimBackend, SimConfig
    from arena_gym.types import (
        GPU_COUNTS,
        Allocation,
        ClusterSpec,
        Decision,
        GpuType,
        Grid,
        JobId,
        JobSpec,
        JobStatus,
        JobView,
        ModelRef,
        NodeGroup,
        OverheadModel,
        PerfModel,
        Placement,
        Plan,
        ResourceShape,
        Snapshot,
        StagePlan,
        best_locality,
        localities,
    )


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    from arena_gym.registry import perf_registry, resolve

    if name == "default_perf_model":  # the estimator sits above this package: found through the registry
        value = resolve(perf_registry().entries["estimator"].target)
    elif name in _EXPORTS:
        value = resolve(_EXPORTS[name])
    else:
        raise AttributeError(f"module 'arena_gym' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily loaded ones included."""
    return sorted({*globals(), *__all__})
