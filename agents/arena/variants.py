"""Arena with another queue order: the factories behind the registered variants."""

from __future__ import annotations

from typing import Any

from agents.arena.policy import ArenaPolicy
from agents.arena.priority import ShortestRemaining


def arena_srpt(name: str = "arena-srpt", **overrides: Any) -> ArenaPolicy:
    """Arena admitting and restarting by the true shortest remaining run time (clairvoyant)."""
    return ArenaPolicy(name, priority=ShortestRemaining(), **overrides)
