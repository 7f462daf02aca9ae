"""DAgger labelling: the states an agent visits, each labelled with a teacher policy's action.

At every decision point the teacher (any registered Policy, e.g. ``lookahead``) decides on
the snapshot as its information set shows it, and its Decision is replayed as codec
sub-actions (:func:`envs.expert.expert_actions`). At every env step of that decision point the
label is the first of those sub-actions not yet taken there that the mask still allows, else
"done". The action played is the label with probability ``beta`` and the agent's own greedy
action otherwise (DAgger's mixture; ``beta`` 1 is behaviour cloning on the teacher's own
states). Every (observation, mask, label) is kept with the discounted return of the played
episode from that step, so the value head can be fitted beside the policy.

The teacher sees every snapshot of the episode, as it would when it schedules alone, so a
stateful teacher (Arena's opportunism set, the lookahead's record of arrivals) keeps its state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from agents.rl.bc import ExpertData, discounted
from arena_gym.core.information import information_set
from arena_gym.protocols import Policy
from arena_gym.types import Snapshot
from envs.expert import expert_actions

#: An agent's action for (observation, mask).
Actor = Callable[[dict[str, np.ndarray], np.ndarray], int]


@dataclass(frozen=True)
class LabelledEpisode:
    """One episode's teacher-labelled states, and how often the agent's own action matched the label."""

    data: ExpertData
    decisions: int  # decision points the teacher decided at
    agent_agreement: float  # share of states where the agent's greedy action was the label
    teacher_played: float  # share of states where the label was played


class TeacherLabels:
    """The teacher's label for the env's current state (the teacher decides once per decision point)."""

    def __init__(self, teacher: Policy, env: gym.Env) -> None:
        self.teacher = teacher
        self._env: Any = env.unwrapped
        self._shown = information_set(teacher, self._env.backend)
        self._snapshot: Snapshot | None = None
        self._advice: list[int] = []
        self._taken: set[int] = set()
        self.decisions = 0

    def reset(self) -> None:
        """A new episode: the teacher reset, no decision point seen."""
        self.teacher.reset()
        self._shown = information_set(self.teacher, self._env.backend)
        self._snapshot = None
        self._advice, self._taken = [], set()
        self.decisions = 0

    def label(self, mask: np.ndarray) -> int:
        """The first of the teacher's sub-actions at this decision point not yet taken and still valid, else "done"."""
        env = self._env
        done = env.codec.done_action
        if env.snapshot is None:
            return done
        if env.snapshot is not self._snapshot:
            self._snapshot = env.snapshot
            decision = self.teacher.decide(self._shown(env.snapshot))
            self._advice = expert_actions(
                env.snapshot, decision, env.codec, env.config, table=env.table, capacity=env.capacity
            )
            self._taken = set()
            self.decisions += 1
        return next((a for a in self._advice if a not in self._taken and mask[a]), done)

    def taken(self, action: int) -> None:
        """Record the action played at this decision point."""
        self._taken.add(action)


def label_episode(
    env: gym.Env,
    teacher: Policy,
    agent: Actor,
    beta: float,
    seed: int,
    gamma: float = 0.99,
) -> LabelledEpisode:
    """Play one episode from ``env.reset(seed=seed)`` with the DAgger mixture; every state labelled by ``teacher``.

    The coin that picks the teacher's or the agent's action is drawn from ``seed``'s own stream,
    so an episode is a function of (env, teacher, agent, beta, seed).
    """
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    base: Any = env.unwrapped
    labels = TeacherLabels(teacher, env)
    coin = np.random.default_rng(np.random.SeedSequence([seed, 31]))
    obs, _ = env.reset(seed=seed)
    labels.reset()
    rows: list[dict[str, np.ndarray]] = []
    masks: list[np.ndarray] = []
    actions: list[int] = []
    rewards: list[float] = []
    agreed = played = 0
    done = False
    while not done:
        mask = base.action_masks()
        label = labels.label(mask)
        own = agent(obs, mask)
        use_teacher = coin.random() < beta
        action = label if use_teacher else own
        rows.append(obs)
        masks.append(mask)
        actions.append(label)
        agreed += int(own == label)
        played += int(use_teacher or own == label)
        labels.taken(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        rewards.append(float(reward))
        done = terminated or truncated
    n = len(actions)
    data = ExpertData(
        {k: np.stack([o[k] for o in rows]) for k in rows[0]},
        np.stack(masks),
        np.asarray(actions, dtype=np.int64),
        np.asarray(discounted(rewards, gamma), dtype=np.float32),
        1,
    )
    return LabelledEpisode(data, labels.decisions, agreed / n, played / n)
