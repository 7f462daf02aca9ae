"""TrainConfig: every setting of a training run, checked when it is built.

The command-line options of both training front ends are generated from its fields
(:mod:`arena_gym.harness.train_options`). Importing this module loads no torch and no SB3.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from agents.rl.algos import ALGO_FAMILIES, POLICIES
from arena_gym.fields import Problems, build, check_fields

#: The wandb modes a run may use.
WandbMode = Literal["disabled", "offline", "online"]
WANDB_MODES: tuple[str, ...] = get_args(WandbMode)
VecKind = Literal["dummy", "subproc"]
#: Splits of the training env, the validation runs during training, and the final test (envs.config.SPLITS).
TRAIN_SPLIT, EVAL_SPLIT, TEST_SPLIT = "train", "validation", "test"


def _opt(help_text: str, flag: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"help": help_text, "flag": flag, **extra}


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run (see each field's ``help`` metadata).

    The training env always draws from the ``train`` split of its traces (a generator's own
    seed stream, or the first time range of each trace file), validation during training from
    the ``validation`` split; ``env_overrides`` may not change the split. Env ``i`` of the
    ``n_envs`` is first reset with ``seed + i``; behaviour cloning plays from ``seed + n_envs``.
    Steps and ``*_every`` count environment steps over all envs; 0 turns periodic evaluation or
    checkpoints off (a final evaluation always runs).
    """

    algo: str = field(default="maskable_ppo", metadata=_opt("learning algorithm"))
    env_id: str = field(default="ArenaGym/Tiny-v1", metadata=_opt("registered env id", "--env"))
    env_overrides: Mapping[str, Any] = field(
        default_factory=dict,
        metadata=_opt(
            "override an EnvConfig field, e.g. --env-arg load_levels=[0.6,0.9] (repeatable; JSON values)", "--env-arg"
        ),
    )
    steps: int = field(default=100_000, metadata=_opt("environment steps over all envs"))
    n_envs: int = field(default=2, metadata=_opt("parallel environments"))
    vec: VecKind = field(default="dummy", metadata=_opt("VecEnv kind: dummy (measured faster here) or subproc"))
    seed: int = field(default=0, metadata=_opt("seed of the model and the training workloads"))
    learning_rate: float = field(default=3e-4, metadata=_opt("learning rate", "--lr"))
    policy: str = field(
        default="mlp",
        metadata=_opt(
            "network: mlp (one MLP over the flattened observation) or slots (one network shared by all job slots; "
            "maskable_ppo only)"
        ),
    )
    n_steps: int = field(default=512, metadata=_opt("PPO rollout length per env"))
    batch_size: int = field(default=128, metadata=_opt("minibatch size"))
    n_epochs: int = field(default=10, metadata=_opt("PPO epochs per rollout"))
    gamma: float = field(default=0.99, metadata=_opt("discount factor"))
    gae_lambda: float = field(default=0.95, metadata=_opt("GAE lambda"))
    ent_coef: float = field(default=0.01, metadata=_opt("PPO entropy bonus"))
    clip_range: float = field(default=0.2, metadata=_opt("PPO clip range"))
    net_arch: tuple[int, ...] = field(default=(128, 128), metadata=_opt("hidden layer sizes, e.g. 128,128"))
    algo_kwargs: Mapping[str, Any] = field(
        default_factory=dict,
        metadata=_opt("any other keyword of the algorithm class (repeatable KEY=VALUE)", "--algo-arg"),
    )
    eval_every: int = field(default=10_000, metadata=_opt("validate every N steps (0 = only at the end)"))
    eval_seeds: tuple[int, ...] = field(
        default=tuple(range(1_000_000, 1_000_008)),
        metadata=_opt("validation seeds of generator traces (file traces use every validation window)"),
    )
    eval_limit: int = field(default=0, metadata=_opt("validate on at most N workloads, evenly spaced (0 = all)"))
    eval_baselines: tuple[str, ...] = field(
        default=("fcfs", "arena"),
        metadata=_opt(
            "heuristics scored beside the agent; with arena, models are ranked by the mean ratio to it", "--baselines"
        ),
    )
    checkpoint_every: int = field(default=25_000, metadata=_opt("checkpoint every N steps (0 = off)"))
    bc_warm_start_steps: int = field(
        default=0, metadata=_opt("behaviour-cloning samples before RL (0 = off)", "--bc-steps")
    )
    bc_expert: tuple[str, ...] = field(
        default=("arena",), metadata=_opt("heuristic(s) to clone, samples split evenly, e.g. arena,tiresias")
    )
    bc_epochs: int = field(default=20, metadata=_opt("behaviour-cloning epochs"))
    out_dir: str = field(default="results/train", metadata=_opt("run directory", "--out"))
    wandb_mode: WandbMode = field(default="disabled", metadata=_opt("wandb mode (--wandb means offline)"))
    wandb_project: str = field(default="arena-gym", metadata=_opt("wandb project"))
    progress: bool = field(default=True, metadata=_opt("no progress bar", "--no-progress"))

    def __post_init__(self) -> None:
        check_fields(self)
        self._problems().raise_if_any("TrainConfig")

    def _problems(self) -> Problems:
        problems = Problems()
        for name, valid in (
            ("algo", tuple(ALGO_FAMILIES)),
            ("policy", tuple(POLICIES)),
        ):
            value = getattr(self, name)
            problems.require(value in valid, f"unknown {name} {value!r} (valid: {', '.join(sorted(valid))})")
        for name in ("steps", "n_envs", "n_steps", "n_epochs", "bc_epochs"):
            problems.require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        problems.require(self.batch_size >= 2, f"batch_size must be >= 2, got {self.batch_size}")
        problems.require(self.n_steps * self.n_envs >= 2, "n_steps x n_envs must be >= 2")
        problems.require(
            bool(self.net_arch) and min(self.net_arch) >= 1,
            f"net_arch needs one or more layer sizes >= 1, got {self.net_arch}",
        )
        for name, lo, hi in (
            ("learning_rate", 0, math.inf),
            ("gamma", 0, 1),
            ("gae_lambda", 0, 1),
            ("clip_range", 0, math.inf),
        ):
            value = getattr(self, name)
            problems.require(math.isfinite(value) and lo < value <= hi, f"{name} must be in ({lo}, {hi}], got {value}")
        problems.require(
            math.isfinite(self.ent_coef) and self.ent_coef >= 0,
            f"ent_coef must be finite and >= 0, got {self.ent_coef}",
        )
        problems.require(
            min(self.eval_every, self.checkpoint_every, self.bc_warm_start_steps, self.eval_limit) >= 0,
            "eval_every, eval_limit, checkpoint_every and bc_warm_start_steps must be >= 0",
        )
        if problems.require(self.seed >= 0, f"seed must be >= 0, got {self.seed}"):
            problems.require(  # the reset seeds seed..seed+n_envs are numpy seeds
                self.seed + self.n_envs < 2**32,
                f"seed must be < 2**32 - n_envs = {2**32 - self.n_envs}, got {self.seed}",
            )
        if problems.require(bool(self.eval_seeds), "eval_seeds must name at least one validation seed"):
            problems.require(min(self.eval_seeds) >= 0, f"eval_seeds must be >= 0, got {min(self.eval_seeds)}")
        problems.require(bool(self.bc_expert), "bc_expert must name at least one heuristic")
        problems.require(
            "split" not in self.env_overrides,
            "env_overrides may not set split: training uses the train split, validation the "
            "validation split, and the test the test split",
        )
        problems.require(
            self.policy == "mlp" or self.algo == "maskable_ppo",
            f"policy {self.policy!r} works with maskable_ppo only, not {self.algo}",
        )
        problems.require(
            not self.bc_warm_start_steps
            or self.algo not in ALGO_FAMILIES
            or ALGO_FAMILIES[self.algo] == "actor_critic",
            f"behaviour cloning needs an actor-critic algorithm, not {self.algo}",
        )
        return problems

    @property
    def training_seeds(self) -> tuple[int, ...]:
        """Reset seeds used for training (one per env) and for behaviour cloning (the last)."""
        return tuple(range(self.seed, self.seed + self.n_envs + 1))

    def env_overrides_for(self, split: str) -> dict[str, Any]:
        """The env overrides with the split set."""
        return {**dict(self.env_overrides), "split": split}

    def to_json(self) -> dict[str, Any]:
        """The fields as JSON-ready values."""
        return {
            f.name: (
                dict(v) if isinstance(v := getattr(self, f.name), Mapping) else list(v) if isinstance(v, tuple) else v
            )
            for f in dataclasses.fields(self)
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainConfig:
        """Rebuild a config written by :meth:`to_json` (unknown keys are an error)."""
        return build(cls, data, "TrainConfig")
