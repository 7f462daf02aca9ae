"""PPO on the residual action space, fine-tuning a warm start without losing it.

The env is :class:`agents.residual.env.ResidualArenaEnv` on the real traces' train
windows (the evolution strategies' windows, :func:`arena_gym.harness.trainers.windows.real_windows`),
the network :class:`agents.residual.network.ResidualPolicy`, whose mean actor *is* a residual
weights file: the run starts from one (``warm_start``; none = zero weights, the base policy
``arena-gittins-32-f``) and every validation scores the mean actor as a ``residual:`` policy
on the validation windows by the selection score (:mod:`arena_gym.harness.selection`: the
geometric-mean padded-JCT ratio to Arena). Two things keep the warm start: a critic warm-up
(``critic_warmup`` rollouts train the value head with the actor and its noise frozen, so the
first policy updates follow a critic that has seen the policy's returns), a low learning
rate, and a penalty on the KL from the warm start's policy with an adaptive coefficient
(``kl_target``; :class:`agents.residual.network.TeacherAnchor`). Returns relative to the base
policy's on the same window (``returns``) take the arrival sequence's variance out of them. The
network with the best selection score is kept. Each episode runs on its window's cluster. With
``ray`` (a Ray cluster's address) the ``n_envs`` rollout envs live in actors there
(:class:`~arena_gym.harness.trainers.ray_envs.RayVecEnv`) and the scored episodes (the base's per
window, the validations) are Ray tasks; otherwise the envs step in this process and the scored
episodes run in ``workers`` processes.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import pandas as pd
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv

from agents.residual.network import ResidualPolicy, TeacherAnchor
from agents.residual.priority import ResidualWeights
from arena_gym.harness.out_dirs import check_out_dir
from arena_gym.harness.selection import SELECTION_REFERENCE, geomean_ratio
from arena_gym.harness.trainers.trainer_method import TrainerMethod
from arena_gym.harness.trainers.windows import ResidualData, windows_and_scores
from arena_gym.outputs import code_version, write_json
from envs import EnvConfig, Workload

if TYPE_CHECKING:
    import optuna

    from arena_gym.harness.tune import Report

log = logging.getLogger(__name__)

#: The kind of results directory this trainer writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "train:residual-ppo"


#: How an episode's return is measured: minus the average JCT in hours, or relative to the base's on the window.
RETURNS = ("absolute", "relative")


@dataclass(frozen=True)
class ResidualPPOConfig(ResidualData):
    """One fine-tuning run: warm start, data, PPO's settings and the two guards.

    ``steps`` environment steps (decision points) over ``n_envs`` envs, PPO updates every
    ``n_steps`` per env; ``log_std_init`` is the log of the action noise (in log-multiplier
    units); ``critic_warmup`` rollouts update only the critic; ``kl_target`` > 0 adds a penalty
    ``kl_coef * KL(warm start || policy)`` to PPO's loss, its coefficient adapted after every
    rollout towards that KL per decision point (0: no penalty); ``returns`` ``relative`` makes
    every window's return relative to the base policy's on it (:class:`WindowEnv`), ``absolute``
    keeps minus the average JCT in hours; validation every ``eval_every``
    steps and at the start on ``validation_limit`` windows (0 = all), ``workers`` processes.
    """

    warm_start: str = ""
    steps: int = 40_000
    n_envs: int = 2
    n_steps: int = 1024
    batch_size: int = 256
    n_epochs: int = 5
    learning_rate: float = 3e-4
    gamma: float = 1.0
    log_std_init: float = -2.0
    critic_warmup: int = 0
    kl_target: float = 0.0
    kl_coef: float = 1.0
    returns: str = "absolute"
    net_arch: tuple[int, ...] = (64, 64)
    eval_every: int = 4096
    max_jobs: int = 64

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("steps", "n_envs", "n_steps", "n_epochs", "eval_every", "max_jobs"):
            if getattr(self, name) < 1:
                raise ValueError(f"ResidualPPOConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.batch_size < 2 or self.critic_warmup < 0:
            raise ValueError("ResidualPPOConfig: batch_size must be >= 2, critic_warmup and validation_limit >= 0")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"ResidualPPOConfig.learning_rate must be finite and > 0, got {self.learning_rate}")
        if not (
            self.kl_target >= 0 and math.isfinite(self.kl_target) and self.kl_coef > 0 and math.isfinite(self.kl_coef)
        ):
            raise ValueError(
                f"ResidualPPOConfig: kl_target must be finite and >= 0, kl_coef finite and > 0; got "
                f"{self.kl_target}, {self.kl_coef}"
            )
        if self.returns not in RETURNS:
            raise ValueError(f"ResidualPPOConfig.returns must be one of {', '.join(RETURNS)}, got {self.returns!r}")
        if not 0 < self.gamma <= 1 or not math.isfinite(self.log_std_init):
            raise ValueError("ResidualPPOConfig: gamma must be in (0, 1], log_std_init finite")
        if not self.net_arch or min(self.net_arch) < 1:
            raise ValueError(f"ResidualPPOConfig.net_arch needs layer sizes >= 1, got {self.net_arch}")


def window_env(
    config: EnvConfig, max_jobs: int, clip: float, workloads: list[Workload], scales: list[float] | None
) -> gym.Env:
    """The residual env on ``config``'s clusters, replaying ``workloads`` (:class:`WindowEnv`; a picklable factory)."""
    from agents.residual.env import ResidualArenaEnv

    return WindowEnv(ResidualArenaEnv(config, max_jobs=max_jobs, clip=clip), workloads, scales)


class WindowEnv(gym.Wrapper):
    """Each episode replays one of ``workloads`` on its cluster, drawn at random (the env's seed).

    With ``scales`` (the base policy's average JCT in hours on each workload) the returns are
    relative to the base's on the same window: every reward is divided by the window's scale and
    1 is added at the end, so an episode's return is 1 - its average JCT / the base's, and the
    spread of difficulty between arrival sequences leaves the returns.
    """

    def __init__(self, env: gym.Env, workloads: list[Workload], scales: list[float] | None = None) -> None:
        super().__init__(env)
        if scales is not None and len(scales) != len(workloads):
            raise ValueError(f"WindowEnv: {len(scales)} scales for {len(workloads)} workloads")
        self.workloads, self.scales = workloads, scales
        self._draw = np.random.default_rng()
        self._scale: float | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        """Reset on a drawn window."""
        if seed is not None:
            self._draw = np.random.default_rng(seed)
        index = int(self._draw.integers(len(self.workloads)))
        self._scale = self.scales[index] if self.scales is not None else None
        window = self.workloads[index]
        return self.env.reset(seed=seed, options={**(options or {}), "jobs": window.jobs, "cluster": window.cluster})

    def step(self, action: Any) -> Any:
        """The env's step, its reward relative to the window's base when scaled."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._scale is not None:
            reward = float(reward) / self._scale + (1.0 if terminated or truncated else 0.0)
        return obs, reward, terminated, truncated, info


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


class KLControl(BaseCallback):
    """After every rollout: the mean KL from the warm start on its decision points, and the anchor's adapted coefficient.

    The coefficient adapts only to a rollout of an actor that an update has moved: not to the
    first ``frozen + 1`` rollouts (the critic warm-up's ``frozen`` updates leave the actor at the
    warm start, so their KL is 0 and would only halve the coefficient before the actor moves).
    """

    def __init__(self, frozen: int) -> None:
        super().__init__()
        self.kl = math.nan
        self.frozen, self.seen = frozen, 0

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        import torch as th

        policy = self.model.policy
        assert isinstance(policy, ResidualPolicy) and policy.anchor is not None
        model = self.model
        assert isinstance(model, OnPolicyAlgorithm)
        stored: dict[str, np.ndarray] = model.rollout_buffer.observations  # type: ignore[assignment]  # a Dict buffer
        obs = {k: th.as_tensor(v.reshape(-1, *v.shape[2:])) for k, v in stored.items()}
        with th.no_grad():
            self.kl = float(policy.teacher_kl(obs).mean())
        self.seen += 1
        if self.seen > self.frozen + 1:
            policy.anchor.adapt(self.kl)
        log.debug("KL from the warm start %.4f; coefficient now %.3g", self.kl, policy.anchor.coef)


class Validation(BaseCallback):
    """At the start and every ``every`` steps: the mean actor's selection score on validation.

    A validation runs when a rollout starts, so the actor it scores has had the update of every
    step it counts (a step's hook runs before its rollout's update); the trainer validates the
    last update after ``learn``.
    """

    def __init__(self, trainer: ResidualPPOTrainer, every: int) -> None:
        super().__init__()
        self.trainer, self.every, self.next = trainer, every, 0

    def _on_training_start(self) -> None:
        self.trainer.validate(self.model, 0)
        self.next = self.every

    def _on_rollout_start(self) -> None:
        if self.num_timesteps >= self.next:
            self.trainer.validate(self.model, self.num_timesteps)
            self.next = (self.num_timesteps // self.every + 1) * self.every

    def _on_step(self) -> bool:
        return True


class ResidualPPOTrainer:
    """Runs :class:`ResidualPPOConfig` into a directory: ``history.csv`` / ``.png``, ``residual.json``, ``config.json``."""

    def __init__(self, config: ResidualPPOConfig, out: str | Path) -> None:
        self.config = config
        self.out = check_out_dir(out, kind=KIND)
        self.start = ResidualWeights.load(config.warm_start) if config.warm_start else ResidualWeights()
        self.train, self.validation, self.scores = windows_and_scores(config)
        self.history: list[dict[str, Any]] = []
        self.best: tuple[float, int, ResidualWeights] | None = None  # (validation ratio, steps, weights)
        self._began = 0.0
        self._folder: Path | None = None
        self._kl: KLControl | None = None
        self._scales: list[float] | None = None
        self._progress = False

    def _envs(self) -> VecEnv:
        """``n_envs`` window envs: in this process, or each in an actor on the Ray cluster at ``ray``."""
        cfg = self.config
        first, *others = cfg.clusters
        config = self.train.config.replace(cluster=first, cluster_variants=tuple(others))
        make = functools.partial(
            window_env, config, cfg.max_jobs, self.start.clip, list(self.train.workloads), self._scales
        )
        if cfg.ray is not None:
            from arena_gym.harness.trainers.ray_envs import RayVecEnv

            return RayVecEnv([make] * cfg.n_envs, cfg.ray)
        return DummyVecEnv([make] * cfg.n_envs)

    def run(self, progress: bool = True) -> ResidualWeights:
        """Fine-tune; write the files; the best network on validation (``progress``: bars of the steps and validations)."""
        from stable_baselines3 import PPO
        from stable_baselines3.common.callbacks import CallbackList

        from agents.residual.network import set_weights
        from arena_gym.harness.callbacks import ProgressBarCallback

        cfg = self.config
        self._progress = progress
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(
            self.out / "config.json", {"kind": KIND, "code_version": code_version(), "seed": cfg.seed, "config": cfg}
        )
        if cfg.returns == "relative":
            self._scales = self.scores.mean_jct_h(self.train, progress=progress)
        venv = self._envs()
        venv.seed(cfg.seed)
        model = PPO(
            ResidualPolicy,
            venv,
            learning_rate=cfg.learning_rate,
            n_steps=cfg.n_steps,
            batch_size=cfg.batch_size,
            n_epochs=cfg.n_epochs,
            gamma=cfg.gamma,
            ent_coef=1.0 if cfg.kl_target else 0.0,  # with an anchor the entropy term is the KL penalty
            policy_kwargs={"net_arch": list(cfg.net_arch), "log_std_init": cfg.log_std_init},
            seed=cfg.seed,
            device="cpu",
        )
        assert isinstance(model.policy, ResidualPolicy)
        set_weights(model.policy, self.start)
        if cfg.kl_target:
            model.policy.anchor = TeacherAnchor(self.start, cfg.log_std_init, cfg.kl_coef, cfg.kl_target)
            self._kl = KLControl(cfg.critic_warmup)
        self._began = time.perf_counter()
        try:  # the envs are closed (on Ray: their actors ended) however the run ends
            with tempfile.TemporaryDirectory(prefix="candidates-", dir=self.out) as folder:
                self._folder = Path(folder)
                callbacks = CallbackList(
                    [
                        CriticWarmup(cfg.critic_warmup),
                        *([self._kl] if self._kl is not None else []),
                        Validation(self, cfg.eval_every),
                        ProgressBarCallback(cfg.steps, progress),
                    ]
                )
                model.learn(total_timesteps=cfg.steps, callback=callbacks)
                if self.history[-1]["timesteps"] < model.num_timesteps:
                    self.validate(model, model.num_timesteps)
        finally:
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
        """Score the mean actor on the validation windows (its selection score); record it (and keep the best)."""
        from agents.residual.network import weights_of

        assert self._folder is not None
        weights = weights_of(model.policy, self.start)
        spec = f"residual:{weights.save(self._folder / f'step{steps}.json')}"
        valid = self.scores.log_ratios(self.validation, {"theta": spec}, SELECTION_REFERENCE, self._progress)["theta"]
        score = geomean_ratio(valid)
        if self.best is None or score < self.best[0]:
            self.best = (score, steps, weights)
        self.history.append(
            {
                "timesteps": steps,
                "validation_geomean_ratio": score,
                "validation_wins": int((valid < -1e-9).sum()),
                "validation_windows": len(valid),
                "log_std": float(model.policy.log_std.detach().mean()),
                "kl": self._kl.kl if self._kl is not None else math.nan,
                "kl_coef": model.policy.anchor.coef if model.policy.anchor is not None else math.nan,
                "elapsed_s": time.perf_counter() - self._began,
                "weights": json.dumps([round(float(x), 6) for x in weights.vector]),
            }
        )
        pd.DataFrame(self.history).to_csv(self.out / "history.csv", index=False)
        log.info("validation @%d steps: %.4f of %s", steps, score, SELECTION_REFERENCE)
        return score


class ResidualPPOMethod(TrainerMethod):
    """PPO fine-tuning of a residual from a warm start (none: zero weights, the base policy).

    Tuned: the learning rate, the initial log standard deviation, the KL target and the critic
    warm-up; the best selection score is reported once, at the end.
    """

    config_type = ResidualPPOConfig
    trainer = ResidualPPOTrainer

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """learning_rate log-uniform, log_std_init uniform, kl_target and critic_warmup from short lists."""
        return {
            "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True),
            "log_std_init": trial.suggest_float("log_std_init", -3.0, -1.0),
            "kl_target": trial.suggest_categorical("kl_target", [0.0, 0.01, 0.03]),
            "critic_warmup": trial.suggest_categorical("critic_warmup", [0, 2, 4]),
        }

    def objective(self, config: ResidualPPOConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out``; the best selection score."""
        weights = ResidualPPOTrainer(config, out).run(progress=progress)
        score = float(weights.trained["validation_geomean_ratio"])
        report(int(weights.trained["timesteps"]), score)
        return score


#: ``arena-gym train --method`` / ``tune --target`` residual-ppo: see :data:`arena_gym.harness.trainers.METHODS`.
RESIDUAL_PPO = ResidualPPOMethod()
