"""Device slots: placements become concrete devices, jobs keep theirs where they can, cores are pinned."""

from __future__ import annotations

import pytest

from arena_gym.types import GpuType, Placement
from real_runner.launchers.base import RankSlot
from real_runner.live.devices import DeviceMap, core_map
from real_runner.testbed import Testbed, TestbedNode, load_testbed

CPU = GpuType("cpu")


def test_placements_map_to_free_slots_on_their_nodes_and_back() -> None:
    dm = DeviceMap(load_testbed("cpu-4"), cores=range(4))
    a = dm.acquire("a", Placement(CPU, (0, 1), 1))
    assert [(s.node, s.device) for s in a] == [(0, 0), (1, 2)]
    assert [s.pin_core for s in a] == [0, 2] and not dm.oversubscribed
    b = dm.acquire("b", Placement(CPU, (1,), 1))
    assert [(s.node, s.device) for s in b] == [(1, 3)]
    assert dm.holder(1, 3) == "b" and dm.holder(0, 1) is None
    with pytest.raises(ValueError, match="node 1 has 0 free device"):
        dm.acquire("c", Placement(CPU, (1,), 1))
    with pytest.raises(ValueError, match="already holds devices"):
        dm.acquire("a", Placement(CPU, (0,), 1))
    dm.release("a")
    assert dm.slots("a") == () and dm.holder(0, 0) is None
    assert [(s.node, s.device) for s in dm.acquire("c", Placement(CPU, (0,), 2))] == [(0, 0), (0, 1)]


def test_a_job_keeps_the_slots_it_had_on_the_same_node() -> None:
    dm = DeviceMap(load_testbed("cpu-2"), cores=range(2))
    old = dm.acquire("a", Placement(CPU, (0,), 1))
    dm.acquire("b", Placement(CPU, (0,), 1))
    dm.release("a")
    dm.release("b")
    assert dm.acquire("b", Placement(CPU, (0,), 1), previous=[RankSlot(0, "localhost", 1)])[0].device == 1
    assert dm.acquire("a", Placement(CPU, (0,), 1), previous=old)[0].device == 0


def test_more_devices_than_cores_share_cores_round_robin() -> None:
    bed = load_testbed("cpu-4")
    assert core_map(bed, [0, 1]) == {(0, 0): 0, (0, 1): 1, (1, 2): 0, (1, 3): 1}
    assert core_map(bed, [5, 7, 9, 11]) == {(0, 0): 5, (0, 1): 7, (1, 2): 9, (1, 3): 11}
    assert DeviceMap(bed, cores=[0, 1]).oversubscribed
    gpu = Testbed("g", "a100", (TestbedNode("h", (4, 5)),))
    slots = DeviceMap(gpu, cores=[0]).acquire("a", Placement(GpuType("a100"), (0,), 2))
    assert [(s.device, s.pin_core, s.host) for s in slots] == [(4, None, "h"), (5, None, "h")]


def test_restore_takes_exactly_the_journaled_slots() -> None:
    dm = DeviceMap(load_testbed("cpu-4"), cores=range(4))
    dm.restore("a", [RankSlot(1, "localhost", 3)])
    assert dm.holder(1, 3) == "a"
    with pytest.raises(ValueError, match="held by another job"):
        dm.restore("b", [RankSlot(1, "localhost", 3)])
    with pytest.raises(ValueError, match="unknown"):
        dm.restore("b", [RankSlot(0, "localhost", 9)])
