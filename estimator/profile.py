"""A measured device profile (``PROFILE.json``): schema, loading, validation and interpolation.

The disaggregated profiler (``real_runner.profiler``, torch) measures, on one testbed, what the
runner's plans are made of; this module (numpy only) reads its output. A profile holds

* ``device``: the device type it replaces in the hardware catalogue, the backend, the testbed
  shape and how it was measured (threads per device, whether the neighbouring devices were busy);
* ``models``: per profiled model its shapes and, per layer kind (``embed``, ``block``,
  ``head``), the parameter tensors and elements, and how many of them tensor parallelism shards;
* ``compute``: forward and backward seconds of one layer of each kind on one device, plain torch
  at the per-device shapes (``samples`` per micro-batch, ``tp`` local heads), several sample counts;
* ``overhead``: extra seconds per micro-batch that a wrapper adds to a layer, measured on one device
  (``tp``: DTensor tensor parallelism, ``fsdp``: FSDP2, both on a one-rank mesh; ``pipeline``: a
  pipeline schedule step over the whole model, per micro-batch, against the plain loop; from version
  4 a plain loop in the schedule's own op order, so it holds the schedule's machinery only);
* ``optimizer``: seconds of an AdamW step (with ``zero_grad``) as ``per_tensor_s * tensors +
  per_element_s * elements``, plus the extra seconds per DTensor parameter of the two wrappers;
* ``data``: seconds to build a global batch of each size;
* ``calls``: the fixed cost of one autograd backward call, which every layer's timed backward
  contains once but a stage's backward pays once for all its layers;
* ``grouped`` (version 3): forward and backward seconds of a wrapped layer timed on a real group of
  ``group`` devices, collectives and the wrapper's dispatch included (``tp``: a DTensor
  tensor-parallel block on a tensor-parallel group; ``fsdp``: an FSDP2 unit on a data-parallel
  group, gathered in forward and again in backward for blocks, once for the root's embedding and
  head, without gradient synchronisation; ``fsdp_sync``: the same with the gradients
  reduce-scattered in backward, as on a step's last micro-batch). Collectives inside a training step cost more than
  the sum of the isolated tables (DTensor's functional collectives, waits for the slower rank,
  interference with the computation), so where a grouped curve exists the composition uses it in
  place of the plain curve + one-rank overhead + table collectives;
* ``order`` (version 4): per model and number of micro-batches in flight, the extra computation
  (a fraction) of a micro-batch whose backward runs after that many forwards (GPipe's op order:
  every forward, then every backward) over one whose backward follows its forward (gradient
  accumulation), whole model on one device, per micro-batch size (activations revisited after
  other micro-batches have displaced them can cost cache misses and, where the allocator returns
  freed memory, page faults);
* ``restart`` (version 5): per model, the seconds its training process pays on the runner beyond its
  steps, measured on one device with the runner's own worker (:class:`~arena_gym.restarts.RestartCost`:
  the start of a fresh process up to its first steady step, the part of it a pre-launched generation
  spends before its release, a checkpoint save and a checkpoint load); older profiles have none;
* ``comm``: collective tables (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``send_recv``,
  ``all_to_all``) per group size and node count: seconds per message size in bytes, measured
  inside a loop that computes between collectives, as training does.

Interpolation rules (stated once, used everywhere):

* compute and grouped curves are first made non-decreasing in the sample count (:func:`monotone`:
  a point above a larger count's time takes that time; the same layer never costs more for fewer
  samples, so such a point is a timing artefact, typically a cold first call);
* compute curves: linear in the sample count between profiled counts; beyond the largest, linear
  extrapolation along the last segment (never below zero); below the smallest, the smallest
  point scaled by ``samples / smallest``;
* overhead curves (per call, not per sample): linear between profiled counts, the nearest end's
  value outside them; a negative measured overhead (noise) counts as zero;
* order fractions: linear in the sample count between profiled counts, the nearest end's value
  outside them; in the micro-batches in flight linear between profiled counts, from zero at one
  (the profiled layer order), the largest count's value beyond it (once other micro-batches have
  displaced a micro-batch's activations, more of them cost no more); a negative fraction counts
  as zero;
* collective tables: linear in bytes between profiled sizes; below the smallest size, the
  smallest size's time (latency floor); above the largest ``S``, Arena's rule
  ``t(x) = k * t(S) + t(x - k * S)`` with ``k = floor(x / S)``;
* a group size that was not profiled takes the nearest profiled group with the same node count
  (else the nearest node count), scaled by the ring volume factor ``((p - 1) / p) / ((p0 - 1) / p0)``;
  a group of one rank costs nothing.

Sizes of collectives: ``all_reduce`` and ``send_recv`` the buffer, ``all_gather`` the gathered
output, ``reduce_scatter`` the full input, ``all_to_all`` the buffer each rank sends.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arena_gym.fields import FieldError, build, check, read_fields
from arena_gym.restarts import RestartCost
from estimator.restart_costs import RestartTable, costs_from_dict, costs_to_dict

PROFILE_FORMAT = "arena-gym-profile"
#: 2: the autograd backward call cost ("calls"); 3: wrapped layers timed on real groups ("grouped");
#: 4: the op-order cost of micro-batches in flight ("order"), the pipeline overhead against a loop in the same order;
#: 5: the measured (re)start costs per model ("restart")
PROFILE_VERSION = 5
#: Versions this code reads (older profiles lack the later parts and compose without them).
READABLE_VERSIONS = (2, 3, 4, 5)
LAYER_KINDS = ("embed", "block", "head")
WRAPPERS = ("tp", "fsdp", "pipeline")
#: Wrappers timed on real groups (the ``grouped`` curves).
GROUPED_WRAPPERS = ("tp", "fsdp", "fsdp_sync")
COMM_OPS = ("all_reduce", "all_gather", "reduce_scatter", "send_recv", "all_to_all")
NEIGHBOURS = ("busy", "idle")
_MAX_FILE_BYTES = 64 << 20


class ProfileError(ValueError):
    """A profile file that cannot be used (the message names the file and the problem)."""


def _at_least(value: float, where: str, minimum: float = 0.0) -> float:
    """A number (type checked by :mod:`arena_gym.fields`) that must be finite and at least ``minimum``."""
    if not (math.isfinite(value) and value >= minimum):
        raise ProfileError(f"{where} must be a finite number >= {minimum:g}, got {value!r:.40}")
    return value


def _count(value: int, where: str, minimum: int = 1) -> int:
    """An integer (type checked by :mod:`arena_gym.fields`) that must be at least ``minimum``."""
    if value < minimum:
        raise ProfileError(f"{where} must be an integer >= {minimum}, got {value!r:.40}")
    return value


def _name(value: str, where: str, choices: Sequence[str] | None = None) -> str:
    """A string (type checked by :mod:`arena_gym.fields`) that must be non-empty and printable (messages quote it),
    and one of ``choices``."""
    if not (value and value.isprintable()):
        raise ProfileError(f"{where} must be a non-empty printable string, got {value!r:.40}")
    if choices is not None and value not in choices:
        raise ProfileError(f"{where} is {value!r}; valid: {', '.join(choices)}")
    return value


def _items(value: Any, where: str) -> list[Any]:
    """A section that lists entries (each an object read by :func:`read_fields`)."""
    return check(value, list, where)


def _series(
    kw: Mapping[str, Any], where: str, xname: str, yname: str, y_min: float = 0.0
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The checked ``(xs, ys)`` of an entry: as long as each other, at least one point, xs strictly increasing."""
    xs, ys = kw[xname], kw[yname]
    for name, values in ((xname, xs), (yname, ys)):
        if not values:
            raise ProfileError(f"{where}.{name} must be a list of at least 1 item(s)")
    if len(xs) != len(ys):
        raise ProfileError(f"{where}: {xname} and {yname} differ in length ({len(xs)} vs {len(ys)})")
    for i, x in enumerate(xs):
        _count(x, f"{where}.{xname}[{i}]")
    if any(b <= a for a, b in zip(xs, xs[1:])):
        raise ProfileError(f"{where}.{xname} must be strictly increasing")
    return xs, tuple(_at_least(y, f"{where}.{yname}[{i}]", y_min) for i, y in enumerate(ys))


# ----------------------------------------------------------------------------------------------
# the file's sections (what a profile file holds where it differs from the records below)


@dataclass(frozen=True)
class _ProfileFile:
    """The top level of a profile file; the sections typed ``Any`` are read by their own readers."""

    format: str
    version: int
    device: Any
    models: Any
    compute: Any
    overhead: Any
    optimizer: Any
    data: Any
    comm: Any
    calls: Any
    created: str = ""
    code_version: str = ""
    cost: Mapping[str, float] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    grouped: Any = field(default_factory=list)
    order: Any = field(default_factory=list)
    restart: Any = field(default_factory=dict)


@dataclass(frozen=True)
class _Layers:
    """A model's ``layers`` section: the parameters of each layer kind (objects read as :class:`LayerParams`)."""

    embed: Any
    block: Any
    head: Any


@dataclass(frozen=True)
class _CurveEntry:
    """One entry of ``compute`` (with ``tp``), ``overhead`` (with ``wrapper``) or ``grouped`` (with both
    ``wrapper`` and ``group``)."""

    model: str
    layer: str
    samples: tuple[int, ...]
    fw_s: tuple[float, ...]
    bw_s: tuple[float, ...]
    tp: int = 1
    wrapper: str = ""
    group: int = 2


#: The fields of each curve section's entries (all required).
_CURVE_FIELDS = {
    "compute": ("model", "layer", "samples", "fw_s", "bw_s", "tp"),
    "overhead": ("model", "layer", "samples", "fw_s", "bw_s", "wrapper"),
    "grouped": ("model", "layer", "samples", "fw_s", "bw_s", "wrapper", "group"),
}


@dataclass(frozen=True)
class _DataEntry:
    """One entry of ``data``: seconds to build each global batch of a model."""

    model: str
    batch: tuple[int, ...]
    seconds: tuple[float, ...]


@dataclass(frozen=True)
class _CommEntry:
    """One entry of ``comm``: a collective's seconds per message size on one group shape."""

    op: str
    ranks: int
    nodes: int
    bytes: tuple[int, ...]
    seconds: tuple[float, ...]


@dataclass(frozen=True)
class _Calls:
    """The ``calls`` section: the fixed cost of one autograd backward call."""

    backward_s: float


# ----------------------------------------------------------------------------------------------
# records


#: Device kinds a profile can have been measured on.
MEASURED_ON = ("cpu", "cuda")


@dataclass(frozen=True)
class DeviceInfo:
    """What was profiled: the catalogue device type it describes, backend, testbed and conditions."""

    device_type: str  # a hardware-catalogue type (cpu, a100, ...): the type this profile replaces
    backend: str  # gloo or nccl
    testbed: str
    nodes: int
    devices_per_node: int
    host: str  # CPU model or GPU name
    torch: str
    threads_per_device: int = 1
    neighbours: str = "busy"  # whether the other devices of the node were computing during compute profiling
    measured_on: str = ""  # the torch device kind that ran it (cpu, cuda); "" reads as the backend's (gloo: cpu)

    def __post_init__(self) -> None:
        if not self.measured_on:
            object.__setattr__(self, "measured_on", "cuda" if self.backend == "nccl" else "cpu")
        if self.measured_on not in MEASURED_ON:
            raise ProfileError(f"device.measured_on must be one of {', '.join(MEASURED_ON)}, got {self.measured_on!r}")
        if (self.device_type == "cpu") != (self.measured_on == "cpu"):
            raise ProfileError(
                f"the profile describes {self.device_type} devices but was measured on {self.measured_on} "
                f"({self.backend}); profile on the testbed's own devices"
            )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return dict(self.__dict__)

    @staticmethod
    def from_dict(data: Any, where: str = "device") -> DeviceInfo:
        """Validated inverse of :meth:`to_dict`."""
        d = read_fields(DeviceInfo, data, where)
        for key in ("device_type", "backend", "testbed", "host", "torch", "neighbours", "measured_on"):
            if key in d:
                _name(d[key], f"{where}.{key}", _DEVICE_CHOICES.get(key))
        _count(d["nodes"], f"{where}.nodes")
        _count(d["devices_per_node"], f"{where}.devices_per_node")
        _count(d.get("threads_per_device", 1), f"{where}.threads_per_device")
        return DeviceInfo(**d | {"device_type": d["device_type"].lower()})


#: The values some device fields may take.
_DEVICE_CHOICES: Mapping[str, Sequence[str]] = {
    "backend": ("gloo", "nccl"),
    "neighbours": NEIGHBOURS,
    "measured_on": MEASURED_ON,
}


@dataclass(frozen=True)
class LayerParams:
    """Parameters of one layer kind: tensors and elements, and the part tensor parallelism shards."""

    tensors: int
    elements: int
    tp_tensors: int = 0
    tp_elements: int = 0

    def local(self, tp: int = 1, shard: int = 1) -> tuple[int, float]:
        """(tensors, elements) one device holds under ``tp`` and a further ``shard``-way split (FSDP)."""
        elements = (self.elements - self.tp_elements) + self.tp_elements / tp
        return self.tensors, elements / shard


@dataclass(frozen=True)
class ModelInfo:
    """Shapes of a profiled model and the parameters of its layer kinds."""

    name: str
    blocks: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int
    element_bytes: int
    layers: Mapping[str, LayerParams]

    @property
    def n_layers(self) -> int:
        """Length of the layer table: embedding, blocks, head."""
        return self.blocks + 2

    def kind(self, index: int) -> str:
        """Layer kind of layer-table index ``index``."""
        return "embed" if index == 0 else "head" if index == self.blocks + 1 else "block"

    def activation_bytes(self, samples: float) -> float:
        """Bytes of the hidden state of ``samples`` sequences (pipeline messages, TP all-reduces)."""
        return samples * self.seq_len * self.hidden * self.element_bytes

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without the name, which is the key)."""
        return {
            "blocks": self.blocks,
            "hidden": self.hidden,
            "heads": self.heads,
            "seq_len": self.seq_len,
            "vocab": self.vocab,
            "element_bytes": self.element_bytes,
            "layers": {k: dict(v.__dict__) for k, v in self.layers.items()},
        }

    @staticmethod
    def from_dict(name: str, data: Any) -> ModelInfo:
        """Validated inverse of :meth:`to_dict`."""
        where = f"models.{name}"
        d = read_fields(ModelInfo, data, where, {"layers": lambda v: _layers(v, f"{where}.layers")}, names=_MODEL_KEYS)
        for key in _MODEL_KEYS[:-1]:
            _count(d[key], f"{where}.{key}")
        return ModelInfo(name, **d)


#: The keys of a model's entry in ``models`` (its name is the entry's key).
_MODEL_KEYS = ("blocks", "hidden", "heads", "seq_len", "vocab", "element_bytes", "layers")


def _layers(value: Any, where: str) -> dict[str, LayerParams]:
    """A model's ``layers`` section: a :class:`LayerParams` per layer kind."""
    layers = {}
    for kind, item in read_fields(_Layers, value, where).items():
        w = f"{where}.{kind}"
        lp = build(LayerParams, item, w)
        _count(lp.tensors, f"{w}.tensors")
        _count(lp.elements, f"{w}.elements")
        _count(lp.tp_tensors, f"{w}.tp_tensors", 0)
        _count(lp.tp_elements, f"{w}.tp_elements", 0)
        if lp.tp_tensors > lp.tensors or lp.tp_elements > lp.elements:
            raise ProfileError(f"{w}: tensor-parallel part exceeds the layer's parameters")
        layers[kind] = lp
    return {kind: layers[kind] for kind in LAYER_KINDS}


@dataclass(frozen=True)
class Curve:
    """Forward and backward seconds over sample counts (one layer kind, one variant)."""

    model: str
    layer: str  # embed, block, head (or "model" for the pipeline overhead)
    variant: str  # "compute" or a wrapper name
    tp: int  # tensor-parallel degree of a compute curve; the group size of a grouped curve; 1 otherwise
    samples: tuple[int, ...]
    fw_s: tuple[float, ...]
    bw_s: tuple[float, ...]

    def at(self, samples: Any) -> tuple[np.ndarray, np.ndarray]:
        """(forward, backward) seconds at ``samples`` (array-like), by the curve rules of the module docstring."""
        if self.variant == "compute" or self.variant.endswith(GROUPED_SUFFIX):
            below = self.variant == "compute"
            return (
                interp_curve(self.samples, monotone(self.fw_s), samples, below),
                interp_curve(self.samples, monotone(self.bw_s), samples, below),
            )
        x = np.asarray(samples, dtype=float)
        return (
            np.maximum(np.interp(x, self.samples, self.fw_s), 0.0),
            np.maximum(np.interp(x, self.samples, self.bw_s), 0.0),
        )


@dataclass(frozen=True)
class OrderCurve:
    """Extra computation (a fraction) of a micro-batch with ``in_flight`` micro-batches in flight, over sample counts."""

    model: str
    in_flight: int
    samples: tuple[int, ...]
    fraction: tuple[float, ...]


@dataclass(frozen=True)
class OptimizerFit:
    """AdamW step (with zero_grad) seconds: ``per_tensor_s * tensors + per_element_s * elements``,
    plus ``wrapper_per_tensor_s[w]`` per parameter tensor that wrapper ``w`` turns into a DTensor."""

    per_tensor_s: float
    per_element_s: float
    wrapper_per_tensor_s: Mapping[str, float] = field(default_factory=dict)

    def step_s(self, tensors: Any, elements: Any, wrapped_tensors: Mapping[str, Any] | None = None) -> Any:
        """Step seconds of ``tensors`` tensors with ``elements`` elements in total."""
        t = self.per_tensor_s * np.asarray(tensors, dtype=float) + self.per_element_s * np.asarray(
            elements, dtype=float
        )
        for w, n in (wrapped_tensors or {}).items():
            t = t + max(0.0, self.wrapper_per_tensor_s.get(w, 0.0)) * np.asarray(n, dtype=float)
        return t


@dataclass(frozen=True)
class CommTable:
    """One collective on one group shape: seconds per message size (bytes)."""

    op: str
    ranks: int
    nodes: int
    sizes: tuple[int, ...]
    seconds: tuple[float, ...]

    def at(self, nbytes: Any) -> np.ndarray:
        """Seconds for ``nbytes`` (array-like), by the table rules of the module docstring."""
        return interp_table(self.sizes, self.seconds, nbytes)


def monotone(ys: Sequence[float]) -> tuple[float, ...]:
    """The lower envelope from the right: each point at most the time of every larger sample count.

    The same layer never costs more for fewer samples; a point above a larger count's time is an
    artefact of timing (a cold first call after another item) and takes that larger count's time.
    """
    return tuple(float(v) for v in np.minimum.accumulate(np.asarray(ys, dtype=float)[::-1])[::-1])


def interp_curve(xs: Sequence[float], ys: Sequence[float], x: Any, proportional_below: bool) -> np.ndarray:
    """Piecewise-linear curve through ``(xs, ys)``: linear extrapolation along the last segment above
    (clipped at 0); below ``xs[0]`` proportional to ``x`` (``proportional_below``) or constant."""
    xa, ya = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    x = np.asarray(x, dtype=float)
    out = np.interp(x, xa, ya)
    if len(xa) >= 2:
        slope = (ya[-1] - ya[-2]) / (xa[-1] - xa[-2])
        above = np.maximum(ya[-1] + slope * (x - xa[-1]), 0.0)
    else:
        above = ya[-1] * x / xa[-1] if proportional_below else np.full_like(x, ya[-1])
    out = np.where(x > xa[-1], above, out)
    below = ya[0] * x / xa[0] if proportional_below else np.full_like(x, ya[0])
    return np.where(x < xa[0], below, out)


def interp_table(sizes: Sequence[float], seconds: Sequence[float], nbytes: Any) -> np.ndarray:
    """Collective time at ``nbytes``: linear between sizes, the smallest size's time below,
    ``k * t(max) + t(rest)`` above the largest size."""
    xa, ya = np.asarray(sizes, dtype=float), np.asarray(seconds, dtype=float)
    x = np.maximum(np.asarray(nbytes, dtype=float), 0.0)
    top = xa[-1]
    k = np.floor(x / top)
    rest = x - k * top
    inside = np.interp(rest, xa, ya)  # below xs[0] np.interp holds ys[0]: the latency floor
    beyond = k * ya[-1] + np.where(rest > 0, inside, 0.0)
    return np.where(x > top, beyond, np.interp(x, xa, ya))


#: Variant suffix of grouped curves (``tp@group``, ``fsdp@group``).
GROUPED_SUFFIX = "@group"


# ----------------------------------------------------------------------------------------------
# the profile


@dataclass(frozen=True)
class Profile:
    """A whole ``PROFILE.json`` (see the module docstring)."""

    device: DeviceInfo
    models: Mapping[str, ModelInfo]
    compute: tuple[Curve, ...]
    overhead: tuple[Curve, ...]
    optimizer: OptimizerFit
    data: Mapping[str, tuple[tuple[int, ...], tuple[float, ...]]]  # model -> (global batches, seconds)
    comm: tuple[CommTable, ...]
    backward_call_s: float = 0.0  # fixed cost of one autograd backward call (in every layer's bw_s)
    cost: Mapping[str, float] = field(default_factory=dict)  # device-seconds and wall seconds per phase
    settings: Mapping[str, Any] = field(default_factory=dict)
    created: str = ""
    code_version: str = ""
    version: int = PROFILE_VERSION
    grouped: tuple[
        Curve, ...
    ] = ()  # wrapped layers timed on real groups (variant "tp@group" / "fsdp@group", tp = group)
    order: tuple[OrderCurve, ...] = ()  # op-order cost of micro-batches in flight (version 4)
    restart: Mapping[str, RestartCost] = field(default_factory=dict)  # per model (version 5)

    # -- lookups ---------------------------------------------------------------------------

    def model(self, name: str) -> ModelInfo:
        """The profiled model ``name``; ProfileError listing the profiled ones otherwise."""
        info = self.models.get(name)
        if info is None:
            raise ProfileError(
                f"model {name!r} is not in the profile; profiled: {', '.join(sorted(self.models)) or 'none'}"
            )
        return info

    def covers(self, model: str, device_type: str) -> bool:
        """True when this profile describes ``model`` on ``device_type``."""
        return model in self.models and device_type.lower() == self.device.device_type

    def compute_curve(self, model: str, layer: str, tp: int) -> Curve:
        """The plain compute curve of a layer kind at tensor-parallel degree ``tp`` (1 for embed/head)."""
        key = (model, layer, "compute", tp if layer == "block" else 1)
        curve = self._index().get(key)
        if curve is None:
            have = sorted(c.tp for c in self.compute if c.model == model and c.layer == layer)
            raise ProfileError(
                f"profile has no compute curve for {model} {layer} at tp={key[3]} (profiled tp: {have or 'none'}); "
                "profile the testbed again with that tensor-parallel degree"
            )
        return curve

    def overhead_curve(self, model: str, layer: str, wrapper: str) -> Curve | None:
        """The overhead curve of ``wrapper`` on a layer kind (``layer="model"`` for ``pipeline``), or None."""
        return self._index().get((model, layer, wrapper, 1))

    def grouped_curve(self, model: str, layer: str, wrapper: str, group: int) -> Curve | None:
        """The curve of ``wrapper`` on a layer kind timed on a real group of ``group`` devices, or None."""
        return self._index().get((model, layer, wrapper + GROUPED_SUFFIX, group))

    def order_fraction(self, model: str, samples: float, in_flight: int) -> float:
        """Extra computation (a fraction) of a micro-batch of ``samples`` with ``in_flight`` micro-batches in flight
        on its stage, by the order rules of the module docstring; 0 without order curves."""
        curves = sorted((c for c in self.order if c.model == model), key=lambda c: c.in_flight)
        if not curves or in_flight <= 1:
            return 0.0
        depth = [1.0] + [float(c.in_flight) for c in curves]
        frac = [0.0] + [max(0.0, float(np.interp(samples, c.samples, c.fraction))) for c in curves]
        return float(np.interp(in_flight, depth, frac))

    def restart_table(self) -> RestartTable | None:
        """The measured (re)start costs on this profile's device type, or None when it has none."""
        return RestartTable(self.device.device_type, self.restart) if self.restart else None

    def _index(self) -> dict[tuple[str, str, str, int], Curve]:
        cache = self.__dict__.get("_curve_index")
        if cache is None:
            cache = {(c.model, c.layer, c.variant, c.tp): c for c in (*self.compute, *self.overhead, *self.grouped)}
            object.__setattr__(self, "_curve_index", cache)
        return cache

    def data_s(self, model: str, batch: float) -> float:
        """Seconds to build a global batch of ``batch`` sequences (linear in the batch)."""
        entry = self.data.get(model)
        if entry is None:
            return 0.0
        return float(interp_curve(entry[0], entry[1], batch, proportional_below=True))

    def comm_table(self, op: str, ranks: int, nodes: int) -> tuple[CommTable, float]:
        """The table for a group of ``ranks`` over ``nodes`` nodes, and the scale factor of the group-size rule."""
        tables = [t for t in self.comm if t.op == op]
        if not tables:
            raise ProfileError(
                f"profile has no {op} table; profiled collectives: {', '.join(sorted({t.op for t in self.comm})) or 'none'}"
            )
        exact = [t for t in tables if t.ranks == ranks and t.nodes == nodes]
        if exact:
            return exact[0], 1.0
        best = min(tables, key=lambda t: (abs(t.nodes - nodes), abs(t.ranks - ranks), t.ranks))
        p0, p = best.ranks, ranks
        return best, ((p - 1) / p) / ((p0 - 1) / p0)

    def comm_s(self, op: str, nbytes: Any, ranks: int, nodes: int = 1) -> np.ndarray:
        """Seconds of collective ``op`` of ``nbytes`` on a group of ``ranks`` spanning ``nodes`` nodes."""
        if ranks <= 1:
            return np.zeros_like(np.asarray(nbytes, dtype=float))
        table, scale = self.comm_table(op, ranks, nodes)
        return table.at(nbytes) * scale

    # -- serialisation -----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the file format)."""

        def curve(c: Curve) -> dict[str, Any]:
            d: dict[str, Any] = {
                "model": c.model,
                "layer": c.layer,
                "samples": list(c.samples),
                "fw_s": list(c.fw_s),
                "bw_s": list(c.bw_s),
            }
            if c.variant == "compute":
                d["tp"] = c.tp
            else:
                d["wrapper"] = c.variant
            return d

        return {
            "format": PROFILE_FORMAT,
            "version": self.version,
            "created": self.created,
            "code_version": self.code_version,
            "device": self.device.to_dict(),
            "models": {k: v.to_dict() for k, v in self.models.items()},
            "compute": [curve(c) for c in self.compute],
            "overhead": [curve(c) for c in self.overhead],
            "optimizer": {
                "per_tensor_s": self.optimizer.per_tensor_s,
                "per_element_s": self.optimizer.per_element_s,
                "wrapper_per_tensor_s": dict(self.optimizer.wrapper_per_tensor_s),
            },
            "data": [{"model": m, "batch": list(b), "seconds": list(s)} for m, (b, s) in self.data.items()],
            "calls": {"backward_s": self.backward_call_s},
            "grouped": [
                {
                    "model": c.model,
                    "layer": c.layer,
                    "wrapper": c.variant.removesuffix(GROUPED_SUFFIX),
                    "group": c.tp,
                    "samples": list(c.samples),
                    "fw_s": list(c.fw_s),
                    "bw_s": list(c.bw_s),
                }
                for c in self.grouped
            ],
            "order": [
                {"model": c.model, "in_flight": c.in_flight, "samples": list(c.samples), "fraction": list(c.fraction)}
                for c in self.order
            ],
            "comm": [
                {"op": t.op, "ranks": t.ranks, "nodes": t.nodes, "bytes": list(t.sizes), "seconds": list(t.seconds)}
                for t in self.comm
            ],
            "cost": dict(self.cost),
            "settings": dict(self.settings),
        } | ({"restart": costs_to_dict(self.restart)} if self.restart else {})

    def to_json(self) -> str:
        """The file text."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @staticmethod
    def from_dict(data: Any, source: str = "profile") -> Profile:
        """Validated inverse of :meth:`to_dict`; ProfileError naming the problem."""
        try:
            return _parse(data)
        except (ProfileError, FieldError) as exc:
            raise ProfileError(f"{source}: {exc}") from None


def _parse(data: Any) -> Profile:
    top = build(_ProfileFile, data, "profile")
    if top.format != PROFILE_FORMAT:
        raise ProfileError(f"not a profile (format {top.format!r}, expected {PROFILE_FORMAT!r})")
    if top.version not in READABLE_VERSIONS:
        raise ProfileError(
            f"profile version {top.version!r} is not supported (this code reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}); profile the testbed again"
        )
    device = DeviceInfo.from_dict(top.device)
    models_d = check(top.models, Mapping[str, Any], "models")
    if not models_d:
        raise ProfileError("models must be a non-empty object")
    models = {k: ModelInfo.from_dict(k, v) for k, v in models_d.items()}
    compute, overhead = _curves(top.compute, "compute", models), _curves(top.overhead, "overhead", models)
    for name in models:
        for kind in LAYER_KINDS:
            if not any(c.model == name and c.layer == kind and c.tp == 1 for c in compute):
                raise ProfileError(f"compute has no {kind} curve at tp=1 for {name}")
    return Profile(
        device,
        models,
        compute,
        overhead,
        _optimizer(top.optimizer),
        _data(top.data),
        _comm(top.comm),
        _at_least(build(_Calls, top.calls, "calls").backward_s, "calls.backward_s"),
        {k: _at_least(v, f"cost.{k}") for k, v in top.cost.items()},
        dict(top.settings),
        top.created,
        top.code_version,
        top.version,
        _curves(top.grouped, "grouped", models),
        _order(top.order, models),
        _restart(top.restart, models),
    )


def _restart(value: Any, models: Mapping[str, ModelInfo]) -> dict[str, RestartCost]:
    try:
        costs = costs_from_dict(value, "restart")
    except ValueError as exc:
        raise ProfileError(str(exc)) from None
    unknown = sorted(set(costs) - set(models))
    if unknown:
        raise ProfileError(f"restart names model(s) not in models: {', '.join(unknown)}")
    return costs


def _model(model: str, where: str, models: Mapping[str, ModelInfo]) -> str:
    _name(model, f"{where}.model")
    if model not in models:
        raise ProfileError(f"{where}.model {model!r} is not in models")
    return model


def _unique(items: Sequence[Any], key: Any, message: str) -> tuple[Any, ...]:
    if len({key(item) for item in items}) != len(items):
        raise ProfileError(message)
    return tuple(items)


def _curves(value: Any, key: str, models: Mapping[str, ModelInfo]) -> tuple[Curve, ...]:
    """The curves of section ``key`` (``compute``, ``overhead`` or ``grouped``)."""
    out = []
    names = _CURVE_FIELDS[key]
    for i, item in enumerate(_items(value, key)):
        w = f"{key}[{i}]"
        d = read_fields(_CurveEntry, item, w, names=names, require=names)
        model = _model(d["model"], w, models)
        y_min = -math.inf if key == "overhead" else 0.0  # a measured overhead may come out below zero
        samples, fw = _series(d, w, "samples", "fw_s", y_min)
        _, bw = _series(d, w, "samples", "bw_s", y_min)
        if key == "compute":
            layer = _name(d["layer"], f"{w}.layer", LAYER_KINDS)
            out.append(Curve(model, layer, "compute", _count(d["tp"], f"{w}.tp"), samples, fw, bw))
        elif key == "overhead":
            wrapper = _name(d["wrapper"], f"{w}.wrapper", WRAPPERS)
            layer = _name(d["layer"], f"{w}.layer", ("model",) if wrapper == "pipeline" else LAYER_KINDS)
            out.append(Curve(model, layer, wrapper, 1, samples, fw, bw))
        else:
            wrapper = _name(d["wrapper"], f"{w}.wrapper", GROUPED_WRAPPERS)
            layer = _name(d["layer"], f"{w}.layer", ("block",) if wrapper == "tp" else LAYER_KINDS)
            group = _count(d["group"], f"{w}.group", 2)
            out.append(Curve(model, layer, wrapper + GROUPED_SUFFIX, group, samples, fw, bw))
    return _unique(out, lambda c: (c.model, c.layer, c.variant, c.tp), f"{key} lists a curve twice")


def _order(value: Any, models: Mapping[str, ModelInfo]) -> tuple[OrderCurve, ...]:
    order = []
    for i, item in enumerate(_items(value, "order")):
        w = f"order[{i}]"
        d = read_fields(OrderCurve, item, w)
        model = _model(d["model"], w, models)
        samples, fraction = _series(d, w, "samples", "fraction", -math.inf)
        order.append(OrderCurve(model, _count(d["in_flight"], f"{w}.in_flight", 2), samples, fraction))
    return _unique(order, lambda c: (c.model, c.in_flight), "order lists a curve twice")


def _optimizer(value: Any) -> OptimizerFit:
    fit = build(OptimizerFit, value, "optimizer")
    for key, per_tensor in fit.wrapper_per_tensor_s.items():
        _name(key, "optimizer.wrapper_per_tensor_s key", WRAPPERS)
        _at_least(per_tensor, f"optimizer.wrapper_per_tensor_s.{key}", -math.inf)
    _at_least(fit.per_tensor_s, "optimizer.per_tensor_s")
    _at_least(fit.per_element_s, "optimizer.per_element_s")
    return OptimizerFit(fit.per_tensor_s, fit.per_element_s, dict(fit.wrapper_per_tensor_s))


def _data(value: Any) -> dict[str, tuple[tuple[int, ...], tuple[float, ...]]]:
    data = {}
    for i, item in enumerate(_items(value, "data")):
        w = f"data[{i}]"
        d = read_fields(_DataEntry, item, w)
        data[_name(d["model"], f"{w}.model")] = _series(d, w, "batch", "seconds")
    return data


def _comm(value: Any) -> tuple[CommTable, ...]:
    comm = []
    for i, item in enumerate(_items(value, "comm")):
        w = f"comm[{i}]"
        d = read_fields(_CommEntry, item, w)
        sizes, secs = _series(d, w, "bytes", "seconds")
        op = _name(d["op"], f"{w}.op", COMM_OPS)
        comm.append(CommTable(op, _count(d["ranks"], f"{w}.ranks", 2), _count(d["nodes"], f"{w}.nodes"), sizes, secs))
    return _unique(comm, lambda t: (t.op, t.ranks, t.nodes), "comm lists a table twice")


def load_profile(path: str | Path) -> Profile:
    """Read and validate a ``PROFILE.json``; ProfileError (one line, naming the file) when unusable."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"{path}: no such profile file")
    if path.stat().st_size > _MAX_FILE_BYTES:
        raise ProfileError(f"{path}: larger than {_MAX_FILE_BYTES >> 20} MiB, not a profile")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProfileError(
            f"{path}: not valid JSON ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    return Profile.from_dict(data, str(path))
