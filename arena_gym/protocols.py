"""The three protocols the loop is built on: PerfModel, Policy, ClusterBackend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from arena_gym.records import EpisodeRecord
from arena_gym.types import Decision, Grid, JobSpec, ModelRef, Plan, ResourceShape, Snapshot


@runtime_checkable
class PerfModel(Protocol):
    """Iteration time and feasibility of a (model, global batch) on a resource shape or grid.

    Times are seconds per iteration; ``math.inf`` means infeasible (out of memory, or no plan).
    """

    name: str

    def iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """Best adaptive-parallelism (proxy-plan) iteration time on ``shape``."""
        ...

    def grid_iter_time(self, model: ModelRef, global_batch: int, grid: Grid) -> float:
        """Best iteration time with the stage count fixed by ``grid``."""
        ...

    def dp_iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """What a static-parallelism (data-parallel only) scheduler believes, DP memory rule applied."""
        ...

    def proxy_plan(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> Plan | None:
        """The concrete plan behind ``iter_time``, or None when the model cannot name one."""
        ...


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy: a pure function of the snapshot (plus per-episode memo state).

    ``ap_search`` names the reconfiguration-overhead class its (re)starts pay: ``"pruned"``
    (Arena's pruned AP search) or ``"full"`` (an unpruned AP search, the baselines).
    """

    name: str
    ap_search: str

    def reset(self) -> None:
        """Forget per-episode state before a new episode."""
        ...

    def decide(self, snapshot: Snapshot) -> Decision:
        """The allocations and preemptions wanted at this decision point."""
        ...


class ClusterBackend(Protocol):
    """Something that runs jobs: the simulator (simulated time) or a live testbed (wall clock)."""

    def reset(self, jobs: Sequence[JobSpec], ap_search: str = "pruned") -> Snapshot | None:
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
