"""Heuristics as experts: a Policy's Decision replayed as codec sub-actions, and an agent that plays one."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from arena_gym.core.information import information_set
from arena_gym.protocols import Policy
from arena_gym.records import EpisodeRecord
from arena_gym.types import Allocation, Decision, JobId, Snapshot
from envs.builder import DecisionBuilder
from envs.capacity import CapacityIndex
from envs.codec import PREEMPT, ActionCodec
from envs.config import EnvConfig
from envs.table import GridTable

log = logging.getLogger(__name__)


def expert_actions(
    snapshot: Snapshot,
    decision: Decision,
    codec: ActionCodec,
    config: EnvConfig,
    *,
    table: GridTable | None = None,
    capacity: CapacityIndex | None = None,
    strict: bool = False,
) -> list[int]:
    """The sub-actions that rebuild ``decision`` at ``snapshot`` through a fresh DecisionBuilder.

    Allocations are replayed in the decision's order, each only once the builder would produce
    exactly the decided allocation (same grid, plan and nodes). While the next one does not
    match yet, the decision's preemptions are applied one by one, in order (reproducing
    policies that free GPUs per job, such as SRTF); with none left, a later allocation that
    already matches goes first (policies that placed jobs in another order). Unneeded
    preemptions follow at the end; allocations equal to a job's current one are no-ops and
    skipped. What the codec cannot express exactly (a job outside the K + R slots, a node
    choice other than the builder's best fit, a pure migration) is approximated by the same
    cell when that is valid, or dropped; ``strict`` raises ValueError instead. "done" is not
    included.
    """
    builder = DecisionBuilder(snapshot, codec, config, table, capacity)
    slot_of = {v.job_id: s for s, v in enumerate(builder.slots) if v is not None}
    current = {v.job_id: v.allocation for v in builder.slots if v is not None}
    allocations = [(j, a) for j, a in decision.allocations if current.get(j) != a]
    preemptions = list(decision.preemptions)
    actions: list[int] = []

    def miss(job_id: JobId, what: str) -> None:
        message = f"decision for job {job_id} at t={snapshot.now:g} is not expressible through the codec: {what}"
        if strict:
            raise ValueError(message)
        log.debug(message)

    def action_for(job_id: JobId, alloc: Allocation) -> int | None:
        slot = slot_of.get(job_id)
        if slot is None:
            miss(job_id, "the job has no slot (raise max_pending / max_running)")
            return None
        try:
            return codec.encode(slot, codec.cell_of(alloc))
        except ValueError as exc:
            miss(job_id, str(exc))
            return None

    pending = [(job_id, alloc, a) for job_id, alloc in allocations if (a := action_for(job_id, alloc)) is not None]
    while pending or preemptions:
        if pending and builder.preview(pending[0][2]) == pending[0][1]:
            actions.append(pending.pop(0)[2])
            builder.apply(actions[-1])
            continue
        if preemptions:
            job_id = preemptions.pop(0)
            slot = slot_of.get(job_id)
            action = codec.encode(slot, PREEMPT) if slot is not None else None
            if action is not None and builder.apply(action):
                actions.append(action)
            else:
                miss(job_id, "the preempted job holds no running slot, or preempting it is not valid")
            continue
        later = next((i for i, (_, alloc, a) in enumerate(pending) if builder.preview(a) == alloc), None)
        if later is not None:  # the policy placed this one first: follow its node choice
            actions.append(pending.pop(later)[2])
            builder.apply(actions[-1])
            continue
        job_id, alloc, approx = pending.pop(0)
        miss(job_id, f"the builder would not place it as {alloc.shape} on nodes {alloc.placement.nodes}")
        if builder.apply(approx):
            actions.append(approx)
    return actions


@dataclass(frozen=True)
class PlayResult:
    """One episode played through the env: its record, metrics, return and step counts."""

    record: EpisodeRecord
    metrics: dict[str, float]
    total_reward: float
    steps: int
    invalid_actions: int


class HeuristicAgent:
    """Plays a heuristic Policy through an :class:`envs.arena_env.ArenaSchedEnv`.

    At every new decision point it asks the policy for its Decision and replays
    :func:`expert_actions`, then "done". The env must use the policy's ``ap_search`` class for
    the episode to match ``run_episode`` with the same policy.
    """

    def __init__(self, policy: Policy, env: gym.Env, strict: bool = False) -> None:
        self.policy = policy
        self.env = env
        self.strict = strict
        self._base: Any = env.unwrapped
        self._snapshot: Snapshot | None = None
        self._queue: Iterator[int] = iter(())
        self._shown = information_set(policy, self._base.backend)

    def reset(self) -> None:
        """Forget the current decision point and reset the policy (call after ``env.reset``)."""
        self.policy.reset()
        self._shown = information_set(self.policy, self._base.backend)
        self._snapshot = None
        self._queue = iter(())

    def act(self) -> int:
        """The next action for the env's current state."""
        env = self._base
        if env.snapshot is None:
            return env.codec.done_action
        if env.snapshot is not self._snapshot:
            self._snapshot = env.snapshot
            decision = self.policy.decide(self._shown(env.snapshot))
            self._queue = iter(
                expert_actions(
                    env.snapshot,
                    decision,
                    env.codec,
                    env.config,
                    table=env.table,
                    capacity=env.capacity,
                    strict=self.strict,
                )
            )
        return next(self._queue, env.codec.done_action)

    def play(self, seed: int | None = None, options: dict[str, Any] | None = None) -> PlayResult:
        """Reset the env and play one whole episode."""
        self.env.reset(seed=seed, options=options)
        self.reset()
        total, steps, invalid = 0.0, 0, 0
        while True:
            _, reward, terminated, truncated, info = self.env.step(self.act())
            total += reward
            steps += 1
            invalid += int(info["invalid"])
            if terminated or truncated:
                return PlayResult(self._base.last_record, info["metrics"], total, steps, invalid)
