"""Testbed descriptions: the machines a live deployment runs on (no torch here).

A testbed is ``nodes`` x ``devices_per_node`` devices of one type from the hardware catalogue
(``a100``, ``h100``, ... or ``cpu``), a launcher (``local`` or ``ray``) and a checkpoint root that
every node can read. To a policy it is a one-type :class:`~arena_gym.types.ClusterSpec`.

Devices are addressed per node: CUDA device indices (``CUDA_VISIBLE_DEVICES``) on GPU machines,
CPU core ids on CPU testbeds, where each device is a single-threaded gloo process slot pinned to
its core. The built-in presets ``cpu-1``, ``cpu-2`` and ``cpu-4`` emulate 1, 1 and 2 nodes of one
to two CPU devices on this machine. A file (JSON or TOML) describes real machines::

    {"name": "lab", "device_type": "a100", "launcher": "ray", "checkpoint_root": "/shared/ckpt", "precision": "auto",
     "nodes": [{"host": "10.0.0.1", "devices": [0, 1, 2, 3]},
               {"host": "10.0.0.2", "devices": [0, 1, 2, 3]}]}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arena_gym.fields import FieldError, build, check, check_fields, short
from arena_gym.types import ClusterSpec, GpuType, NodeGroup, is_power_of_two
from estimator.hardware import canonical_gpu_name
from real_runner.training_modes import check_precision

#: Launchers a testbed may name (the registry's fake one needs a performance model and a clock: tests build it).
LAUNCHERS = ("local", "ray")

_MAX_DEVICE = 4095
_MAX_FILE_BYTES = 1 << 20


@dataclass(frozen=True)
class TestbedNode:
    """One machine (or, on a CPU testbed, one emulated node): its host and device ids."""

    __test__ = False  # not a pytest test class despite the name

    host: str
    devices: tuple[int, ...]

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass(frozen=True)
class Testbed:
    """A live testbed: nodes of one device type, a launcher and a checkpoint root."""

    __test__ = False  # not a pytest test class despite the name

    name: str
    device_type: str
    nodes: tuple[TestbedNode, ...]
    launcher: str = "local"
    checkpoint_root: str = ""  # empty: a folder inside the deployment's output directory
    precision: str = "auto"  # the jobs' compute precision (real_runner.training_modes), unless the run sets one

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.name:
            raise ValueError("a testbed's name must be a non-empty string")
        if not self.nodes:
            raise ValueError(f"testbed {self.name!r}: needs at least one node")
        for node in self.nodes:
            if not node.host:
                raise ValueError(f"testbed {self.name!r}: a node's host must be a non-empty string")
            if not node.devices or not all(0 <= d <= _MAX_DEVICE for d in node.devices):
                raise ValueError(
                    f"testbed {self.name!r}: node {node.host!r} devices must be a non-empty list of device ids 0..{_MAX_DEVICE}"
                )
            if len(set(node.devices)) != len(node.devices):
                raise ValueError(f"testbed {self.name!r}: node {node.host!r} lists a device twice")
        counts = {len(n.devices) for n in self.nodes}
        if len(counts) != 1:
            raise ValueError(f"testbed {self.name!r}: every node needs the same device count, got {sorted(counts)}")
        if not is_power_of_two(self.devices_per_node):
            raise ValueError(
                f"testbed {self.name!r}: devices per node must be a power of two, got {self.devices_per_node}"
            )
        check_precision(self.precision, f"testbed {self.name!r}")
        if self.launcher not in LAUNCHERS:
            raise ValueError(
                f"testbed {self.name!r}: unknown launcher {self.launcher!r}; valid: {', '.join(LAUNCHERS)}"
            )

    @property
    def devices_per_node(self) -> int:
        """Devices on every node."""
        return len(self.nodes[0].devices)

    @property
    def total_devices(self) -> int:
        """Devices in total."""
        return len(self.nodes) * self.devices_per_node

    @property
    def is_cpu(self) -> bool:
        """True when every device is a CPU core (gloo), not a GPU (nccl)."""
        return self.device_type == "cpu"

    def cluster(self) -> ClusterSpec:
        """The testbed as the one-type cluster a policy schedules on."""
        return ClusterSpec(self.name, (NodeGroup(GpuType(self.device_type), len(self.nodes), self.devices_per_node),))

    def oversubscription(self, cores: int) -> float:
        """Devices per available core on a CPU testbed (> 1: jobs slow each other down); 1.0 for GPUs."""
        if not self.is_cpu:
            return 1.0
        return self.total_devices / max(1, cores)


def _cpu_preset(name: str, nodes: int, per_node: int) -> Testbed:
    cores = iter(range(nodes * per_node))
    return Testbed(
        name, "cpu", tuple(TestbedNode("localhost", tuple(next(cores) for _ in range(per_node))) for _ in range(nodes))
    )


#: Built-in testbeds for this kind of machine: CPU cores as devices, all on localhost.
PRESETS: dict[str, Testbed] = {
    "cpu-1": _cpu_preset("cpu-1", 1, 1),
    "cpu-2": _cpu_preset("cpu-2", 1, 2),
    "cpu-4": _cpu_preset("cpu-4", 2, 2),
}


def available_cores() -> int:
    """CPU cores this process may run on."""
    return len(os.sched_getaffinity(0))


def testbed_from_dict(data: Mapping[str, Any], name: str) -> Testbed:
    """Build a testbed from its serialised form (see the module docstring; read through :mod:`arena_gym.fields`,
    ``name`` defaulting to ``name``); ValueError naming the problem."""
    given = {"name": name, **data} if isinstance(data, Mapping) else data
    return build(
        Testbed, given, name, {"device_type": lambda v: _device_type(v, name), "nodes": lambda v: _nodes(v, name)}
    )


def _device_type(value: Any, where: str) -> str:
    """A type of the hardware catalogue in the user's spelling, lower case (a100, not a100-40gb)."""
    text = check(value, str, f"{where}: device_type")
    try:
        canonical_gpu_name(text)
    except ValueError as exc:
        raise ValueError(f"{where}: device_type: {exc}") from None
    return text.strip().lower()


def _nodes(value: Any, where: str) -> tuple[TestbedNode, ...]:
    """The ``nodes`` list, each ``{host (default localhost), devices}``."""
    if not isinstance(value, list) or not value:
        raise FieldError(f"{where}: nodes must be a non-empty list of {{host, devices}}, got {short(value)}")
    return tuple(
        build(TestbedNode, {"host": "localhost", **node} if isinstance(node, Mapping) else node, f"{where}: nodes[{i}]")
        for i, node in enumerate(value)
    )


def load_testbed(spec: str) -> Testbed:
    """A preset name (``cpu-1``, ``cpu-2``, ``cpu-4``) or a JSON/TOML testbed file."""
    if spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if not path.is_file():
        raise ValueError(f"unknown testbed {spec!r}: not a file; presets are {', '.join(PRESETS)}")
    if path.stat().st_size > _MAX_FILE_BYTES:
        raise ValueError(f"{path}: testbed file larger than {_MAX_FILE_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() == ".toml":
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{path}: cannot parse testbed file: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a testbed file must hold an object/table")
    return testbed_from_dict(data, path.stem)
