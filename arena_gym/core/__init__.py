"""The cluster core shared by the simulator and the live backend: state, validation, snapshots, event log."""

from arena_gym.core.state import CheckedDecision, ClusterState

__all__ = ["CheckedDecision", "ClusterState"]
