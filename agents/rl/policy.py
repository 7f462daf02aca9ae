"""``sb3:PATH``: a saved model as a Policy, through the same observation encoder and action codec as training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from agents.rl.algos import greedy_action
from agents.rl.artifact import load_model
from envs import ObservationPolicy


def _checked_predict(model: Any, path: Path) -> Any:
    spaces = model.observation_space.spaces

    def predict(obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        for key, space in spaces.items():
            if key not in obs or obs[key].shape != space.shape:
                got = obs[key].shape if key in obs else "nothing"
                raise ValueError(
                    f"model {path} expects observation {key!r} of shape {space.shape}, got {got}: "
                    "it was trained for another cluster or slot count"
                )
        return greedy_action(model, obs, mask)

    return predict


def load_sb3_policy(path: str, rng: np.random.Generator | None = None) -> ObservationPolicy:
    """Load a model saved by ``arena-gym train`` as a deterministic Policy named ``sb3:PATH``.

    The model zip carries its algorithm and the EnvConfig it was trained with (see
    :mod:`agents.rl.artifact`); decisions take the best valid action at every sub-step, so
    ``rng`` is accepted for the registry's sake and not used. A missing or corrupt file gives
    a one-line ValueError naming it.
    """
    del rng  # deterministic policy
    model, info = load_model(path)
    return ObservationPolicy(
        f"sb3:{path}", _checked_predict(model, Path(path)), info.env_config, info.env_config.ap_search
    )
