"""The discrete-event cluster simulator."""

from arena_gym.sim.backend import SimBackend
from arena_gym.sim.config import OverheadModel, SimConfig

__all__ = ["OverheadModel", "SimBackend", "SimConfig"]
