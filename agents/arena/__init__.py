"""Arena's heuristic scheduler (docs/arena.md §5) as a Policy, with its ablation variants."""

from agents.arena.config import ArenaConfig
from agents.arena.policy import ARENA_VERSION, ArenaPolicy

__all__ = ["ARENA_VERSION", "ArenaConfig", "ArenaPolicy"]
