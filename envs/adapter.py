"""ObservationPolicy: any observation -> action function deployed as a Policy, through the env's own encoder and codec."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from arena_gym.core.information import Masker
from arena_gym.protocols import PerfModel
from arena_gym.types import ClusterSpec, Decision, Snapshot
from envs.advisor import Advisor
from envs.builder import DecisionBuilder
from envs.capacity import CapacityIndex
from envs.codec import ActionCodec
from envs.config import EnvConfig
from envs.encoder import ObservationEncoder
from envs.table import GridTable

Predict = Callable[[dict[str, np.ndarray], np.ndarray], int]


class ObservationPolicy:
    """A Policy that builds each Decision with sub-actions from ``predict(obs, mask)``.

    Per decision point it runs the env's inner loop: encode the observation, ask ``predict``
    for an action under the builder's mask, apply it, until "done", no valid sub-action is
    left, or ``config.max_substeps`` sub-actions (an invalid action is ignored but counts). The
    codec and encoder are those of the snapshot's cluster with ``config``'s slots and grid, so
    a model trained on :class:`envs.arena_env.ArenaSchedEnv` sees identical observations.
    Idle guard: while the decision so far would leave no job running and a sub-action is
    valid, "done" is masked in what ``predict`` sees (an idle cluster with a startable job only
    lengthens every JCT). The env masks "done" likewise once nothing is left to arrive; a
    deployed policy cannot know future arrivals, so it applies the rule always. A ``predict``
    that ignores the mask and answers "done" anyway is still obeyed. With ``config.advisor``
    the advising heuristic decides at each decision point, as in the env, and its advice is
    part of every observation.
    """

    def __init__(self, name: str, predict: Predict, config: EnvConfig, ap_search: str = "pruned") -> None:
        self.name = name
        self.predict = predict
        self.config = config
        self.ap_search = ap_search
        self.advisor = Advisor(config.advisor, config.seed) if config.advisor is not None else None
        # sees true remaining work only in the ablation (or through a clairvoyant advisor)
        self.clairvoyant = config.oracle_remaining or (self.advisor is not None and self.advisor.clairvoyant)
        # what the encoder reads: as in the env, the observed snapshot unless in the ablation
        self._observe = Masker(name).snapshot if self.clairvoyant and not config.oracle_remaining else None
        self._cluster: ClusterSpec | None = None
        self._parts: tuple[ActionCodec, CapacityIndex, ObservationEncoder] | None = None
        self._table: GridTable | None = None

    def reset(self) -> None:
        """Reset the advisor, if any (the cached grid tables stay valid for the same models)."""
        if self.advisor is not None:
            self.advisor.reset()

    def decide(self, snapshot: Snapshot) -> Decision:
        """Query ``predict`` sub-action by sub-action and return the resulting Decision."""
        codec, capacity, encoder = self._for_cluster(snapshot.cluster)
        table = self._for_perf(codec, snapshot.perf)
        advised, snapshot = snapshot, self._observe(snapshot) if self._observe is not None else snapshot
        builder = DecisionBuilder(snapshot, codec, self.config, table, capacity)
        advice: tuple[int, ...] = ()
        if self.advisor is not None and builder.has_choice():
            advice = self.advisor.advise(advised, codec, self.config, table, capacity)
        while builder.has_choice() and builder.substeps < self.config.max_substeps:
            mask = builder.mask()
            if builder.running_after() == 0:
                mask[-1] = False  # idle guard (has_choice() holds, so another action is valid)
            action = int(self.predict(encoder.encode(snapshot, builder, advice), mask))
            if action == codec.done_action:
                break
            builder.apply(action)  # an invalid action changes nothing but counts as a sub-step
        return builder.decision()

    def _for_cluster(self, cluster: ClusterSpec) -> tuple[ActionCodec, CapacityIndex, ObservationEncoder]:
        if self._parts is None or cluster != self._cluster:
            codec = ActionCodec(cluster, self.config)
            self._parts = (codec, CapacityIndex(codec), ObservationEncoder(cluster, codec, self.config))
            self._cluster = cluster
            self._table = None
        return self._parts

    def _for_perf(self, codec: ActionCodec, perf: PerfModel) -> GridTable:
        if self._table is None or self._table.perf is not perf:
            self._table = GridTable(codec, perf)
        return self._table
