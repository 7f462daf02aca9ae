"""The seams the loop is built on: Policy and ClusterBackend (PerfModel lives in :mod:`arena_gym.types`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from arena_gym.records import EpisodeRecord
from arena_gym.types import Decision, JobSpec, OverheadClass, PerfModel, Snapshot

__all__ = ["ClusterBackend", "InvalidDecision", "PerfModel", "PluginPolicy", "Policy", "with_defaults"]


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy: a pure function of the snapshot (plus per-episode memo state).

    ``ap_search`` is the reconfiguration-overhead class its (re)starts pay
    (:class:`~arena_gym.types.OverheadClass` or its name): ``pruned`` (Arena's pruned AP
    search), ``full`` (an unpruned AP search, the baselines) or ``none``. The
    simulator charges it when its caller configures it so (``SimConfig(overhead_class=...)``);
    a live backend pays whatever the real restart costs.

    ``clairvoyant`` is its information set: False (the default when a class leaves it out)
    means it is shown snapshots in which no job's true total or remaining work can be read
    (:mod:`arena_gym.core.information`); True, that it sees the truth, which every result
    labels.
    """

    name: str
    ap_search: OverheadClass | str
    clairvoyant: bool

    def reset(self) -> None:
        """Forget per-episode state before a new episode."""
        ...

    def decide(self, snapshot: Snapshot) -> Decision:
        """The allocations and preemptions wanted at this decision point."""
        ...


class ClusterBackend(Protocol):
    """Something that runs jobs: the simulator (simulated time) or a live testbed (wall clock).

    Both keep their cluster state in :class:`arena_gym.core.ClusterState`, so validation, GPU
    accounting, snapshots and the event log behave the same; they differ in their clock.
    """

    def reset(self, jobs: Sequence[JobSpec]) -> Snapshot | None:
        """Load a workload and run to the first decision point (None if nothing to decide)."""
        ...

    def apply(self, decision: Decision) -> None:
        """Apply a decision atomically; raise ``InvalidDecision`` (and change nothing) if it breaks an invariant."""
        ...

    def advance(self) -> Snapshot | None:
        """Run to the next decision point; None once the workload is drained or the horizon reached."""
        ...

    def now(self) -> float:
        """Current time in seconds on the backend's clock."""
        ...

    def close(self) -> None:
        """Release resources."""
        ...

    def record(self, policy: str, decisions: int = 0, decide_wall_s: float = 0.0) -> EpisodeRecord:
        """The episode's event log and workload as an EpisodeRecord."""
        ...


class InvalidDecision(ValueError):
    """A decision that would break a cluster invariant; nothing of it was applied."""


class PluginPolicy:
    """A plug-in that defines only ``decide`` (and any of the rest), with :class:`Policy`'s defaults for the others.

    Defaults: ``name`` the spec it was built from, ``ap_search`` ``"full"`` (an unpruned AP
    search, as the baselines pay), ``clairvoyant`` False, ``reset`` nothing.
    """

    def __init__(self, inner: object, name: str) -> None:
        self.inner = inner
        self.name = str(getattr(inner, "name", name))
        self.ap_search: OverheadClass | str = getattr(inner, "ap_search", "full")
        self.clairvoyant = bool(getattr(inner, "clairvoyant", False))

    def reset(self) -> None:
        """The plug-in's own ``reset``, if it has one."""
        reset = getattr(self.inner, "reset", None)
        if reset is not None:
            reset()

    def decide(self, snapshot: Snapshot) -> Decision:
        """The plug-in's decision."""
        return self.inner.decide(snapshot)  # type: ignore[attr-defined, no-any-return]


def with_defaults(policy: object, name: str) -> Policy:
    """``policy`` itself when it has every :class:`Policy` member, else a :class:`PluginPolicy` around it.

    ValueError (one line) when it has no callable ``decide``.
    """
    if not callable(getattr(policy, "decide", None)):
        raise ValueError(f"policy {name!r} ({type(policy).__name__}) has no decide(snapshot) method")
    if all(hasattr(policy, member) for member in ("name", "ap_search", "reset")):  # clairvoyant defaults to False
        return policy  # type: ignore[return-value]
    return PluginPolicy(policy, name)
