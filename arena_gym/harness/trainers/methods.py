"""The training methods of the learned agents: one per ``arena-gym train --method``, each a target of ``arena-gym tune``.

A method has a config dataclass, runs into an output directory and returns its best
validation selection score (:mod:`arena_gym.harness.selection`: the geometric-mean padded-JCT
ratio to Arena, lower is better), which a study minimises. :data:`arena_gym.harness.trainers.METHODS`
names them:

- ``sb3``: a stable-baselines3 agent on the slot action space (:mod:`arena_gym.harness.trainers.sb3`);
- ``es``: the residual on Arena's Gittins order by evolution strategies (:mod:`~arena_gym.harness.trainers.es`);
- ``residual-ppo``: PPO fine-tuning of a residual (:mod:`~arena_gym.harness.trainers.residual_ppo`);
- ``expert-iteration``: DAgger of a slot agent with a search teacher (:mod:`arena_gym.harness.trainers.expert_iteration`);
- ``policy-iteration``: the residual improved by a lookahead over its perturbations and distilled back
  (:mod:`~arena_gym.harness.trainers.policy_iteration`).
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.rl.config import TrainConfig
from arena_gym.harness.trainers.es import ResidualTrainConfig, ResidualTrainer
from arena_gym.harness.trainers.expert_iteration import ExpertIteration, ExpertIterationConfig
from arena_gym.harness.trainers.policy_iteration import PolicyIteration, PolicyIterationConfig
from arena_gym.harness.trainers.residual_ppo import ResidualPPOConfig, ResidualPPOTrainer

if TYPE_CHECKING:
    import optuna

    from arena_gym.harness.tune import Report


def _config_fields(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


class ESMethod:
    """The residual on Arena's Gittins order and urgency, trained by evolution strategies.

    Tuned: the perturbation scale, the step size, the log-multiplier bound and the number of
    antithetic pairs; the best selection score so far is reported after every iteration.
    """

    config_type = ResidualTrainConfig

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """sigma and learning_rate log-uniform, clip uniform, pairs 3..6."""
        return {
            "sigma": trial.suggest_float("sigma", 0.05, 1.0, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.02, 1.0, log=True),
            "clip": trial.suggest_float("clip", 1.0, 5.0),
            "pairs": trial.suggest_int("pairs", 3, 6),
        }

    def check(self, config: ResidualTrainConfig) -> None:
        """Load the train and validation windows once (a missing data folder or trace fails here)."""
        with tempfile.TemporaryDirectory(prefix="tune-check-") as folder:
            ResidualTrainer(config, Path(folder) / "run")

    def objective(self, config: ResidualTrainConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out``; the best selection score."""
        weights = ResidualTrainer(config, out).run(progress=progress, on_iteration=report)
        return float(weights.trained["validation_geomean_ratio"])

    def config_json(self, config: ResidualTrainConfig) -> dict[str, Any]:
        """The fields, as ``arena-gym train --method es --config`` reads them."""
        return _config_fields(config)


class ResidualPPOMethod:
    """PPO fine-tuning of a residual from a warm start (none: zero weights, the base policy).

    Tuned: the learning rate, the initial log standard deviation, the KL target and the critic
    warm-up; the best selection score is reported once, at the end.
    """

    config_type = ResidualPPOConfig

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """learning_rate log-uniform, log_std_init uniform, kl_target and critic_warmup from short lists."""
        return {
            "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True),
            "log_std_init": trial.suggest_float("log_std_init", -3.0, -1.0),
            "kl_target": trial.suggest_categorical("kl_target", [0.0, 0.01, 0.03]),
            "critic_warmup": trial.suggest_categorical("critic_warmup", [0, 2, 4]),
        }

    def check(self, config: ResidualPPOConfig) -> None:
        """Load the windows and the warm start once (a missing data folder or file fails here)."""
        with tempfile.TemporaryDirectory(prefix="tune-check-") as folder:
            ResidualPPOTrainer(config, Path(folder) / "run")

    def objective(self, config: ResidualPPOConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out``; the best selection score."""
        weights = ResidualPPOTrainer(config, out).run(progress=progress)
        score = float(weights.trained["validation_geomean_ratio"])
        report(int(weights.trained["timesteps"]), score)
        return score

    def config_json(self, config: ResidualPPOConfig) -> dict[str, Any]:
        """The fields, as ``arena-gym train --method residual-ppo --config`` reads them."""
        return _config_fields(config)


class PolicyIterationMethod:
    """Policy iteration of the residual: a lookahead over perturbed residuals, distilled back into it.

    Tuned: the perturbation scale, the ridge and the number of directions; the best selection
    score is reported once, at the end.
    """

    config_type = PolicyIterationConfig

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """sigma and ridge log-uniform, pairs 1..4."""
        return {
            "sigma": trial.suggest_float("sigma", 0.05, 1.0, log=True),
            "ridge": trial.suggest_float("ridge", 0.01, 10.0, log=True),
            "pairs": trial.suggest_int("pairs", 1, 4),
        }

    def check(self, config: PolicyIterationConfig) -> None:
        """Load the windows and the warm start once (a missing data folder or file fails here)."""
        with tempfile.TemporaryDirectory(prefix="tune-check-") as folder:
            PolicyIteration(config, Path(folder) / "run")

    def objective(self, config: PolicyIterationConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out``; the best round's selection score."""
        weights = PolicyIteration(config, out).run(progress=progress)
        score = float(weights.trained["validation_geomean_ratio"])
        report(int(weights.trained["round"]), score)
        return score

    def config_json(self, config: PolicyIterationConfig) -> dict[str, Any]:
        """The fields, as ``arena-gym train --method policy-iteration --config`` reads them."""
        return _config_fields(config)


class ExpertIterationMethod:
    """Expert iteration (DAgger) of a slot agent from a warm start, with a search policy as teacher.

    Tuned: the mixture's decay, the epochs and the learning rate of each refit; the best
    selection score is reported once, at the end.
    """

    config_type = ExpertIterationConfig

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """beta uniform, epochs from a list, learning_rate log-uniform."""
        return {
            "beta": trial.suggest_float("beta", 0.3, 0.9),
            "epochs": trial.suggest_categorical("epochs", [5, 10, 20]),
            "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True),
        }

    def check(self, config: ExpertIterationConfig) -> None:
        """Read the warm start and build the teacher once (a missing model or unknown teacher fails here)."""
        with tempfile.TemporaryDirectory(prefix="tune-check-") as folder:
            ExpertIteration(config, Path(folder) / "run")

    def objective(self, config: ExpertIterationConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out``; the best round's selection score."""
        best = ExpertIteration(config, out).run(progress=progress)
        report(int(best["round"]), float(best["validation_score"]))
        return float(best["validation_score"])

    def config_json(self, config: ExpertIterationConfig) -> dict[str, Any]:
        """The fields, as ``arena-gym train --method expert-iteration --config`` reads them."""
        return _config_fields(config)


class SB3Method:
    """A stable-baselines3 agent (``arena-gym train``), sampled the way rl-zoo3 samples PPO.

    Tuned: the learning rate, rollout length, minibatch size, epochs, discount, GAE lambda,
    entropy bonus, clip range and network width. The selection score is reported at every
    validation; the trial's value is the best of them (the model training keeps).
    """

    config_type = TrainConfig

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """rl-zoo3's PPO space, narrowed to what one CPU runs."""
        n_steps = trial.suggest_categorical("n_steps", [128, 256, 512, 1024])
        return {
            "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True),
            "n_steps": n_steps,
            "batch_size": min(trial.suggest_categorical("batch_size", [32, 64, 128, 256]), n_steps),
            "n_epochs": trial.suggest_categorical("n_epochs", [3, 5, 10, 20]),
            "gamma": trial.suggest_categorical("gamma", [0.95, 0.98, 0.99, 0.995, 0.999]),
            "gae_lambda": trial.suggest_categorical("gae_lambda", [0.8, 0.9, 0.95, 0.98, 1.0]),
            "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.05, log=True),
            "clip_range": trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3, 0.4]),
            "net_arch": {"small": (64, 64), "medium": (128, 128), "large": (256, 256)}[
                trial.suggest_categorical("net_arch", ["small", "medium", "large"])
            ],
        }

    def check(self, config: TrainConfig) -> None:
        """The env and its overrides (a bad one fails here); validation must run for pruning to see a score."""
        from agents.rl.config import TRAIN_SPLIT
        from agents.rl.env_factory import env_config

        env_config(config.env_id, config.env_overrides_for(TRAIN_SPLIT))
        if config.eval_every < 1:
            raise ValueError("tune: the sb3 method needs eval_every >= 1 (its trials are pruned on validation)")

    def objective(self, config: TrainConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out`` (no wandb); the best validation score."""
        from arena_gym.harness.trainers.sb3 import train

        scores: list[float] = []

        def seen(steps: int, score: float) -> None:
            scores.append(score)
            report(steps, min(scores))

        run = dataclasses.replace(config, out_dir=str(out), wandb_mode="disabled", progress=progress)
        train(run, on_validation=seen)
        return min(scores)

    def config_json(self, config: TrainConfig) -> dict[str, Any]:
        """``TrainConfig.to_json``: the file ``arena-gym train --config`` reads."""
        return config.to_json()


SB3 = SB3Method()
ES = ESMethod()
RESIDUAL_PPO = ResidualPPOMethod()
EXPERT_ITERATION = ExpertIterationMethod()
POLICY_ITERATION = PolicyIterationMethod()
