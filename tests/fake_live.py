"""The live backend on fake generations and a jumping clock, as the simulator's twin (tests only).

:func:`fake_live_backend` builds a :class:`~real_runner.live.LiveBackend` whose generations are
:class:`~real_runner.launchers.fake.FakeLauncher` ones: every step takes the performance model's
time and a (re)start takes the simulator's reconfiguration overhead of the same class, and the
clock (:class:`~real_runner.launchers.fake.FakeClock`) jumps from one due time to the next.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from arena_gym.sim import SimConfig
from arena_gym.types import ClusterSpec, PerfModel
from real_runner.launchers.fake import FakeClock, FakeLauncher
from real_runner.live import LiveBackend, LiveConfig
from real_runner.testbed import Testbed, TestbedNode

#: Step records every minute; the live settings that go with it (no start-up or staleness is a fault).
REPORT_EVERY_S = 60.0
SETTINGS: dict[str, Any] = {
    "progress_every_s": REPORT_EVERY_S,
    "stale_timeout_s": 10 * REPORT_EVERY_S,
    "start_timeout_s": 3600.0,
    "checkpoint_every_s": 0.0,
}


def testbed_of(cluster: ClusterSpec) -> Testbed:
    """The testbed of a one-type cluster (its nodes on this machine)."""
    if len(cluster.groups) != 1:
        raise ValueError(f"a testbed has one device type; cluster {cluster.name} has {len(cluster.groups)}")
    group = cluster.groups[0]
    nodes = tuple(TestbedNode("localhost", tuple(range(group.gpus_per_node))) for _ in range(group.nodes))
    return Testbed(cluster.name, group.gpu_type, nodes)


def fake_live_backend(
    cluster: ClusterSpec,
    perf: PerfModel,
    run_dir: Path,
    sim: SimConfig,
    clock: FakeClock | None = None,
    interrupt: Callable[[], bool] | None = None,
    **config: Any,
) -> LiveBackend:
    """A live backend on ``cluster`` (one type) whose jobs run as ``sim`` would run them: ``perf``'s step
    times and ``sim``'s reconfiguration overheads, on ``clock`` (a new one from 0 by default); ``config``
    overrides :data:`SETTINGS` and ``sim``'s decision schedule."""
    clock = clock if clock is not None else FakeClock()
    launcher = FakeLauncher(perf, cluster.groups[0].gpu_type, clock.time, sim.overhead_s, REPORT_EVERY_S)
    schedule = dataclasses.asdict(sim.schedule)
    backend = LiveBackend(
        testbed_of(cluster),
        perf,
        run_dir,
        launcher,
        config=LiveConfig(**{**SETTINGS, **schedule, **config}),
        cores=[0],
        interrupt=interrupt,
        clock=clock.time,
        sleep=clock.sleep,
    )
    clock.watch(launcher.next_due, launcher.tick)
    clock.watch(backend.next_due)
    return backend
