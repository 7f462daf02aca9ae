"""The built-in tune targets (:mod:`arena_gym.harness.tune`): the trainers of the learned agents."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

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

    def sample(self, trial: optuna.Trial) -> dict[str, Any]:
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


RESIDUAL = ResidualTarget()
