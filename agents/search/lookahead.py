"""Lookahead: a base policy's decision, tested against candidate variants by rolling the base forward in sampled worlds.

At every decision point the base policy (Arena by default) and each candidate policy (variants
of it that change the order, the sizing, preemption or holding GPUs back) propose a decision.
When they all agree there is nothing to search. Otherwise each distinct proposal is applied in
the same ``worlds`` sampled worlds (common random numbers: one draw of lengths and arrivals per
world, shared by every proposal), the base policy is rolled forward to ``now + horizon``, and a
proposal is scored by the objective itself, the integral of jobs in the system over the window.
The base decision is kept unless a proposal's mean score beats it by ``margin`` (relative).

``lookahead`` is non-clairvoyant: its worlds come from :class:`agents.search.worlds.SampledWorlds`
(the belief given attained work, the arrival model given the arrivals seen). ``lookahead-oracle``
is the clairvoyant ablation: its world source is :class:`agents.search.worlds.TrueWorld`, one
world, the backend's own fork (true lengths, true future).
Every policy the search runs sees its own information set, at the decision point and in every
rollout: a non-clairvoyant base decides in a sampled or the true world exactly as it would in
the episode (a view of a job that has just finished reads its attained work, never its length),
so the oracle differs from the lookahead only in its world.

Every policy involved keeps its own per-episode state: the candidates see every snapshot, as
the base does. ``budget_s`` bounds the search's wall-clock time per decision (for live runs;
with it, results depend on the machine's speed); without it, a seed fixes every decision.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from agents.belief import KINDS
from agents.common import configure
from agents.search.worlds import SampledWorlds, TrueWorld, WorldSource, rollout
from arena_gym.core.information import information_set, is_clairvoyant
from arena_gym.fields import Problems
from arena_gym.protocols import Policy
from arena_gym.registry import make_policy
from arena_gym.sim import SimConfig
from arena_gym.types import Decision, OverheadModel, Snapshot

#: Who decides after a proposal in its rollouts (:class:`LookaheadConfig`'s ``rollout``).
Rollout = Literal["base", "proposer"]


@dataclass(frozen=True)
class LookaheadConfig:
    """Settings of :class:`Lookahead`.

    ``base`` is the registered policy rolled forward (and decided with when nothing wins);
    ``candidates`` the registered policies whose decisions compete with it; ``worlds`` (M) the
    sampled worlds per decision; ``horizon_s`` (H) how far each rollout runs; ``margin`` the
    relative improvement of the mean score a proposal needs; ``belief`` a packaged belief kind
    (``real``, ``synthetic``) or a belief file; ``adapt`` infers the episode's work scale from
    the jobs seen (:mod:`agents.belief.adaptive`); ``rollout`` is who decides after a proposal in
    its rollouts: ``base`` (a one-step deviation from the base policy) or ``proposer`` (the
    policy that proposed it goes on: a choice between policies from now on); ``oracle`` plans on
    the true world instead (clairvoyant); ``pin_scale`` rolls a policy that infers the episode's
    work scale forward at the scale its sampled world was drawn at, instead of inferring it anew
    at every rollout decision (:meth:`agents.arena.ArenaPolicy.at_scale`); ``budget_s`` a
    wall-clock limit per decision (None: none); ``overhead`` the
    reconfiguration overheads the worlds charge.
    """

    base: str = "arena"
    candidates: tuple[str, ...] = ("arena-ns", "arena-nh")
    worlds: int = 4
    horizon_s: float = 4 * 3600.0
    margin: float = 0.01
    belief: str = "real"
    adapt: bool = True
    rollout: Rollout = "base"
    oracle: bool = False
    pin_scale: bool = True
    budget_s: float | None = None
    overhead: OverheadModel = OverheadModel()

    def __post_init__(self) -> None:
        problems = Problems()
        problems.require(self.worlds >= 1, f"worlds must be >= 1, got {self.worlds}")
        problems.require(0 < self.horizon_s < math.inf, f"horizon_s must be finite and > 0, got {self.horizon_s}")
        problems.require(0 <= self.margin < 1, f"margin must be in [0, 1), got {self.margin}")
        problems.require(
            self.budget_s is None or self.budget_s > 0, f"budget_s must be > 0 or None, got {self.budget_s}"
        )
        problems.check(self.rollout, Rollout, "rollout")
        problems.require(
            self.base not in self.candidates, f"the base policy {self.base!r} is not a candidate of itself"
        )
        problems.require(
            self.belief in KINDS or Path(self.belief).is_file(),
            f"belief {self.belief!r} is neither a packaged kind ({', '.join(KINDS)}) nor a file",
        )
        problems.raise_if_any("LookaheadConfig")


@dataclass(frozen=True)
class Search:
    """One search of an episode: its time, who proposed each distinct decision (the base first), each one's score
    in each world (job-seconds; ``inf`` for a decision a world refused) and the index of the decision taken."""

    time: float
    proposers: tuple[str, ...]
    scores: tuple[tuple[float, ...], ...]
    chosen: int


def fork_policy(policy: Policy) -> Policy:
    """An independent copy of ``policy`` with its per-episode state: its own ``fork()``, else a deep copy."""
    fork = getattr(policy, "fork", None)
    return fork() if callable(fork) else copy.deepcopy(policy)


class Lookahead:
    """A one-step lookahead over candidate decisions, scored by base-policy rollouts in sampled worlds."""

    def __init__(
        self,
        name: str = "lookahead",
        config: LookaheadConfig | None = None,
        rng: np.random.Generator | None = None,
        **overrides: Any,
    ) -> None:
        self.config = configure(type(self).__name__, LookaheadConfig, config, overrides)
        self.name = name
        self.base = make_policy(self.config.base)
        self.candidates = [make_policy(c) for c in self.config.candidates]
        seed = int((rng if rng is not None else np.random.default_rng(0)).integers(2**63))
        cfg = self.config
        self.source: WorldSource = (
            TrueWorld(name) if cfg.oracle else SampledWorlds(cfg.belief, cfg.worlds, cfg.adapt, seed)
        )
        self.clairvoyant = self.source.clairvoyant
        seeing = [p.name for p in (self.base, *self.candidates) if is_clairvoyant(p)]
        if seeing and not self.clairvoyant:
            raise ValueError(f"{name}: a non-clairvoyant search cannot use clairvoyant policies ({', '.join(seeing)})")
        self.ap_search = self.base.ap_search
        self._shown = self._information_sets()
        self.searches: list[Search] = []  # this episode's searches (decision points where the proposals differed)

    @property
    def searched(self) -> int:
        """Decision points of this episode where the proposals differed."""
        return len(self.searches)

    @property
    def changed(self) -> int:
        """Of those, how many times the base decision was replaced."""
        return sum(1 for s in self.searches if s.chosen != 0)

    def reset(self) -> None:
        """A new episode: every policy reset, the world source too (its evidence and random stream)."""
        self.base.reset()
        for policy in self.candidates:
            policy.reset()
        self.source.reset()
        self._shown = self._information_sets()
        self.searches = []

    def decide(self, snapshot: Snapshot) -> Decision:
        """The base decision, unless a candidate's decision scores better by the margin in the worlds."""
        self.source.observe(snapshot)
        base = self.base.decide(self._shown[0](snapshot))
        proposals, proposers = [base], [self.base]
        for policy, shown in zip(self.candidates, self._shown[1:]):
            decision = policy.decide(shown(snapshot))
            if decision not in proposals:
                proposals.append(decision)
                proposers.append(policy)
        if len(proposals) == 1:
            return base
        rollers = proposers if self.config.rollout == "proposer" else [self.base] * len(proposals)
        scores = self._scores(snapshot, proposals, rollers)
        means = [float(np.mean(s)) if s else math.inf for s in scores]
        best = int(np.argmin(means))
        chosen = best if best != 0 and means[best] < means[0] * (1.0 - self.config.margin) else 0
        names = tuple(p.name for p in proposers)
        self.searches.append(Search(snapshot.now, names, tuple(map(tuple, scores)), chosen))
        return proposals[chosen]

    def _scores(
        self, snapshot: Snapshot, proposals: Sequence[Decision], rollers: Sequence[Policy]
    ) -> list[list[float]]:
        """Each proposal's jobs-in-system integral in each world (common random numbers across proposals),
        rolled forward by the policy beside it."""
        cfg = self.config
        now = snapshot.now
        until = now + cfg.horizon_s
        sim = SimConfig(overhead=cfg.overhead, horizon_s=until, overhead_class=self.ap_search)
        deadline = time.perf_counter() + cfg.budget_s if cfg.budget_s is not None else math.inf
        scores: list[list[float]] = [[] for _ in proposals]
        for world in self.source.worlds(snapshot, until, sim):
            for i, (decision, roller) in enumerate(zip(proposals, rollers)):
                policy = self._roller(roller, world.log_scale)
                branch = world.backend.fork()
                scores[i].append(rollout(branch, decision, policy, information_set(policy, branch), now, until))
            if time.perf_counter() > deadline:
                break
        return scores

    def _information_sets(self) -> list[Callable[[Snapshot], Snapshot]]:
        """What the base and each candidate see of this episode's snapshots (the loop has hidden them already
        unless this search is the clairvoyant oracle)."""
        policies = (self.base, *self.candidates)
        return [information_set(p) if self.clairvoyant else _as_is for p in policies]

    def _roller(self, policy: Policy, log_scale: float | None) -> Policy:
        """The policy's fork that rolls a world forward (at the world's drawn work scale, if any, with ``pin_scale``)."""
        pin = getattr(policy, "at_scale", None)
        if self.config.pin_scale and log_scale is not None and pin is not None:
            return pin(log_scale)
        return fork_policy(policy)


def _as_is(snapshot: Snapshot) -> Snapshot:
    return snapshot
