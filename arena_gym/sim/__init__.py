"""The discrete-event cluster simulator."""

from arena_gym.sim.backend import SimBackend
from arena_gym.sim.config import MIN_ROUND_S, SimConfig
from arena_gym.types import OverheadModel

__all__ = ["MIN_ROUND_S", "OverheadModel", "SimBackend", "SimConfig"]
