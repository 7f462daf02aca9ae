"""The simulator's event logs, to the bit: digests of FCFS's and Arena's logs on a few traces and settings.

Every field of every event (times and rates by their exact ``repr``) goes into one SHA-256 digest
per run: event-driven, with periodic rounds, rounds only, with a horizon, and a search policy
that plans on forks. A change to the simulator's mechanics (its event heap, decision triggers,
operation log, forks) must leave them as they are. A change that means to change a trajectory
(a policy's decisions, the estimator, a trace generator) records the new digests with
``python -m tests.arena_gym.sim.test_event_log_digests`` and says why in its commit.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

import pytest

from arena_gym.harness.experiment import RunConfig, run
from arena_gym.records import Event

#: (run config, events in its log, digest of the log).
CASES: tuple[tuple[RunConfig, int, str], ...] = (
    (RunConfig(policy="fcfs"), 800, "4bfbe5b9c93c4da547404f518ba807f5d269f4b1a2cdacff7d4bd473ba93588a"),
    (RunConfig(policy="arena"), 1764, "4a4ca3868042e795bc7798631ec62e112e295f17ed32e4363479abdebc6282de"),
    (
        RunConfig(policy="arena", round_s=300.0, event_decisions=False),
        1648,
        "684e65c8d6ef0fe6ea4849ac75643f4f8a7efa69dbe4748e432005bc1295df69",
    ),
    (
        RunConfig(policy="fcfs", round_s=300.0, horizon_s=20000.0),
        48,
        "445fbbcac13085de594b11686701826af868e0417352643dcba91644066d3537",
    ),
    (
        RunConfig(policy="arena", trace="synthetic:n_jobs=60,seed=3", round_s=120.0),
        481,
        "50548f3b99ba6b73ed1312b4a389ea57ee2c9cb896bed53c4dbbfdaccc3aafa3",
    ),
    (
        RunConfig(policy="fcfs", trace="synthetic:n_jobs=60,seed=3", horizon_s=5000.0),
        16,
        "ddf909f43e6b4a29645760a1102013dc57bc38cdb05d787f573e6d2a552fc794",
    ),
    (
        RunConfig(policy="lookahead-oracle", trace="synthetic:n_jobs=20,seed=2"),
        168,
        "f1a82f570789b230121c8db7e2251b656719f1870bf8f0c2ccbe07ac51c74948",
    ),
)


def digest(events: Iterable[Event]) -> str:
    """SHA-256 of every field of every event, floats by their exact repr."""
    h = hashlib.sha256()
    for e in events:
        fields = (e.time, e.kind.value, e.job_id, e.gpu_type, e.num_gpus, e.shape, e.samples_per_s, e.overhead_s)
        h.update((",".join(map(repr, fields)) + "\n").encode())
    return h.hexdigest()


def _name(config: RunConfig) -> str:
    horizon = "" if math.isinf(config.horizon_s) else f" horizon {config.horizon_s:g}"
    rounds = (
        "" if config.round_s is None else f" round {config.round_s:g}" + ("" if config.event_decisions else " only")
    )
    return f"{config.policy} {config.trace}{rounds}{horizon}"


@pytest.mark.parametrize("config, n_events, expected", CASES, ids=[_name(c) for c, _, _ in CASES])
def test_the_event_log_is_bit_identical(config: RunConfig, n_events: int, expected: str) -> None:
    events = run(config).record.events
    assert (len(events), digest(events)) == (n_events, expected)


if __name__ == "__main__":
    for config, _, _ in CASES:
        logged = run(config).record.events
        print(f"{_name(config)}: {len(logged)} events, {digest(logged)}")
