"""Behaviour cloning: a warm start that imitates a heuristic's decisions before RL fine-tuning.

Registered heuristics (the Arena heuristic by default; several share the samples evenly, e.g.
Arena and Tiresias) play episodes through the env with :class:`envs.HeuristicAgent`, which
replays each of their Decisions as codec sub-actions. Every (observation, mask, expert action)
is kept, together with the discounted return from that step.
The policy network is then fitted by masked cross-entropy on the expert actions, and its value
head by regression on the returns, so that PPO starts from the heuristic with a matching critic.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
import torch.nn.functional as F

from agents.rl.algos import action_scores, algo_name, algo_spec, masked_scores
from arena_gym.protocols import Policy
from arena_gym.registry import make_policy
from envs import HeuristicAgent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BCConfig:
    """Behaviour-cloning settings: expert policy names, samples to collect (split evenly), fitting schedule."""

    experts: tuple[str, ...] = ("arena",)
    samples: int = 5_000
    epochs: int = 20
    batch_size: int = 256
    learning_rate: float = 1e-3
    value_coef: float = 0.5
    gamma: float = 0.99
    holdout: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.experts:
            raise ValueError("BCConfig: name at least one expert")
        if self.samples < 2 or self.epochs < 1 or self.batch_size < 1:
            raise ValueError(
                f"BCConfig: need samples >= 2, epochs >= 1, batch_size >= 1; got "
                f"{self.samples}, {self.epochs}, {self.batch_size}"
            )
        if not 0.0 <= self.holdout < 1.0 or not 0.0 < self.gamma <= 1.0 or self.learning_rate <= 0:
            raise ValueError(
                f"BCConfig: need 0 <= holdout < 1, 0 < gamma <= 1, learning_rate > 0; got "
                f"{self.holdout}, {self.gamma}, {self.learning_rate}"
            )


@dataclass(frozen=True)
class ExpertData:
    """Expert transitions: stacked observations, masks, actions and discounted returns."""

    obs: dict[str, np.ndarray]
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    episodes: int

    def __len__(self) -> int:
        return len(self.actions)

    def subset(self, index: np.ndarray) -> ExpertData:
        """The transitions at ``index``."""
        return ExpertData(
            {k: v[index] for k, v in self.obs.items()},
            self.masks[index],
            self.actions[index],
            self.returns[index],
            self.episodes,
        )

    @staticmethod
    def concat(parts: list[ExpertData]) -> ExpertData:
        """The transitions of several collections, in order."""
        return ExpertData(
            {k: np.concatenate([p.obs[k] for p in parts]) for k in parts[0].obs},
            np.concatenate([p.masks for p in parts]),
            np.concatenate([p.actions for p in parts]),
            np.concatenate([p.returns for p in parts]),
            sum(p.episodes for p in parts),
        )


@dataclass(frozen=True)
class BCResult:
    """What cloning achieved: cross-entropy before/after and action agreement on train and held-out data."""

    samples: int
    episodes: int
    initial_loss: float
    final_loss: float
    train_agreement: float
    holdout_loss: float
    holdout_agreement: float


def discounted(rewards: list[float], gamma: float) -> list[float]:
    """The discounted return from every step of an episode's rewards."""
    out, acc = [0.0] * len(rewards), 0.0
    for i in range(len(rewards) - 1, -1, -1):
        acc = rewards[i] + gamma * acc
        out[i] = acc
    return out


def collect_expert_data(env: gym.Env, expert: Policy, samples: int, seed: int, gamma: float = 0.99) -> ExpertData:
    """Play ``expert`` through ``env`` from ``reset(seed=seed)`` until ``samples`` valid expert actions.

    Episodes are played to their end (so every return is complete); later episodes continue
    the env's generator, i.e. draw fresh workloads. Expert actions the env masks (a heuristic
    decision the codec cannot express exactly) are played but not kept.
    """
    agent = HeuristicAgent(expert, env)
    base: Any = env.unwrapped
    obs_rows: list[dict[str, np.ndarray]] = []
    masks: list[np.ndarray] = []
    actions: list[int] = []
    returns: list[float] = []
    episodes, dropped = 0, 0
    obs, _ = env.reset(seed=seed)
    while len(actions) < samples:
        agent.reset()
        kept: list[int] = []
        rewards: list[float] = []
        done = False
        while not done:
            mask = base.action_masks()
            action = agent.act()
            if mask[action]:
                kept.append(len(rewards))
                obs_rows.append(obs)
                masks.append(mask)
                actions.append(action)
            else:
                dropped += 1
            obs, reward, terminated, truncated, _ = env.step(action)
            rewards.append(float(reward))
            done = terminated or truncated
        episode_returns = discounted(rewards, gamma)
        returns.extend(episode_returns[i] for i in kept)
        episodes += 1
        obs, _ = env.reset()
    if dropped:
        log.info(
            "expert %s: %d of %d actions were masked by the env and not kept",
            expert.name,
            dropped,
            dropped + len(actions),
        )
    stacked = {k: np.stack([o[k] for o in obs_rows]) for k in obs_rows[0]}
    return ExpertData(
        stacked, np.stack(masks), np.asarray(actions, dtype=np.int64), np.asarray(returns, dtype=np.float32), episodes
    )


def _tensors(policy: Any, data: ExpertData) -> tuple[dict[str, th.Tensor], th.Tensor, th.Tensor, th.Tensor]:
    device = policy.device
    obs = {k: th.as_tensor(v, device=device) for k, v in data.obs.items()}
    return (
        obs,
        th.as_tensor(data.masks, device=device),
        th.as_tensor(data.actions, device=device),
        th.as_tensor(data.returns, device=device),
    )


def imitation_loss(model: Any, data: ExpertData) -> tuple[float, float]:
    """(masked cross-entropy, action agreement) of the model's greedy choice against the expert on ``data``."""
    obs, masks, actions, _ = _tensors(model.policy, data)
    with th.no_grad():
        logits = masked_scores(action_scores(model, obs), masks)
        loss = F.cross_entropy(logits, actions).item()
        agreement = (logits.argmax(dim=1) == actions).float().mean().item()
    return float(loss), float(agreement)


def behaviour_clone(model: Any, data: ExpertData, config: BCConfig) -> BCResult:
    """Fit an actor-critic model's policy (masked cross-entropy) and value head (returns) to ``data``."""
    spec = algo_spec(algo_name(model))
    if spec.family != "actor_critic":
        raise ValueError(
            f"behaviour cloning needs an actor-critic algorithm (maskable_ppo, ppo), not {algo_name(model)}"
        )
    if len(data) < 2:
        raise ValueError(f"behaviour cloning needs at least 2 expert samples, got {len(data)}")
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, 7]))
    order = rng.permutation(len(data))
    n_hold = int(round(config.holdout * len(data)))
    hold, train = data.subset(order[:n_hold]), data.subset(order[n_hold:])
    policy = model.policy
    policy.set_training_mode(True)
    optimizer = th.optim.Adam(policy.parameters(), lr=config.learning_rate)
    obs, masks, actions, returns = _tensors(policy, train)
    initial_loss, _ = imitation_loss(model, train)
    for epoch in range(config.epochs):
        perm = th.as_tensor(rng.permutation(len(train)))
        for start in range(0, len(train), config.batch_size):
            idx = perm[start : start + config.batch_size]
            batch = {k: v[idx] for k, v in obs.items()}
            logits = masked_scores(action_scores(model, batch), masks[idx])
            values = policy.predict_values(batch).flatten()
            loss = F.cross_entropy(logits, actions[idx]) + config.value_coef * F.mse_loss(values, returns[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        log.debug("bc epoch %d: loss %.4f", epoch, loss.item())
    policy.set_training_mode(False)
    final_loss, train_agreement = imitation_loss(model, train)
    hold_loss, hold_agreement = imitation_loss(model, hold) if len(hold) else (float("nan"), float("nan"))
    result = BCResult(len(data), data.episodes, initial_loss, final_loss, train_agreement, hold_loss, hold_agreement)
    log.info(
        "behaviour cloning: %d samples, cross-entropy %.3f -> %.3f, held-out agreement %.1f%%",
        len(data),
        initial_loss,
        final_loss,
        100 * hold_agreement,
    )
    return result


def warm_start(model: Any, env: gym.Env, config: BCConfig) -> BCResult:
    """Collect expert data on ``env`` from each of ``config.experts`` (samples split evenly) and clone it into ``model``."""
    share = max(2, config.samples // len(config.experts))
    parts = []
    for i, name in enumerate(config.experts):
        expert = make_policy(name, config.seed)
        parts.append(collect_expert_data(env, expert, share, config.seed + 1000 * i, config.gamma))
    return behaviour_clone(model, ExpertData.concat(parts), config)
