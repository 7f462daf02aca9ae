"""The estimator's tunable parameters and their committed, calibrated values.

The cost model is a roofline (compute at a fraction of the datasheet peak plus memory traffic
at a fraction of the datasheet bandwidth) and an alpha-beta communication model. Its few
efficiency parameters are:

* per model kind (the efficiency class a family names, ``transformer``, ``moe``, ``wide_resnet``
  for the built-in ones; a family's ``efficiency`` seeds a kind of its own): ``eta_compute`` (fraction of the
  peak matrix rate reached by large GEMMs), ``eta_memory`` (fraction of the memory bandwidth
  reached) and ``tile_rows`` (GEMM rows at which efficiency halves: a matrix product of ``r``
  rows runs at ``r / (r + tile_rows)`` of ``eta_compute``, which costs a fixed
  ``2 * weights * tile_rows`` FLOPs per pass and micro-batch);
* global: ``nu_intra`` / ``nu_inter`` (fraction of the intra-node link / inter-node network
  bandwidth reached by collectives), ``latency_scale`` (multiplies the links' datasheet
  latencies) and ``kernel_us`` (fixed cost per kernel launch);
* per GPU type, multipliers ``compute``, ``memory``, ``comm`` and ``kernel`` on the global values (1.0 for a
  type without measurements: it is predicted from its specs alone).

``arena-gym estimate calibrate`` fits them; the fitted values for the shipped types live in
``estimator/data/calibration.json``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from arena_gym.families import families
from arena_gym.fields import FieldError, build, check, read_fields

T = TypeVar("T")

#: Bumped whenever the cost model's equations change (part of every cache key).
ESTIMATOR_VERSION = "1.4"
DEFAULT_PARAMS_FILE = "calibration.json"


@dataclass(frozen=True, slots=True)
class KindParams:
    """Efficiencies of one model kind."""

    eta_compute: float = 0.7
    eta_memory: float = 0.5
    tile_rows: float = 128.0  # GEMM rows at which matrix units reach half their efficiency
    comm: float = 1.0  # multiplies the global communication efficiencies


@dataclass(frozen=True, slots=True)
class TypeParams:
    """Multipliers for one GPU type (1.0 = predicted from specs alone)."""

    compute: float = 1.0  # tensor-core (fp16/bf16) matrix math
    compute_fp32: float = 1.0  # fp32 matrix math (CUDA cores)
    memory: float = 1.0
    comm: float = 1.0
    kernel: float = 1.0  # multiplies the global kernel_us (fixed cost per kernel launch)


@dataclass(frozen=True, slots=True)
class DpMemoryParams:
    """How a profiled data-parallel memory need scales, for one model kind (``estimator.dpmemory``)."""

    sharded_bytes: float  # bytes per parameter divided over the replicas (optimizer state)
    act_factor: float = 1.0  # multiplies the analytical activation memory of one micro-batch


def family_kinds() -> dict[str, KindParams]:
    """The default efficiencies of every kind the registered families declare (``ModelFamily.efficiency``),
    in the order of the families."""
    out: dict[str, KindParams] = {}
    for family in families().values():
        if family.efficiency is not None and family.kind not in out:
            out[family.kind] = KindParams(**family.efficiency)
    return out


def kinds() -> tuple[str, ...]:
    """The model kinds of the registered families, in their order (``transformer``, ``moe``, ``wide_resnet``, ...)."""
    return tuple(dict.fromkeys(f.kind for f in families().values()))


@dataclass(frozen=True)
class EstimatorParams:
    """All parameters of the cost model (see the module docstring)."""

    kinds: Mapping[str, KindParams] = field(default_factory=lambda: family_kinds())
    nu_intra: float = 0.3
    nu_inter: float = 0.3
    latency_scale: float = 1.0
    kernel_us: float = 20.0
    gpu_types: Mapping[str, TypeParams] = field(default_factory=dict)
    memory_fraction: float = 0.8  # usable share of GPU memory (XLA's pre-allocation fraction)
    source: str = "built-in defaults"
    dp_memory: Mapping[str, DpMemoryParams] = field(default_factory=dict)  # per kind; empty: physical defaults

    def kind(self, kind: str) -> KindParams:
        """Efficiencies of a model kind: calibrated, else the defaults its family declares, else ``transformer``'s."""
        return self.kinds.get(kind) or family_kinds().get(kind) or self.kinds.get("transformer") or KindParams()

    def gpu_type(self, name: str) -> TypeParams:
        """Multipliers of a canonical GPU name (all 1.0 when it was not calibrated)."""
        return self.gpu_types.get(name, TypeParams())

    def without_types(self, *names: str) -> EstimatorParams:
        """A copy whose listed GPU types fall back to their specs alone."""
        return replace(self, gpu_types={k: v for k, v in self.gpu_types.items() if k not in names})

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "version": ESTIMATOR_VERSION,
            "kinds": {
                k: {"eta_compute": v.eta_compute, "eta_memory": v.eta_memory, "tile_rows": v.tile_rows, "comm": v.comm}
                for k, v in sorted(self.kinds.items())
            },
            "global": {name: getattr(self, name) for name in _GLOBAL},
            "gpu_types": {
                k: {"compute": v.compute, "compute_fp32": v.compute_fp32, "memory": v.memory, "comm": v.comm}
                | ({"kernel": v.kernel} if v.kernel != 1.0 else {})
                for k, v in sorted(self.gpu_types.items())
            },
            "dp_memory": {
                k: {"sharded_bytes": v.sharded_bytes, "act_factor": v.act_factor}
                for k, v in sorted(self.dp_memory.items())
            },
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any], source: str = "") -> EstimatorParams:
        """Inverse of :meth:`to_dict` (read through :mod:`arena_gym.fields`); ValueError naming the bad field."""
        where = f"estimator parameters {source}".rstrip()
        top = check(data, Mapping[str, Any], where)
        missing = [name for name in ("kinds", "global") if name not in top]
        if missing:
            raise FieldError(f"{where}: missing field(s) {', '.join(missing)}")
        kinds = _entries(KindParams, top["kinds"], f"{where}: kinds", ("eta_compute", "eta_memory"))
        types = _entries(TypeParams, top.get("gpu_types", {}), f"{where}: gpu_types", ("compute", "memory", "comm"))
        dp_memory = _entries(DpMemoryParams, top.get("dp_memory", {}), f"{where}: dp_memory", ("act_factor",))
        glob = read_fields(EstimatorParams, top["global"], f"{where}: global", names=_GLOBAL, require=_GLOBAL[:-1])
        params = EstimatorParams(kinds, gpu_types=types, source=source, dp_memory=dp_memory, **glob)
        values = [params.nu_intra, params.nu_inter, params.latency_scale, params.memory_fraction]
        values += [x for k in kinds.values() for x in (k.eta_compute, k.eta_memory, k.tile_rows, k.comm)]
        values += [x for t in types.values() for x in (t.compute, t.compute_fp32, t.memory, t.comm, t.kernel)]
        if not all(v > 0 for v in values) or params.kernel_us < 0:
            raise ValueError(f"{where}: every efficiency must be positive")
        if not all(v.sharded_bytes >= 0 and v.act_factor > 0 for v in dp_memory.values()):
            raise ValueError(f"{where}: dp_memory needs sharded_bytes >= 0 and act_factor > 0")
        return params

    def fingerprint(self) -> str:
        """A stable hash (cache keys)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    def save(self, path: str | Path, extra: Mapping[str, Any] | None = None) -> None:
        """Write as JSON, with optional extra (informational) keys."""
        Path(path).write_text(json.dumps({**self.to_dict(), **(extra or {})}, indent=2, sort_keys=False) + "\n")

    @staticmethod
    def load(path: str | Path) -> EstimatorParams:
        """Read a JSON parameter file."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: cannot read estimator parameters: {str(exc).splitlines()[0]}") from None
        return EstimatorParams.from_dict(data, str(path))


#: The fields of the file's ``global`` section, in file order (all but the last required).
_GLOBAL = ("nu_intra", "nu_inter", "latency_scale", "kernel_us", "memory_fraction")


def _entries(cls: type[T], data: Any, where: str, require: tuple[str, ...]) -> dict[str, T]:
    """A section of named records (``kinds``, ``gpu_types``, ``dp_memory``) read through :func:`build`."""
    return {
        name: build(cls, entry, f"{where}.{name}", require=require)
        for name, entry in check(data, Mapping[str, Any], where).items()
    }


def default_params() -> EstimatorParams:
    """The committed calibrated parameters (``estimator/data/calibration.json``), else built-in defaults."""
    ref = resources.files("estimator").joinpath("data").joinpath(DEFAULT_PARAMS_FILE)
    if not ref.is_file():
        return EstimatorParams()
    return EstimatorParams.from_dict(json.loads(ref.read_text()), f"estimator/data/{DEFAULT_PARAMS_FILE}")
