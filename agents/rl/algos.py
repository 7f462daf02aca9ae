"""The learning algorithms: a registry of stable-baselines3 / sb3-contrib classes and how to query them.

Each entry names its class as a ``"module:Class"`` string (resolved on use), the TrainConfig
hyperparameters it accepts, its own defaults, and its *family*, which says how to read action
scores out of its network: actor-critic policies give the logits of their action
distribution, Q-networks their Q-values. Masked greedy action selection and behaviour cloning
both work on these scores, so training, evaluation and deployment pick actions the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from arena_gym.registry import resolve

if TYPE_CHECKING:
    import torch as th

#: Score given to masked actions before an argmax or a softmax (finite, so no NaN can appear).
MASKED_SCORE = -1e8


@dataclass(frozen=True)
class AlgoSpec:
    """One algorithm: class target, accepted hyperparameters, defaults and score family."""

    target: str
    family: str
    params: tuple[str, ...]
    defaults: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""

    def cls(self) -> Any:
        """The algorithm class (imported on first use)."""
        return resolve(self.target)


_PPO_PARAMS = ("learning_rate", "n_steps", "batch_size", "n_epochs", "gamma", "gae_lambda", "ent_coef", "clip_range")

#: Algorithm name -> spec.
ALGOS: Mapping[str, AlgoSpec] = MappingProxyType(
    {
        "maskable_ppo": AlgoSpec(
            "sb3_contrib:MaskablePPO",
            "actor_critic",
            _PPO_PARAMS,
            description="PPO that samples only valid actions (sb3-contrib)",
        ),
        "ppo": AlgoSpec(
            "stable_baselines3:PPO",
            "actor_critic",
            _PPO_PARAMS,
            description="PPO without masks (invalid actions are no-ops with a penalty)",
        ),
        "dqn": AlgoSpec(
            "stable_baselines3:DQN",
            "q",
            ("learning_rate", "batch_size", "gamma"),
            {
                "buffer_size": 50_000,
                "learning_starts": 1_000,
                "exploration_fraction": 0.2,
                "target_update_interval": 1_000,
                "train_freq": 4,
            },
            "deep Q-learning (masked greedy action when deployed)",
        ),
    }
)


#: Policy architecture name -> its class for MaskablePPO (``module:Class``; None: the algorithm's own
#: ``MultiInputPolicy``, one MLP over the flattened observation). ``slots`` scores every job slot
#: with one shared network (:mod:`agents.rl.networks`).
POLICIES: Mapping[str, str | None] = MappingProxyType({"mlp": None, "slots": "agents.rl.networks:SlotPolicy"})


def policy_class(algo: str, policy: str) -> Any:
    """The policy class of an architecture for an algorithm; ValueError for unknown or unsupported pairs."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy architecture {policy!r}; valid: {', '.join(POLICIES)}")
    target = POLICIES[policy]
    if target is None:
        return algo_spec(algo).cls().policy_aliases["MultiInputPolicy"]
    if algo != "maskable_ppo":
        raise ValueError(f"policy architecture {policy!r} works with maskable_ppo only, not {algo}")
    return resolve(target)


#: Algorithm name -> score family ("actor_critic" or "q").
ALGO_FAMILIES: Mapping[str, str] = MappingProxyType({name: spec.family for name, spec in ALGOS.items()})


def algo_spec(name: str) -> AlgoSpec:
    """The spec of a registered algorithm; a clear error for unknown names."""
    spec = ALGOS.get(name)
    if spec is None:
        raise ValueError(f"unknown algorithm {name!r}; valid: {', '.join(sorted(ALGOS))}")
    return spec


def algo_name(model: Any) -> str:
    """The registry name of a model's algorithm class (inverse of :func:`algo_spec`)."""
    target = type(model).__name__
    for name, spec in ALGOS.items():
        if spec.target.rpartition(":")[2] == target:
            return name
    raise ValueError(f"model class {target} is not a registered algorithm ({', '.join(sorted(ALGOS))})")


def _actor_critic_scores(policy: Any, obs: Any) -> th.Tensor:
    return policy.get_distribution(obs).distribution.logits


def _q_scores(policy: Any, obs: Any) -> th.Tensor:
    return policy.q_net(obs)


_SCORES: Mapping[str, Callable[[Any, Any], th.Tensor]] = MappingProxyType(
    {"actor_critic": _actor_critic_scores, "q": _q_scores}
)


def action_scores(model: Any, obs: Any) -> th.Tensor:
    """Per-action scores (logits or Q-values), shape (batch, n_actions), for a batch of torch observations."""
    return _SCORES[algo_spec(algo_name(model)).family](model.policy, obs)


def masked_scores(scores: th.Tensor, masks: th.Tensor) -> th.Tensor:
    """Scores with invalid actions pushed to :data:`MASKED_SCORE`."""
    import torch as th

    return th.where(masks, scores, th.full_like(scores, MASKED_SCORE))


def greedy_action(model: Any, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
    """The best valid action for one observation (the deterministic policy used for deployment)."""
    import torch as th

    obs_tensor, _ = model.policy.obs_to_tensor(obs)
    with th.no_grad():
        scores = action_scores(model, obs_tensor)[0]
    valid = th.as_tensor(np.asarray(mask, dtype=bool))
    if not bool(valid.any()):
        raise ValueError("action mask has no valid action")
    return int(th.argmax(masked_scores(scores, valid)).item())
