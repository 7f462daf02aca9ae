"""ArenaConfig: the ablation switches and search constants of the Arena heuristic."""

from __future__ import annotations

from dataclasses import dataclass, field

from arena_gym.types import OverheadClass, OverheadModel


@dataclass(frozen=True)
class ArenaConfig:
    """Settings of :class:`agents.arena.ArenaPolicy` (docs/arena.md §5).

    Switches (the artifact's ablations, §5.5): ``dp_only`` decides with data-parallel-only
    estimates (``crius-dp``); ``no_scaling`` never changes a job's GPU count (``crius-ns``);
    ``no_type_change`` never changes a job's GPU type (``crius-nh``); ``no_opportunism`` lets no
    job of type X start while an earlier job of type X waits (``crius-no``); ``deadline_aware``
    accepts a configuration only if the job still meets its deadline on it (``crius-ddl``);
    ``pruned`` picks the reconfiguration-overhead class (pruned AP search, or the full one);
    ``preempt_lower`` lets a waiting job that does not fit take the GPUs of any running job after
    it in queue order (preempting those it needs), not only those of opportunism jobs;
    ``weighted_upgrades`` scores the upgrade trial's grows and moves by the gain in expected
    completions per second (each job's samples/s gain times its priority's urgency, see
    :meth:`agents.arena.priority.Priority.urgency`) instead of by raw samples/s;
    ``weighted_fits`` does the same in ``fit_one_job``'s downgrade search (the other jobs' losses
    and gains count in the fitted job's samples/s, times their urgency relative to its own).

    Constants (§5.3-5.7): jobs hold at most ``max_job_gpus`` GPUs, except that the upgrade trial
    may grow a job up to ``max_grow_gpus`` (0: ``max_job_gpus``; a priority's sizing targets bound
    each job's grows, see :meth:`agents.arena.priority.Priority.targets`); the downgrade BFS goes
    ``downgrade_depth`` levels deep, ``downgrade_depth_crowded`` once more than
    ``crowded_running_jobs`` jobs run; the upgrade trial takes at most ``max_upgrade_steps``
    steps; the pending restart trial at most ``max_restart_trials`` fits; bubble migration at
    most ``max_migration_rounds`` rounds per placement. ``overhead`` is the restart overhead the
    deadline check charges (it should match the simulator's).
    """

    dp_only: bool = False
    no_scaling: bool = False
    no_type_change: bool = False
    no_opportunism: bool = False
    deadline_aware: bool = False
    pruned: bool = True
    preempt_lower: bool = False
    weighted_upgrades: bool = False
    weighted_fits: bool = False
    max_job_gpus: int = 16
    max_grow_gpus: int = 0
    downgrade_depth: int = 3
    downgrade_depth_crowded: int = 2
    crowded_running_jobs: int = 150
    max_upgrade_steps: int = 10
    max_restart_trials: int = 100
    max_migration_rounds: int = 256
    overhead: OverheadModel = field(default_factory=OverheadModel)

    def __post_init__(self) -> None:
        for name in ("max_job_gpus", "downgrade_depth", "downgrade_depth_crowded", "max_migration_rounds"):
            if getattr(self, name) < 1:
                raise ValueError(f"ArenaConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("crowded_running_jobs", "max_upgrade_steps", "max_restart_trials"):
            if getattr(self, name) < 0:
                raise ValueError(f"ArenaConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.max_grow_gpus and self.max_grow_gpus < self.max_job_gpus:
            raise ValueError(
                f"ArenaConfig.max_grow_gpus must be 0 or >= max_job_gpus ({self.max_job_gpus}), got {self.max_grow_gpus}"
            )

    @property
    def grow_ceiling(self) -> int:
        """The most GPUs the upgrade trial may grow a job to."""
        return self.max_grow_gpus or self.max_job_gpus

    @property
    def ap_search(self) -> OverheadClass:
        """The reconfiguration-overhead class the policy's (re)starts pay."""
        return OverheadClass.PRUNED if self.pruned else OverheadClass.FULL

    def depth(self, running_jobs: int) -> int:
        """Downgrade-search depth for a cluster running ``running_jobs`` jobs."""
        return self.downgrade_depth if running_jobs <= self.crowded_running_jobs else self.downgrade_depth_crowded

    def restart_overhead_s(self, num_gpus: int) -> float:
        """Seconds a (re)start on ``num_gpus`` GPUs costs before the job makes progress."""
        return self.overhead.seconds(self.ap_search, num_gpus)
