"""arena-gym: a research gym for scheduling large-model training jobs on heterogeneous GPU clusters.

The core's public API, importable from here (each name loads its module on first use, so
``import arena_gym`` is cheap and never imports torch, stable-baselines3 or matplotlib)::

    from arena_gym import compute_metrics, make_policy, run_episode
    from arena_gym.harness import load_jobs
    from arena_gym.scenario import build_scenario

    scenario = build_scenario("tiny", "estimator")  # cluster, performance model, simulator settings
    jobs = load_jobs("synthetic:n_jobs=20", scenario.cluster, scenario.truth, seed=0)
    policy = make_policy("arena")
    record = run_episode(scenario.backend(policy.ap_search), policy, jobs)
    avg_jct_s = compute_metrics(record)["avg_jct_s"]

Everything else stays importable from its module; the runs, comparisons and evaluations are in
:mod:`arena_gym.harness` (docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: The distribution's version (pyproject.toml reads it from here).
__version__ = "0.1.0"

#: The real data folder (the Arena artifact's traces and measurements, the ITP traces), relative to
#: the working directory: the default of every ``data_dir`` and ``--data-dir``.
REAL_DATA_DIR = "../shared/data"

#: Public name -> ``module:attr`` it is loaded from on first use.
_EXPORTS: dict[str, str] = {
    "run_episode": "arena_gym.loop:run_episode",
    "SimBackend": "arena_gym.sim:SimBackend",
    "SimConfig": "arena_gym.sim:SimConfig",
    "load_cluster": "arena_gym.cluster:load_cluster",
    "make_perf": "arena_gym.registry:make_perf",
    "make_policy": "arena_gym.registry:make_policy",
    "compute_metrics": "arena_gym.metrics:compute_metrics",
    "Policy": "arena_gym.protocols:Policy",
    "ClusterBackend": "arena_gym.protocols:ClusterBackend",
    "PerfModel": "arena_gym.types:PerfModel",
    "JobSpec": "arena_gym.types:JobSpec",
    "JobView": "arena_gym.types:JobView",
    "Snapshot": "arena_gym.types:Snapshot",
    "Decision": "arena_gym.types:Decision",
    "Allocation": "arena_gym.types:Allocation",
}

__all__ = sorted([*_EXPORTS, "REAL_DATA_DIR"])

if TYPE_CHECKING:  # static checkers see the real objects
    from arena_gym.cluster import load_cluster
    from arena_gym.loop import run_episode
    from arena_gym.metrics import compute_metrics
    from arena_gym.protocols import ClusterBackend, Policy
    from arena_gym.registry import make_perf, make_policy
    from arena_gym.sim import SimBackend, SimConfig
    from arena_gym.types import Allocation, Decision, JobSpec, JobView, PerfModel, Snapshot


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    from arena_gym.registry import resolve

    if name not in _EXPORTS:
        raise AttributeError(f"module 'arena_gym' has no attribute {name!r}")
    value = globals()[name] = resolve(_EXPORTS[name])
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily loaded ones included."""
    return sorted({*globals(), *__all__})
