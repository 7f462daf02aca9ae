"""Concrete devices of a testbed: which device slots each job holds, and the core every CPU rank is pinned to.

The cluster core counts free devices per node; a placement names node indices and a device
count per node. :class:`DeviceMap` turns it into device ids of the testbed (a job keeps the
slots it already had on a node where it can, so a resize in place leaves its ranks where they
were) and remembers who holds what. CPU testbeds pin each rank to the core its device names;
where the testbed names more cores than this process may use, the slots share the available
cores round-robin (the testbed is oversubscribed: its jobs slow each other down).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

from arena_gym.types import Placement
from real_runner.launchers.base import RankSlot
from real_runner.testbed import Testbed

log = logging.getLogger(__name__)


def core_map(testbed: Testbed, cores: Iterable[int]) -> dict[tuple[int, int], int]:
    """(node, device) -> the core its rank is pinned to: the device id when available, else round-robin."""
    available = sorted(cores)
    slots = [(n, d) for n, node in enumerate(testbed.nodes) for d in node.devices]
    if all(d in available for _, d in slots) and len({d for _, d in slots}) == len(slots):
        return {s: s[1] for s in slots}
    return {s: available[i % len(available)] for i, s in enumerate(slots)}


class DeviceMap:
    """Who holds which device slot ``(node index, device id)`` of a testbed."""

    def __init__(self, testbed: Testbed, cores: Iterable[int] = ()) -> None:
        self.testbed = testbed
        self._holder: dict[tuple[int, int], str | None] = {
            (n, d): None for n, node in enumerate(testbed.nodes) for d in node.devices
        }
        self._pins = core_map(testbed, cores) if testbed.is_cpu else {}
        self._held: dict[str, tuple[tuple[int, int], ...]] = {}

    @property
    def oversubscribed(self) -> bool:
        """True when two device slots share one core (CPU testbeds only)."""
        return len(set(self._pins.values())) < len(self._pins)

    def slots(self, job_id: str) -> tuple[RankSlot, ...]:
        """The rank slots a job holds, in rank order (node by node)."""
        return tuple(self._slot(key) for key in self._held.get(job_id, ()))

    def holder(self, node: int, device: int) -> str | None:
        """The job holding a device slot, or None."""
        return self._holder[(node, device)]

    def release(self, job_id: str) -> None:
        """The job gives its slots back (nothing if it holds none)."""
        for key in self._held.pop(job_id, ()):
            self._holder[key] = None

    def acquire(self, job_id: str, placement: Placement, previous: Sequence[RankSlot] = ()) -> tuple[RankSlot, ...]:
        """Give the job free slots matching ``placement``; slots in ``previous`` are preferred.

        ValueError if a node lacks free slots (the cluster core's accounting prevents that) or
        the job already holds slots (release them first).
        """
        if job_id in self._held:
            raise ValueError(f"job {job_id} already holds devices {self._held[job_id]}; release them first")
        keep = {(s.node, s.device) for s in previous}
        chosen: list[tuple[int, int]] = []
        for node in placement.nodes:
            if not 0 <= node < len(self.testbed.nodes):
                raise ValueError(f"job {job_id}: node {node} is not in testbed {self.testbed.name!r}")
            free = [(node, d) for d in self.testbed.nodes[node].devices if self._holder[(node, d)] is None]
            free.sort(key=lambda k: (k not in keep, k[1]))
            if len(free) < placement.gpus_per_node:
                raise ValueError(
                    f"job {job_id}: node {node} has {len(free)} free device(s), {placement.gpus_per_node} wanted"
                )
            chosen.extend(free[: placement.gpus_per_node])
        for key in chosen:
            self._holder[key] = job_id
        self._held[job_id] = tuple(chosen)
        return self.slots(job_id)

    def restore(self, job_id: str, slots: Sequence[RankSlot]) -> None:
        """Mark exactly ``slots`` as the job's (a controller rebuilding its state from the journal)."""
        keys = tuple((s.node, s.device) for s in slots)
        taken = [k for k in keys if self._holder.get(k, job_id) not in (None, job_id) or k not in self._holder]
        if taken:
            raise ValueError(f"job {job_id}: device slot(s) {taken} are unknown or held by another job")
        self.release(job_id)
        for key in keys:
            self._holder[key] = job_id
        self._held[job_id] = keys

    def _slot(self, key: tuple[int, int]) -> RankSlot:
        node, device = key
        return RankSlot(node, self.testbed.nodes[node].host, device, self._pins.get(key))
