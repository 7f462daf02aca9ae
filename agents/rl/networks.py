"""A slot-structured actor-critic for the gym's (job slot x grid cell) action layout.

SB3's default ``MultiInputPolicy`` flattens the whole observation into one MLP, so what it
learns for slot 3 does not carry over to slot 7. :class:`SlotPolicy` instead scores every slot
with one shared network: each slot's row (its job features, belief speeds per cell, mask and
advice) together with a summary of all slots and the cluster state gives that slot's
``C + 1`` action logits; the "done" logit and the value come from the summary. The logits come
out in the codec's action order (``slot * (C + 1) + cell``, then "done"), so masking, greedy
deployment and behaviour cloning work on them unchanged.
"""

from __future__ import annotations

from functools import partial

import gymnasium as gym
import numpy as np
import torch as th
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

#: Observation keys that have one row per job slot, in the order they are concatenated per slot.
SLOT_KEYS: tuple[str, ...] = ("jobs", "grid", "mask", "advice")
#: Observation keys describing the whole cluster and clock.
GLOBAL_KEYS: tuple[str, ...] = ("cluster", "clock")


class SlotExtractor(BaseFeaturesExtractor):
    """Concatenates the observation's arrays, flattened, in a fixed key order (the layout :class:`SlotNetwork` reads)."""

    def __init__(self, observation_space: gym.spaces.Dict) -> None:
        keys = [k for k in (*SLOT_KEYS, *GLOBAL_KEYS) if k in observation_space.spaces]
        unknown = sorted(set(observation_space.spaces) - set(keys))
        if unknown or "jobs" not in keys:
            raise ValueError(f"the slot policy needs the gym's observation keys, got unknown {unknown}")
        super().__init__(observation_space, features_dim=sum(int(np.prod(observation_space[k].shape)) for k in keys))
        self.keys = tuple(keys)

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        """``(batch, features)``."""
        return th.cat([observations[k].flatten(1) for k in self.keys], dim=1)


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [nn.Linear(a, b), nn.Tanh()]
    return nn.Sequential(*layers)


class SlotNetwork(nn.Module):
    """Shared per-slot encoder, mean/max pooling over the occupied slots, per-slot logit head, done and value heads.

    ``latent_dim_pi`` is the number of actions (the actor's output is the logits themselves);
    ``latent_dim_vf`` the size of the value head's input.
    """

    def __init__(self, observation_space: gym.spaces.Dict, n_actions: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        spaces = observation_space.spaces
        self.n_slots = spaces["jobs"].shape[0]
        self.widths = [int(np.prod(spaces[k].shape[1:])) for k in SLOT_KEYS if k in spaces]
        self.global_dim = sum(int(np.prod(spaces[k].shape)) for k in GLOBAL_KEYS if k in spaces)
        self.slot_dim = sum(self.widths)
        self.n_cols = (n_actions - 1) // self.n_slots
        h = hidden[-1]
        self.encoder = _mlp([self.slot_dim + self.global_dim, *hidden])
        self.context = _mlp([2 * h + self.global_dim, h])
        self.slot_head = nn.Linear(2 * h, self.n_cols)
        self.done_head = nn.Linear(h, 1)
        self.value_body = _mlp([h, h])
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = h

    def _split(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        batch = features.shape[0]
        parts, offset = [], 0
        for width in self.widths:
            size = self.n_slots * width
            parts.append(features[:, offset : offset + size].reshape(batch, self.n_slots, width))
            offset += size
        return th.cat(parts, dim=2), features[:, offset:]

    def _encode(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        slots, glob = self._split(features)
        present = slots[:, :, :1]  # the jobs row's first column: 1 if the slot holds a job
        x = th.cat([slots, glob.unsqueeze(1).expand(-1, self.n_slots, -1)], dim=2)
        h = self.encoder(x) * present
        count = present.sum(1).clamp(min=1.0)
        pooled_max = (h - 2.0 * (1.0 - present)).amax(1).clamp(min=-1.0)  # tanh range; empty slots never win
        context = self.context(th.cat([h.sum(1) / count, pooled_max, glob], dim=1))
        return h, context

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        """Action logits ``(batch, n_actions)`` in the codec's order."""
        h, context = self._encode(features)
        per_slot = self.slot_head(th.cat([h, context.unsqueeze(1).expand(-1, self.n_slots, -1)], dim=2))
        return th.cat([per_slot.flatten(1), self.done_head(context)], dim=1)

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        """The value head's input ``(batch, latent_dim_vf)``."""
        return self.value_body(self._encode(features)[1])

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        """(actor latent, critic latent), as SB3's MlpExtractor."""
        return self.forward_actor(features), self.forward_critic(features)


class SlotPolicy(MaskableMultiInputActorCriticPolicy):
    """MaskablePPO's actor-critic with :class:`SlotNetwork`; ``net_arch`` gives the per-slot encoder's layer sizes."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs["features_extractor_class"] = SlotExtractor
        super().__init__(*args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        arch = self.net_arch if isinstance(self.net_arch, list) and self.net_arch else [64, 64]
        self.mlp_extractor = SlotNetwork(self.observation_space, int(self.action_space.n), tuple(arch))

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the slot network's output already is the logits
        for head in (self.mlp_extractor.slot_head, self.mlp_extractor.done_head):
            head.apply(partial(self.init_weights, gain=0.01))
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)
