"""PPO on the residual action space, fine-tuning a warm start without losing it.

The env is :class:`agents.search.residual_env.ResidualArenaEnv` on the real traces' train
windows (the evolution strategies' windows, :func:`arena_gym.harness.residual_train.real_windows`),
the network :class:`agents.rl.residual_net.ResidualPolicy`, whose mean actor *is* a residual
weights file: the run starts from one (``warm_start``; none = zero weights, the base policy
``arena-gittins-32-f``) and every validation scores the mean actor as a ``residual:`` policy
against the base on the validation windows. Two things keep the warm start: a critic warm-up
(``critic_warmup`` rollouts train the value head with the actor and its noise frozen, so the
first policy updates follow a critic that has seen the policy's returns) and a low learning
rate. The network with the best validation ratio is kept.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from stable_baselines3.common.callbacks import BaseCallback

from agents.rl.residual_net import ResidualPolicy
from agents.search.residual import ResidualWeights
from arena_gym.harness.residual_train import TRAIN_TRACES, BaseScores, real_windows
from arena_gym.outputs import check_out_dir, code_version, write_json
from envs import Workload

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResidualPPOConfig:
    """One fine-tuning run: warm start, data, PPO's settings and the two guards.

    ``steps`` environment steps (decision points) over ``n_envs`` envs, PPO updates every
    ``n_steps`` per env; ``log_std_init`` is the log of the action noise (in log-multiplier
    units); ``critic_warmup`` rollouts update only the critic; validation every ``eval_every``
    steps and at the start on ``validation_limit`` windows (0 = all), ``workers`` processes.
    """

    warm_start: str = ""
    traces: tuple[str, ...] = TRAIN_TRACES
    loads: tuple[float, ...] = (0.6, 0.9, 1.2)
    data_dir: str = "../shared/data"
    steps: int = 40_000
    n_envs: int = 2
    n_steps: int = 1024
    batch_size: int = 256
    n_epochs: int = 5
    learning_rate: float = 3e-4
    gamma: float = 1.0
    log_std_init: float = -2.0
    critic_warmup: int = 0
    net_arch: tuple[int, ...] = (64, 64)
    eval_every: int = 4096
    validation_limit: int = 0
    max_jobs: int = 64
    seed: int = 0
    workers: int = 2

    def __post_init__(self) -> None:
        for name in ("steps", "n_envs", "n_steps", "n_epochs", "eval_every", "workers", "max_jobs"):
            if getattr(self, name) < 1:
                raise ValueError(f"ResidualPPOConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.batch_size < 2 or self.critic_warmup < 0 or self.validation_limit < 0:
            raise ValueError("ResidualPPOConfig: batch_size must be >= 2, critic_warmup and validation_limit >= 0")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"ResidualPPOConfig.learning_rate must be finite and > 0, got {self.learning_rate}")
        if not 0 < self.gamma <= 1 or not math.isfinite(self.log_std_init):
            raise ValueError("ResidualPPOConfig: gamma must be in (0, 1], log_std_init finite")
        if not self.net_arch or min(self.net_arch) < 1:
            raise ValueError(f"ResidualPPOConfig.net_arch needs layer sizes >= 1, got {self.net_arch}")


class WindowEnv(gym.Wrapper):
    """Each episode replays one of ``workloads``, drawn at random (the env's seed)."""

    def __init__(self, env: gym.Env, workloads: list[Workload]) -> None:
        super().__init__(env)
        self.workloads = workloads
        self._draw = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset on a drawn window."""
        if seed is not None:
            self._draw = np.random.default_rng(seed)
        pick = self.workloads[int(self._draw.integers(len(self.workloads)))]
        return self.env.reset(seed=seed, options={**(options or {}), "jobs": pick.jobs})


class CriticWarmup(BaseCallback):
    """Freezes the actor and its noise for the first ``rollouts`` PPO updates (the critic alone learns)."""

    def __init__(self, rollouts: int) -> None:
        super().__init__()
        self.rollouts, self.seen = rollouts, 0

    def _freeze(self, frozen: bool) -> None:
        policy = self.model.policy
        assert isinstance(policy, ResidualPolicy)
        for parameter in policy.actor_parameters():
            parameter.requires_grad_(not frozen)

    def _on_training_start(self) -> None:
        self._freeze(self.rollouts > 0)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.seen += 1  # the update that follows is the seen-th
        self._freeze(self.seen <= self.rollouts)


class Validation(BaseCallback):
    """At the start and every ``every`` steps: the mean actor's geometric-mean ratio to the base on validation."""

    def __init__(self, trainer: ResidualPPOTrainer, every: int) -> None:
        super().__init__()
        self.trainer, self.every, self.next = trainer, every, 0

    def _on_training_start(self) -> None:
        self.trainer.validate(self.model, 0)
        self.next = self.every

    def _on_step(self) -> bool:
        if self.num_timesteps >= self.next:
            self.trainer.validate(self.model, self.num_timesteps)
            self.next = (self.num_timesteps // self.every + 1) * self.every
        return True


class ResidualPPOTrainer:
    """Runs :class:`ResidualPPOConfig` into a directory: ``history.csv`` / ``.png``, ``residual.json``, ``config.json``."""

    def __init__(self, config: ResidualPPOConfig, out: str | Path) -> None:
        self.config = config
        self.out = check_out_dir(out)
        self.start = ResidualWeights.load(config.warm_start) if config.warm_start else ResidualWeights()
        self.train, self.validation = real_windows(
            config.traces, config.loads, config.data_dir, config.validation_limit
        )
        self.scores = BaseScores(config.seed, config.workers)
        self.history: list[dict[str, Any]] = []
        self.best: tuple[float, int, ResidualWeights] | None = None  # (validation ratio, steps, weights)
        self._began = 0.0
        self._folder: Path | None = None

    def _env(self) -> gym.Env:
        from agents.search.residual_env import ResidualArenaEnv

        env = ResidualArenaEnv(self.train.config, max_jobs=self.config.max_jobs, clip=self.start.clip)
        return WindowEnv(env, list(self.train.workloads))

    def run(self, progress: bool = True) -> ResidualWeights:
        """Fine-tune; write the files; the best network on validation."""
        from stable_baselines3 import PPO
        from stable_baselines3.common.callbacks import CallbackList
        from stable_baselines3.common.vec_env import DummyVecEnv

        from agents.rl.residual_net import set_weights
        from arena_gym.harness.callbacks import ProgressBarCallback

        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(self.out / "config.json", {"code_version": code_version(), "seed": cfg.seed, "config": cfg})
        venv = DummyVecEnv([self._env] * cfg.n_envs)
        venv.seed(cfg.seed)
        model = PPO(
            ResidualPolicy,
            venv,
            learning_rate=cfg.learning_rate,
            n_steps=cfg.n_steps,
            batch_size=cfg.batch_size,
            n_epochs=cfg.n_epochs,
            gamma=cfg.gamma,
            ent_coef=0.0,
            policy_kwargs={"net_arch": list(cfg.net_arch), "log_std_init": cfg.log_std_init},
            seed=cfg.seed,
            device="cpu",
        )
        assert isinstance(model.policy, ResidualPolicy)
        set_weights(model.policy, self.start)
        self._began = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="residual-ppo-") as folder:
            self._folder = Path(folder)
            callbacks = CallbackList(
                [
                    CriticWarmup(cfg.critic_warmup),
                    Validation(self, cfg.eval_every),
                    ProgressBarCallback(cfg.steps, progress),
                ]
            )
            model.learn(total_timesteps=cfg.steps, callback=callbacks)
            if self.history[-1]["timesteps"] < model.num_timesteps:
                self.validate(model, model.num_timesteps)
        venv.close()
        assert self.best is not None  # validated at the start
        score, steps, weights = self.best
        final = weights.with_vector(
            weights.vector,
            {
                "method": "PPO on the residual action space (ResidualArenaEnv), mean actor",
                "warm_start": cfg.warm_start or "zero (arena-gittins-32-f)",
                "code_version": code_version(),
                "config": dataclasses.asdict(cfg),
                "timesteps": steps,
                "validation_geomean_ratio": score,
                "validation_windows": len(self.validation.workloads),
            },
        )
        final.save(self.out / "residual.json")
        from arena_gym.harness.eval_plots import plot_finetune

        plot_finetune({"PPO": pd.DataFrame(self.history)}, self.out / "history.png")
        return final

    def validate(self, model: Any, steps: int) -> float:
        """Score the mean actor against the base on the validation windows; record it (and keep the best)."""
        from agents.rl.residual_net import weights_of

        assert self._folder is not None
        weights = weights_of(model.policy, self.start)
        spec = f"residual:{weights.save(self._folder / f'step{steps}.json')}"
        valid = self.scores.log_ratios(self.validation, {"theta": spec})["theta"]
        score = float(np.exp(np.mean(valid)))
        if self.best is None or score < self.best[0]:
            self.best = (score, steps, weights)
        self.history.append(
            {
                "timesteps": steps,
                "validation_geomean_ratio": score,
                "validation_wins": int((valid < -1e-9).sum()),
                "validation_windows": len(valid),
                "log_std": float(model.policy.log_std.detach().mean()),
                "elapsed_s": time.perf_counter() - self._began,
                "weights": json.dumps([round(float(x), 6) for x in weights.vector]),
            }
        )
        pd.DataFrame(self.history).to_csv(self.out / "history.csv", index=False)
        log.info("validation @%d steps: %.4f of the base", steps, score)
        return score
