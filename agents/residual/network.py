"""An SB3 actor-critic for the residual action space (:class:`agents.residual.env.ResidualArenaEnv`).

The actor is the residual network itself: one linear map, shared by every job row, from the
job's :data:`agents.residual.priority.RESIDUAL_FEATURES` to its two log-multipliers (the Gaussian's
mean; rows without a job give 0). So a :class:`agents.residual.priority.ResidualWeights` file is a
warm start (:func:`set_weights`), and the trained mean actor is one again (:func:`weights_of`):
a ``residual:PATH`` policy for ``evaluate``, ``simulate`` or ``deploy``. The critic is an MLP over
the mean and maximum of the listed jobs' features and their count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from agents.residual.priority import RESIDUAL_FEATURES, ResidualWeights


class ResidualExtractor(BaseFeaturesExtractor):
    """``jobs`` flattened, then ``present``: the layout :class:`ResidualNetwork` reads."""

    def __init__(self, observation_space: gym.spaces.Dict) -> None:
        if set(observation_space.spaces) != {"jobs", "present"}:
            raise ValueError(f"the residual policy needs jobs and present, got {sorted(observation_space.spaces)}")
        rows, width = observation_space["jobs"].shape
        super().__init__(observation_space, features_dim=rows * (width + 1))

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        """``(batch, rows * features + rows)``."""
        return th.cat([observations["jobs"].flatten(1), observations["present"].flatten(1)], dim=1)


class ResidualNetwork(nn.Module):
    """The per-job linear actor and the pooled-features critic; ``latent_dim_pi`` is the action size."""

    def __init__(self, observation_space: gym.spaces.Dict, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.rows, self.width = observation_space["jobs"].shape
        self.actor = nn.Linear(self.width, 2, bias=False)  # the features hold a bias column
        nn.init.zeros_(self.actor.weight)  # zero residual: the base policy
        sizes = [2 * self.width + 1, *hidden]
        layers: list[nn.Module] = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b), nn.Tanh()]
        self.critic = nn.Sequential(*layers)
        self.latent_dim_pi = 2 * self.rows
        self.latent_dim_vf = sizes[-1]

    def _split(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        jobs = features[:, : self.rows * self.width].reshape(-1, self.rows, self.width)
        return jobs, features[:, self.rows * self.width :].unsqueeze(2)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        """Every row's two log-multipliers, ``(batch, rows * 2)`` in the env's action order."""
        jobs, present = self._split(features)
        return (self.actor(jobs) * present).flatten(1)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        """The value head's input: the critic MLP over mean and max job features and the listed fraction."""
        jobs, present = self._split(features)
        count = present.sum(1)
        mean = (jobs * present).sum(1) / count.clamp(min=1.0)
        top = (jobs - 10.0 * (1.0 - present)).amax(1).clamp(min=-3.0)  # empty rows never win
        return self.critic(th.cat([mean, top, count / self.rows], dim=1))

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """(actor latent, critic latent), as SB3's MlpExtractor."""
        return self.forward_actor(features), self.forward_critic(features)


class TeacherAnchor:
    """A teacher policy (a residual network and its noise) and the adaptive weight of the KL to it.

    After every rollout :meth:`adapt` doubles the coefficient when the measured KL exceeds
    1.5x the target and halves it below target / 1.5 (PPO's adaptive KL penalty).
    """

    def __init__(self, weights: ResidualWeights, log_std: float, coef: float, target: float) -> None:
        n = len(RESIDUAL_FEATURES)
        self.weight = th.as_tensor(weights.vector.reshape(2, n), dtype=th.float32)
        self.log_std = float(log_std)
        self.coef, self.target = float(coef), float(target)

    def adapt(self, kl: float) -> None:
        """Move the coefficient towards the target KL."""
        if kl > 1.5 * self.target:
            self.coef *= 2.0
        elif kl < self.target / 1.5:
            self.coef /= 2.0


class ResidualPolicy(MultiInputActorCriticPolicy):
    """PPO's actor-critic with :class:`ResidualNetwork`; ``net_arch`` gives the critic's layer sizes.

    With an ``anchor`` (:class:`TeacherAnchor`), :meth:`evaluate_actions` returns minus the
    weighted KL from the teacher in the place of the entropy, so PPO's entropy term (with
    ``ent_coef`` 1) is the KL penalty: the loss gains ``coef * KL(teacher || policy)``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["features_extractor_class"] = ResidualExtractor
        kwargs["ortho_init"] = False  # the actor starts at the warm start, not at random
        super().__init__(*args, **kwargs)
        self.anchor: TeacherAnchor | None = None

    def teacher_kl(self, obs: Any) -> th.Tensor:
        """``(batch,)``: KL(teacher || policy) of every listed job's two Gaussian actions, summed per state."""
        assert self.anchor is not None, "teacher_kl needs an anchor"
        features = self.extract_features(obs)
        assert isinstance(features, th.Tensor)  # one extractor shared by actor and critic
        jobs, present = self.mlp_extractor._split(features)
        gap = self.mlp_extractor.actor(jobs) - jobs @ self.anchor.weight.T
        log_std = self.log_std.view(-1, 2)
        teacher_var = math.exp(2.0 * self.anchor.log_std)
        per = log_std - self.anchor.log_std + (teacher_var + gap**2) / (2.0 * th.exp(2.0 * log_std)) - 0.5
        return (per * present).sum((1, 2))

    def evaluate_actions(self, obs: Any, actions: th.Tensor) -> tuple[th.Tensor, th.Tensor, th.Tensor | None]:
        """SB3's (values, log-probabilities, entropy); with an anchor, minus the weighted KL in the entropy's place."""
        values, log_prob, entropy = super().evaluate_actions(obs, actions)
        if self.anchor is None:
            return values, log_prob, entropy
        return values, log_prob, -self.anchor.coef * self.teacher_kl(obs)

    def _build_mlp_extractor(self) -> None:
        arch = self.net_arch if isinstance(self.net_arch, list) and self.net_arch else [64, 64]
        self.mlp_extractor = ResidualNetwork(self.observation_space, tuple(arch))

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the actor's output already is the mean
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def actor_parameters(self) -> list[nn.Parameter]:
        """The actor's weights and the action noise (what a critic warm-up freezes)."""
        return [self.mlp_extractor.actor.weight, self.log_std]


def set_weights(policy: ResidualPolicy, weights: ResidualWeights) -> None:
    """Make the policy's mean actor the residual network ``weights``."""
    n = len(RESIDUAL_FEATURES)
    with th.no_grad():
        policy.mlp_extractor.actor.weight.copy_(th.as_tensor(weights.vector.reshape(2, n), dtype=th.float32))


def weights_of(
    policy: ResidualPolicy, template: ResidualWeights, trained: Mapping[str, Any] | None = None
) -> ResidualWeights:
    """The policy's mean actor as residual weights (``template``'s clip and belief)."""
    vector = policy.mlp_extractor.actor.weight.detach().cpu().numpy().astype(float).reshape(-1)
    return template.with_vector(np.asarray(vector), trained)
