"""EnvConfig: the one frozen settings object of the gym environments, validated on construction."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal, get_args

from arena_gym import REAL_DATA_DIR
from arena_gym.core.triggers import DecisionSchedule
from arena_gym.fields import Problems, check_fields
from arena_gym.protocols import PerfModel
from arena_gym.sim import OverheadModel, SimConfig
from arena_gym.types import OVERHEAD_CLASSES, ClusterSpec

#: Workload splits: ``all`` (the whole trace) or one of three disjoint time ranges of each trace.
Split = Literal["all", "train", "validation", "test"]
SPLITS: tuple[str, ...] = get_args(Split)
#: How ``load_levels`` are read: arrival-rate factors, or offered load relative to the cluster's capacity.
LoadBasis = Literal["factor", "offered"]
LOAD_BASES: tuple[str, ...] = get_args(LoadBasis)
#: Order of the K pending slots: first come first served, or least attained service first.
PendingOrder = Literal["fifo", "las"]
#: Per-episode reward normalisers: none (seconds), jobs (job count x 1 h: the return is minus the
#: average JCT in hours), ideal (the jobs' total ideal run time: minus total JCT / total ideal time).
RewardNorm = Literal["none", "jobs", "ideal"]
#: Upper bound of ``max_pending`` and of ``max_running``: the spaces and masks hold a row per slot.
MAX_SLOTS = 1024


@dataclass(frozen=True)
class EnvConfig:
    """Everything that determines an :class:`envs.arena_env.ArenaSchedEnv`.

    *Cluster.* ``cluster`` is a preset name, a JSON/TOML path or a :class:`ClusterSpec`, with
    optional node-count overrides (``testbed-64[a40=8,a10=24]``, see :mod:`envs.clusters`);
    each episode runs on ``cluster`` or one of ``cluster_variants`` (drawn uniformly), which
    must have the same GPU types and grid cells so that the spaces do not change.

    *Workload.* ``trace`` is one traces spec or a tuple of them (one is drawn per episode); a
    spec starting with ``data:`` names a file inside ``data_dir``. A generator spec
    (``synthetic:...``) is regenerated with a fresh seed at every reset; a file trace is loaded
    once and cut by time into three disjoint ranges (``split_fractions`` of its span: train,
    validation, test). ``split`` selects the range episodes draw from (``all``: the whole
    trace; generators draw from a separate seed stream per split). Each reset keeps a
    contiguous window of ``window_jobs`` jobs (0 = the whole range) inside the range, and
    rescales arrivals to a level drawn from ``load_levels``: an arrival-rate factor
    (``load_basis="factor"``) or the offered load, i.e. requested GPU-seconds of work per
    second of the window over the cluster's GPUs (``"offered"``). Requests for a GPU type the
    cluster lacks, or shapes it cannot run, are retargeted to the nearest feasible shape.

    *Simulation.* ``perf`` is the ground truth the simulator executes (a perf spec such as
    ``estimator`` / ``measured:CSV``, or a PerfModel object); ``belief`` what the agent sees
    (None: the truth). ``horizon_s`` truncates an episode (seconds from the first submission).
    ``ap_search`` is the reconfiguration-overhead class the agent's (re)starts pay (``pruned``
    = Arena's). ``round_s`` adds periodic decision points.

    *Agent interface.* ``max_pending`` (K) and ``max_running`` (R) are the job slots (at most :data:`MAX_SLOTS` each);
    ``pending_order`` fills the K pending slots first come first served (``fifo``) or least
    attained service first (``las``). ``fold_stages`` makes a grid cell GPU type x count
    (stages from the proxy plan) instead of type x count x stages. ``oracle_remaining`` adds
    each job's true progress and remaining work to the observation: a clairvoyant ablation,
    off by default. ``advisor`` names a registered heuristic whose decision at each decision
    point is offered in the observation (``advice``; see :mod:`envs.advisor`). ``reward`` names an entry of :func:`envs.rewards.reward_registry`; each
    episode's reward is divided by ``reward_norm``'s normaliser (:data:`RewardNorm`; by
    default the job count x 1 h, so the ``jct`` return is minus the average JCT in hours) and
    multiplied by ``reward_scale``. ``max_substeps`` sub-actions (valid or not) force "done".
    """

    cluster: str | ClusterSpec = "tiny"
    cluster_variants: tuple[str | ClusterSpec, ...] = ()
    trace: str | tuple[str, ...] = "synthetic:n_jobs=24,arrival=poisson,rate_per_h=6,gpu_types=a40+a10,max_gpus=4"
    data_dir: str = REAL_DATA_DIR
    split: str = "all"  # a Split (annotated str: callers pass a split as a str)
    split_fractions: tuple[float, float, float] = (0.7, 0.1, 0.2)
    window_jobs: int = 0
    load_levels: tuple[float, ...] = (1.0,)
    load_basis: str = "factor"  # a LoadBasis (as split)
    perf: str | PerfModel = "estimator"
    belief: str | PerfModel | None = None
    horizon_s: float = math.inf
    max_pending: int = 8
    max_running: int = 8
    pending_order: PendingOrder = "fifo"
    fold_stages: bool = True
    oracle_remaining: bool = False
    advisor: str | None = None
    reward: str = "jct"
    reward_scale: float = 1.0
    reward_norm: RewardNorm = "jobs"
    invalid_action_penalty: float = 0.1
    max_substeps: int = 32
    round_s: float | None = None
    ap_search: str = "pruned"  # one of OVERHEAD_CLASSES (an OverheadClass, a str, too)
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(self)
        self._problems().raise_if_any("EnvConfig")

    def _problems(self) -> Problems:
        problems = Problems()
        problems.check(self.split, Split, "split")
        problems.check(self.load_basis, LoadBasis, "load_basis")
        problems.require(
            self.ap_search in OVERHEAD_CLASSES,
            f"ap_search must be one of {', '.join(OVERHEAD_CLASSES)}, got {self.ap_search!r}",
        )
        fractions = self.split_fractions
        problems.require(
            all(math.isfinite(f) and f > 0 for f in fractions) and math.isclose(sum(fractions), 1.0),
            f"split_fractions must be three numbers > 0 summing to 1, got {fractions}",
        )
        problems.require(self.window_jobs >= 0, f"window_jobs must be >= 0 (0 = whole range), got {self.window_jobs}")
        problems.require(
            bool(self.load_levels) and all(math.isfinite(x) and x > 0 for x in self.load_levels),
            f"load_levels must be a non-empty tuple of finite numbers > 0, got {self.load_levels}",
        )
        problems.extend(DecisionSchedule.problems(self.round_s, True, self.horizon_s))
        problems.require(
            1 <= self.max_pending <= MAX_SLOTS, f"max_pending must be in [1, {MAX_SLOTS}], got {self.max_pending}"
        )
        problems.require(
            0 <= self.max_running <= MAX_SLOTS, f"max_running must be in [0, {MAX_SLOTS}], got {self.max_running}"
        )
        problems.require(self.max_substeps >= 1, f"max_substeps must be >= 1, got {self.max_substeps}")
        problems.require(
            math.isfinite(self.reward_scale) and self.reward_scale > 0,
            f"reward_scale must be finite and > 0, got {self.reward_scale}",
        )
        problems.require(
            math.isfinite(self.invalid_action_penalty) and self.invalid_action_penalty >= 0,
            f"invalid_action_penalty must be finite and >= 0, got {self.invalid_action_penalty}",
        )
        problems.require(self.seed >= 0, f"seed must be >= 0, got {self.seed}")
        problems.require(
            bool(self.traces) and all(s.strip() for s in self.traces),
            "trace must be one non-empty trace spec or a non-empty tuple of them",
        )
        problems.require(
            self.advisor is None or bool(self.advisor.strip()),
            "advisor must be None or a policy name, got an empty string",
        )
        return problems

    @property
    def n_slots(self) -> int:
        """Job slots: K pending then R running."""
        return self.max_pending + self.max_running

    @property
    def traces(self) -> tuple[str, ...]:
        """The trace specs as a tuple (one or more)."""
        return (self.trace,) if isinstance(self.trace, str) else tuple(self.trace)

    @property
    def clusters(self) -> tuple[str | ClusterSpec, ...]:
        """``cluster`` followed by the variants (duplicates removed)."""
        return tuple(dict.fromkeys((self.cluster, *self.cluster_variants)))

    def sim_config(self, overhead_class: str | None = None) -> SimConfig:
        """The simulator settings of an episode (Arena's overhead constants), charging ``overhead_class``
        (default: the agent's ``ap_search``; give a heuristic's ``ap_search`` to score it on the same workloads)."""
        return SimConfig(OverheadModel(), self.round_s, True, self.horizon_s, overhead_class or self.ap_search)

    def replace(self, **overrides: Any) -> EnvConfig:
        """A copy with some fields replaced; ValueError naming unknown fields, TypeError/ValueError for bad values."""
        valid = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise ValueError(f"unknown EnvConfig field(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid))}")
        return dataclasses.replace(self, **overrides)
