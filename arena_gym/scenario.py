"""A scenario: the cluster, the ground-truth performance model, the belief and the simulator settings, built once.

Every place that runs episodes (the gym envs, ``simulate``, ``compare``, ``evaluate``, the
suites, the belief fit) builds its scenario with :func:`build_scenario` (the envs from an
``EnvConfig`` with :func:`envs.scenario.env_scenario`) and takes fresh simulators from it with
:meth:`Scenario.backend`, each charging its policy's restart overhead class.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arena_gym.cluster import resolve_cluster
from arena_gym.protocols import PerfModel
from arena_gym.registry import make_perf
from arena_gym.sim import OverheadModel, SimBackend, SimConfig
from arena_gym.types import ClusterSpec, OverheadClass


@dataclass(frozen=True)
class Scenario:
    """What every episode of a workload shares: ``cluster``, the ``truth`` the simulator executes
    with, the ``belief`` policies plan with (the truth itself unless given) and ``sim``, the
    overheads and decision schedule (its ``overhead_class`` is the default a backend charges)."""

    cluster: ClusterSpec
    truth: PerfModel = field(compare=False, repr=False)
    belief: PerfModel = field(compare=False, repr=False)
    sim: SimConfig = field(default_factory=SimConfig)

    def sim_config(self, overhead_class: OverheadClass | str | None = None) -> SimConfig:
        """``sim`` charging ``overhead_class`` per (re)start (None: ``sim``'s own)."""
        if overhead_class is None:
            return self.sim
        return dataclasses.replace(self.sim, overhead_class=OverheadClass.parse(overhead_class))

    def backend(self, overhead_class: OverheadClass | str | None = None) -> SimBackend:
        """A fresh simulator of this scenario charging ``overhead_class`` (a policy's ``ap_search``)."""
        return SimBackend(self.cluster, self.truth, self.belief, self.sim_config(overhead_class))


def perf_model(
    perf: str | PerfModel,
    cluster: ClusterSpec,
    seed: int = 0,
    truth: PerfModel | None = None,
    cache_dir: str | Path | None = None,
    models: Mapping[str, Any] | None = None,
) -> PerfModel:
    """A PerfModel as given, or built from its spec (:func:`arena_gym.registry.make_perf`; ``truth`` is
    the base of wrappers such as ``noisy:SIGMA``)."""
    return make_perf(perf, cluster, seed, truth, cache_dir, models) if isinstance(perf, str) else perf


def build_scenario(
    cluster: str | ClusterSpec,
    perf: str | PerfModel = "estimator",
    belief: str | PerfModel | None = None,
    seed: int = 0,
    sim: SimConfig | None = None,
    *,
    truth: PerfModel | None = None,
    cache_dir: str | Path | None = None,
    models: Mapping[str, Any] | None = None,
    allow_shadowing: bool = False,
) -> Scenario:
    """The scenario of a cluster spec (a preset, a file or ``preset[type=nodes,...]``) and perf specs.

    ``truth`` is the model ``perf`` names when the caller has it already (it keeps its tables);
    ``cache_dir`` and ``models`` go to the estimator; ``allow_shadowing`` lets a cluster file take
    a preset's name.
    """
    spec = resolve_cluster(cluster, allow_shadowing)
    if truth is None:
        truth = perf_model(perf, spec, seed, None, cache_dir, models)
    model = perf_model(belief, spec, seed, truth, cache_dir, models) if belief is not None else truth
    return Scenario(spec, truth, model, sim if sim is not None else SimConfig())


def scaled_overhead(scale: float) -> OverheadModel:
    """The default overhead model with every constant multiplied by ``scale``."""
    base = OverheadModel()
    values = {f.name: getattr(base, f.name) * scale for f in dataclasses.fields(base)}
    if not all(math.isfinite(v) for v in values.values()):
        raise ValueError(f"--overhead-scale {scale:g} makes the overheads overflow")
    return dataclasses.replace(base, **values)
