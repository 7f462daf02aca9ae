"""EnvConfig: the one frozen settings object of the gym environments."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from arena_gym.protocols import PerfModel
from arena_gym.sim import OverheadModel, SimConfig
from arena_gym.types import ClusterSpec

AP_SEARCH_CLASSES: tuple[str, ...] = ("pruned", "full", "none")


@dataclass(frozen=True)
class EnvConfig:
    """Everything that determines an :class:`envs.arena_env.ArenaSchedEnv`.

    ``cluster`` is a preset name, a JSON/TOML path or a :class:`ClusterSpec`. ``trace`` is a
    traces spec: a generator spec (``synthetic:...``) is re-generated with a fresh seed at every
    reset; a file trace is loaded once. Each reset then keeps a random contiguous window of
    ``window_jobs`` jobs (0 = all) and compresses arrivals by a factor drawn from
    ``load_levels``. ``perf`` is the ground truth the simulator executes (a perf spec such as
    ``estimator`` / ``measured:CSV``, or a PerfModel object); ``belief`` what the agent sees
    (None: the truth). ``horizon_s`` truncates an episode (seconds from the first submission).
    ``max_pending`` (K) and ``max_running`` (R) are the job slots; ``fold_stages`` makes a grid
    cell GPU type x count (stages from the proxy plan) instead of type x count x stages.
    ``reward`` names an entry of :data:`envs.rewards.REWARDS`. ``max_substeps`` sub-actions
    (valid or not) force "done". ``ap_search`` is the reconfiguration-overhead class the
    agent's (re)starts pay (``pruned`` = Arena's). ``round_s`` adds periodic decision points.
    """

    cluster: str | ClusterSpec = "tiny"
    trace: str = "synthetic:n_jobs=24,arrival=poisson,rate_per_h=6,gpu_types=a40+a10,max_gpus=4"
    window_jobs: int = 0
    load_levels: tuple[float, ...] = (1.0,)
    perf: str | PerfModel = "estimator"
    belief: str | PerfModel | None = None
    horizon_s: float = math.inf
    max_pending: int = 8
    max_running: int = 8
    fold_stages: bool = True
    reward: str = "jct"
    reward_scale: float = 1.0 / 3600.0
    invalid_action_penalty: float = 0.1
    max_substeps: int = 32
    round_s: float | None = None
    ap_search: str = "pruned"
    seed: int = 0

    def __post_init__(self) -> None:
        problems = []
        if self.window_jobs < 0:
            problems.append(f"window_jobs must be >= 0 (0 = whole trace), got {self.window_jobs}")
        if not self.load_levels or any(not (math.isfinite(x) and x > 0) for x in self.load_levels):
            problems.append(f"load_levels must be a non-empty tuple of finite factors > 0, got {self.load_levels}")
        if not self.horizon_s > 0:
            problems.append(f"horizon_s must be > 0, got {self.horizon_s}")
        if self.max_pending < 1 or self.max_running < 0:
            problems.append(f"need max_pending >= 1 and max_running >= 0, got {self.max_pending}, {self.max_running}")
        if self.max_substeps < 1:
            problems.append(f"max_substeps must be >= 1, got {self.max_substeps}")
        if not (math.isfinite(self.reward_scale) and self.reward_scale > 0):
            problems.append(f"reward_scale must be finite and > 0, got {self.reward_scale}")
        if not (math.isfinite(self.invalid_action_penalty) and self.invalid_action_penalty >= 0):
            problems.append(f"invalid_action_penalty must be finite and >= 0, got {self.invalid_action_penalty}")
        if self.round_s is not None and not self.round_s > 0:
            problems.append(f"round_s must be > 0 or None, got {self.round_s}")
        if self.ap_search not in AP_SEARCH_CLASSES:
            problems.append(f"ap_search must be one of {', '.join(AP_SEARCH_CLASSES)}, got {self.ap_search!r}")
        if problems:
            raise ValueError("EnvConfig: " + "; ".join(problems))
        if not isinstance(self.load_levels, tuple):
            object.__setattr__(self, "load_levels", tuple(self.load_levels))

    @property
    def n_slots(self) -> int:
        """Job slots: K pending then R running."""
        return self.max_pending + self.max_running

    def sim_config(self) -> SimConfig:
        """The simulator settings of an episode (Arena's overhead constants)."""
        return SimConfig(OverheadModel(), self.round_s, True, self.horizon_s)

    def replace(self, **overrides: Any) -> "EnvConfig":
        """A copy with some fields replaced; ValueError naming unknown fields."""
        valid = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - valid)
        if unknown:
            raise ValueError(f"unknown EnvConfig field(s) {', '.join(unknown)}; valid: {', '.join(sorted(valid))}")
        if "load_levels" in overrides:
            overrides["load_levels"] = tuple(overrides["load_levels"])
        return dataclasses.replace(self, **overrides)
