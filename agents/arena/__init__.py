"""Arena's heuristic scheduler (docs/arena.md §5) as a Policy, with its ablation variants."""

from agents.arena.config import ArenaConfig
from agents.arena.policy import ArenaPolicy

__all__ = ["ArenaConfig", "ArenaPolicy"]
