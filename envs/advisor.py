"""Advisor: a heuristic's decision at each decision point, offered to the agent as an observation.

With ``EnvConfig.advisor`` set (a registered policy name, e.g. ``arena``), the heuristic decides
at every decision point the agent acts on, and its Decision is replayed as codec sub-actions
(:func:`envs.expert.expert_actions`). The observation's ``advice`` array marks those of them that
are still valid, so the agent can follow the heuristic, deviate from it, or stop early. The
advice is a function of the snapshot only (the heuristic sees what the agent sees), so a
non-clairvoyant advisor keeps the agent non-clairvoyant; the same advisor runs when a trained
model is deployed (:class:`envs.adapter.ObservationPolicy`).
"""

from __future__ import annotations

import numpy as np

from arena_gym.core.information import information_set, is_clairvoyant
from arena_gym.registry import make_policy
from arena_gym.types import Snapshot
from envs.builder import DecisionBuilder
from envs.capacity import CapacityIndex
from envs.codec import ActionCodec
from envs.config import EnvConfig
from envs.expert import expert_actions
from envs.table import GridTable


class Advisor:
    """A registered heuristic (by name) that proposes each decision as sub-actions."""

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.policy = make_policy(name, seed)
        self.clairvoyant = is_clairvoyant(self.policy)
        self._shown = information_set(self.policy)

    def reset(self) -> None:
        """Forget the heuristic's per-episode state (call at every episode start)."""
        self.policy.reset()
        self._shown = information_set(self.policy)

    def advise(
        self,
        snapshot: Snapshot,
        codec: ActionCodec,
        config: EnvConfig,
        table: GridTable | None = None,
        capacity: CapacityIndex | None = None,
    ) -> tuple[int, ...]:
        """The sub-actions that rebuild the heuristic's decision at ``snapshot`` ("done" not included)."""
        decision = self.policy.decide(self._shown(snapshot))
        return tuple(expert_actions(snapshot, decision, codec, config, table=table, capacity=capacity))


def advice_matrix(advice: tuple[int, ...], builder: DecisionBuilder) -> np.ndarray:
    """``(S, C + 1)``: 1 on the advised sub-actions that are still valid in ``builder``'s scratch state."""
    codec = builder.codec
    out = np.zeros(codec.n_actions - 1, dtype=np.float32)
    if advice:
        mask = builder.mask()
        valid = [a for a in advice if mask[a]]
        out[valid] = 1.0
    return out.reshape(codec.n_slots, codec.width)
