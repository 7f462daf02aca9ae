"""The live backend: the same cluster core and policies as the simulator, driving real training jobs.

:class:`LiveBackend` is a :class:`~arena_gym.protocols.ClusterBackend` on the wall clock (see
``docs/deploy.md``), built from :mod:`.state` (the journaled cluster state on the wall clock),
:mod:`.reports` (progress records into core operations), :mod:`.processes` (generations and their
faults), :mod:`.resume` (taking over an interrupted deployment) and :mod:`.status`;
:mod:`real_runner.live.journal` is its durable journal, :mod:`.devices` maps placements to device
slots, :mod:`.planning` picks executable plans, :mod:`.trajectory` checks that resumed jobs
continue their loss trajectories.
"""

from real_runner.live.backend import JobLine, LiveBackend, LiveError, LiveStatus
from real_runner.live.config import LiveConfig

__all__ = ["JobLine", "LiveBackend", "LiveConfig", "LiveError", "LiveStatus"]
