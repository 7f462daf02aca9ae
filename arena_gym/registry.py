"""Registries mapping names to ``"module:attr"`` targets, resolved lazily on use."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


def resolve(target: str) -> Any:
    """Import ``"package.module:attr"`` and return the attribute."""
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"registry target {target!r} is not of the form 'module:attr'")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@dataclass(frozen=True)
class Entry:
    """One registered name: its target, default keyword arguments and a one-line description."""

    target: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""


class Registry:
    """Name -> Entry, plus prefix handlers such as ``sb3:PATH``."""

    def __init__(self, kind: str, entries: Mapping[str, Entry], prefixes: Mapping[str, str] | None = None) -> None:
        self.kind = kind
        self._entries = dict(entries)
        self._prefixes = dict(prefixes or {})

    @property
    def entries(self) -> Mapping[str, Entry]:
        """A read-only view of the registered names."""
        return MappingProxyType(self._entries)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._entries)

    def register(self, name: str, target: str, description: str = "", **kwargs: Any) -> None:
        """Add (or replace) a name."""
        self._entries[name] = Entry(target, dict(kwargs), description)

    def make(self, spec: str, **extra: Any) -> Any:
        """Build the object a name (or ``prefix:argument``) stands for.

        Keyword arguments in ``extra`` are passed only if the target's signature accepts them.
        """
        if not isinstance(spec, str):
            raise TypeError(f"{self.kind} spec must be a string, got {spec!r:.60}")
        prefix, sep, argument = spec.partition(":")
        if sep and prefix in self._prefixes:
            if not argument.strip():
                raise ValueError(f"{self.kind} spec {spec!r} needs an argument after '{prefix}:'")
            return _call(resolve(self._prefixes[prefix]), {"path": argument, **extra})
        entry = self._entries.get(spec)
        if entry is None:
            valid = ", ".join(self.names() + [f"{p}:..." for p in self._prefixes])
            raise ValueError(f"unknown {self.kind} {spec!r}; valid: {valid}")
        return _call(resolve(entry.target), {**entry.kwargs, **extra})


def _call(factory: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    params = inspect.signature(factory).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        kwargs = {k: v for k, v in kwargs.items() if k in params}
    return factory(**kwargs)


def policy_registry() -> Registry:
    """A fresh registry of the built-in scheduling policies."""
    return Registry(
        "policy",
        {
            "fcfs": Entry("agents.fcfs:FCFS", {"name": "fcfs"}, "first come first served at the requested shape"),
            "fcfs-r": Entry("agents.fcfs:FCFS", {"name": "fcfs-r", "relax": True}, "FCFS with relaxed locality"),
            "srtf": Entry("agents.srtf:SRTF", {"name": "srtf"}, "preemptive shortest remaining time first"),
            "arena": Entry("agents.arena:ArenaPolicy", {"name": "arena"}, "Arena heuristic (AP proxy estimates)"),
            "arena-dp": Entry("agents.arena:ArenaPolicy", {"name": "arena-dp", "dp_only": True},
                              "Arena deciding with data-parallel-only estimates"),
            "arena-ns": Entry("agents.arena:ArenaPolicy", {"name": "arena-ns", "no_scaling": True}, "Arena without GPU-count scaling"),
            "arena-nh": Entry("agents.arena:ArenaPolicy", {"name": "arena-nh", "no_type_change": True}, "Arena without GPU-type change"),
            "arena-no": Entry("agents.arena:ArenaPolicy", {"name": "arena-no", "no_opportunism": True}, "Arena without opportunistic backfill"),
            "arena-ddl": Entry("agents.arena:ArenaPolicy", {"name": "arena-ddl", "deadline_aware": True}, "deadline-aware Arena"),
            "arena-np": Entry("agents.arena:ArenaPolicy", {"name": "arena-np", "pruned": False},
                              "Arena paying the unpruned AP-search overhead"),
            "tiresias": Entry("agents.tiresias:Tiresias", {"name": "tiresias"}, "2D-LAS (discretised least attained service)"),
            "gandiva": Entry("agents.gandiva:Gandiva", {"name": "gandiva"}, "migration and grow/shrink within one GPU type"),
            "elasticflow-ls": Entry("agents.elasticflow:ElasticFlowLS", {"name": "elasticflow-ls"},
                                    "ElasticFlow with loose deadlines (throughput oriented)"),
            "gavel": Entry("agents.gavel:Gavel", {"name": "gavel"}, "max-sum-throughput MILP over GPU types (HiGHS)"),
            "sia": Entry("agents.sia:Sia", {"name": "sia"}, "goodput MILP over GPU type and count (HiGHS)"),
        },
        prefixes={"sb3": "agents.rl.policy:load_sb3_policy"},
    )


def perf_registry() -> Registry:
    """Performance models: the calibrated estimator (default), a measured table (``measured:CSV``) or a
    measured device profile (``profiled:PROFILE.json``)."""
    return Registry(
        "performance model",
        {"estimator": Entry("estimator:default_perf_model", {}, "AP-tailored estimator (built in)")},
        prefixes={"measured": "estimator.measured:measured_perf_model", "noisy": "arena_gym.perf:noisy_perf_model",
                  "profiled": "estimator.profiled:profiled_perf_model"},
    )
