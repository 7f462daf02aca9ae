"""The built-in tune targets (:mod:`arena_gym.harness.tune`): the trainers of the learned agents."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.rl.config import TrainConfig
from arena_gym.harness.residual_train import ResidualTrainConfig, ResidualTrainer

if TYPE_CHECKING:
    import optuna

    from arena_gym.harness.tune import Report


class ResidualTarget:
    """The residual on Arena's Gittins order and urgency, trained by evolution strategies.

    Tuned: the perturbation scale, the step size, the log-multiplier bound and the number of
    antithetic pairs. The score is the best validation geometric-mean ratio to the base policy
    (what the trainer selects on), reported after every iteration.
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

    def objective(self, config: ResidualTrainConfig, out: Path, report: Report) -> float:
        """Train into ``out``; the best validation ratio."""
        weights = ResidualTrainer(config, out).run(progress=False, on_iteration=report)
        return float(weights.trained["validation_geomean_ratio"])

    def config_json(self, config: ResidualTrainConfig) -> dict[str, Any]:
        """The fields, as ``scripts/train_residual.py --config`` reads them."""
        return dataclasses.asdict(config)


class PPOTarget:
    """A stable-baselines3 agent (``arena-gym train``), sampled the way rl-zoo3 samples PPO.

    Tuned: the learning rate, rollout length, minibatch size, epochs, discount, GAE lambda,
    entropy bonus, clip range and network width. The score is the validation selection score
    (mean ratio of the agent's average JCT to Arena's, :func:`arena_gym.harness.callbacks.selection_score`),
    reported at every validation; the trial's value is the best of them (the model training keeps).
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
            raise ValueError("tune: the ppo target needs eval_every >= 1 (its trials are pruned on validation)")

    def objective(self, config: TrainConfig, out: Path, report: Report) -> float:
        """Train into ``out`` (no wandb, no progress bar); the best validation score."""
        from arena_gym.harness.train import train

        scores: list[float] = []

        def seen(steps: int, score: float) -> None:
            scores.append(score)
            report(steps, min(scores))

        run = dataclasses.replace(config, out_dir=str(out), wandb_mode="disabled", progress=False)
        train(run, on_validation=seen)
        return min(scores)

    def config_json(self, config: TrainConfig) -> dict[str, Any]:
        """``TrainConfig.to_json``: the file ``arena-gym train --config`` reads."""
        return config.to_json()


RESIDUAL = ResidualTarget()
PPO = PPOTarget()
