"""Model zoo: the architectures of the registered model families, plus user-defined transformers.

The families themselves (sizes, optimizer state, trace mix, live builder) are records of the
family catalogue (:mod:`arena_gym.families`; the built-in ones in ``estimator/families/``); this
module holds the two architecture builders they use and the lookup by name. Architectures follow Alpa's benchmark suite as used by the Arena artifact (docs/arena.md
§8.2): GPT (seq 1024, vocab 51,200, fp16, tied embeddings), GShard-style MoE (seq 1024, vocab
32,000, fp16, every second layer an MoE layer with 8x-wide experts, top-2 gating, expert group
2,048 tokens) and Wide-ResNet (bottleneck blocks, image 224, 1,024 classes, fp32).

Each model is a sequence of layers (embedding, blocks, head) with, per layer and per sample
(one sequence or one image):

* ``params`` (replicated by data parallelism, sharded by tensor parallelism) and
  ``expert_params`` (MoE experts, sharded by expert parallelism along the data axis);
* ``flops``: forward matrix-unit FLOPs (GEMMs, convolutions); backward costs twice that;
* ``op_bytes`` / ``rep_bytes``: forward memory traffic of the layer's operands and memory-bound
  ops, split across / replicated on the tensor-parallel ranks;
* ``act_saved``: bytes kept for the backward pass without rematerialisation; ``act_in`` /
  ``act_out``: the layer's input and output tensors (checkpoints, pipeline messages);
* ``tp_bytes``: bytes all-reduced per forward pass under tensor parallelism; ``a2a_bytes``:
  bytes exchanged all-to-all per forward pass under expert parallelism;
* ``kernels``: kernels launched per forward pass (fixed per-kernel overhead).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from arena_gym.families import families
from arena_gym.fields import fits, read_fields
from arena_gym.types import ModelRef

DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}

#: Per-layer quantities, in the order of :class:`LayerTable`'s arrays.
LAYER_FIELDS = (
    "params",
    "expert_params",
    "flops",
    "op_bytes",
    "rep_bytes",
    "act_saved",
    "act_in",
    "act_out",
    "tp_bytes",
    "a2a_bytes",
    "kernels",
)


@dataclass(frozen=True, eq=False)
class LayerTable:
    """Per-layer costs of a model (see the module docstring); arrays are read-only."""

    names: tuple[str, ...]
    params: np.ndarray
    expert_params: np.ndarray
    flops: np.ndarray
    op_bytes: np.ndarray
    rep_bytes: np.ndarray
    act_saved: np.ndarray
    act_in: np.ndarray
    act_out: np.ndarray
    tp_bytes: np.ndarray
    a2a_bytes: np.ndarray
    kernels: np.ndarray

    @staticmethod
    def from_rows(rows: list[dict[str, Any]]) -> LayerTable:
        """Build from one dict per layer with ``name`` and every field of :data:`LAYER_FIELDS`."""
        arrays = {}
        for key in LAYER_FIELDS:
            arr = np.array([float(r.get(key, 0.0)) for r in rows], dtype=np.float64)
            arr.setflags(write=False)
            arrays[key] = arr
        return LayerTable(tuple(str(r["name"]) for r in rows), **arrays)

    def __len__(self) -> int:
        return len(self.names)

    def matrix(self) -> np.ndarray:
        """All fields stacked as a ``[len(LAYER_FIELDS), n_layers]`` array."""
        return np.stack([getattr(self, k) for k in LAYER_FIELDS])


@dataclass(frozen=True, eq=False)
class ModelArch:
    """A model's architecture and its per-layer cost table."""

    name: str  # family__size
    family: str  # gpt | moe | wide_resnet | a user family
    kind: str  # transformer | moe | wide_resnet: which efficiency class it uses
    dtype: str
    remat: bool  # full activation rematerialisation per layer
    sample_tokens: int  # tokens per sample (1 for images)
    min_tokens_per_gpu: int  # MoE expert group size: each GPU needs at least this many tokens per micro-batch
    experts: int
    tied_params: float  # parameters shared by the first and last layer (tied embeddings)
    layers: LayerTable
    config: Mapping[str, Any] = field(default_factory=dict)
    optimizer_bytes: float = 8.0  # optimizer moments per parameter (the family's ``optimizer_bytes``)

    @property
    def ref(self) -> ModelRef:
        """The ModelRef of this architecture."""
        return ModelRef.parse(self.name)

    @property
    def dtype_bytes(self) -> int:
        """Bytes per weight / activation element."""
        return DTYPE_BYTES[self.dtype]

    @property
    def state_bytes_per_param(self) -> tuple[int, int, float]:
        """(weight, gradient, optimizer) bytes per parameter: the family's optimizer moments
        (:attr:`optimizer_bytes`) plus an fp32 master copy when the weights are half precision."""
        d = self.dtype_bytes
        return d, d, self.optimizer_bytes + (4 if d < 4 else 0)

    @property
    def param_count(self) -> float:
        """Total trainable parameters (tied weights counted once)."""
        return float(self.layers.params.sum() + self.layers.expert_params.sum() - self.tied_params)

    @property
    def flops_per_sample(self) -> float:
        """Forward matrix FLOPs per sample."""
        return float(self.layers.flops.sum())

    def fingerprint(self) -> str:
        """A stable hash of the architecture and its cost table (for cache keys)."""
        h = hashlib.sha256()
        h.update(
            json.dumps(
                [
                    self.name,
                    self.kind,
                    self.dtype,
                    self.remat,
                    self.sample_tokens,
                    self.min_tokens_per_gpu,
                    self.experts,
                    self.tied_params,
                ],
                sort_keys=True,
            ).encode()
        )
        h.update(np.ascontiguousarray(self.layers.matrix()).tobytes())
        return h.hexdigest()[:16]


# ----------------------------------------------------------------------------------------------
# transformers


@dataclass(frozen=True)
class TransformerSpec:
    """A small spec of a GPT-style (``experts == 0``) or GShard-MoE transformer.

    MoE models put an expert layer at every ``expert_every``-th block (odd blocks by default),
    with ``expert_ffn_mult`` x hidden experts, top-2 gating and capacity factor 1.
    """

    name: str  # family__size
    layers: int
    hidden: int
    heads: int
    seq_len: int = 1024
    vocab: int = 51200
    ffn_mult: int = 4
    dtype: str = "fp16"
    experts: int = 0
    expert_every: int = 2
    expert_ffn_mult: int = 8
    expert_group: int = 2048
    tied_embeddings: bool = True
    remat: bool = True

    def __post_init__(self) -> None:
        ModelRef.spelled(self.name)
        for key in ("layers", "hidden", "heads", "seq_len", "vocab", "ffn_mult"):
            if int(getattr(self, key)) < 1:
                raise ValueError(f"model {self.name}: {key} must be >= 1, got {getattr(self, key)}")
        if self.hidden % self.heads:
            raise ValueError(f"model {self.name}: hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"model {self.name}: unknown dtype {self.dtype!r}; valid: {', '.join(DTYPE_BYTES)}")
        if self.experts < 0 or self.expert_every < 1 or self.expert_group < 1:
            raise ValueError(f"model {self.name}: experts >= 0, expert_every >= 1 and expert_group >= 1 required")


def _dense_block(s: int, h: int, a: int, f: int, d: int) -> dict[str, float]:
    sh = s * h
    return {
        "params": 4 * h * h + 4 * h + 2 * f * h * h + f * h + h + 4 * h,
        "flops": 2 * s * (4 * h * h + 2 * f * h * h) + 4 * s * s * h,
        "op_bytes": d * ((8 + 2 * f) * sh + 4 * a * s * s + 2 * f * sh),
        "rep_bytes": d * 12 * sh,
        "act_saved": d / 2 * (sh * (18 + 4 * f) + 5 * a * s * s),
        "act_in": d * sh,
        "act_out": d * sh,
        "tp_bytes": 2 * d * sh,
        "kernels": 24,
    }


def _moe_block(s: int, h: int, a: int, e: int, fe: int, group: int, d: int) -> dict[str, float]:
    sh = s * h
    tokens = 2 * s  # top-2 routing, capacity factor 1: two expert-token slots per token
    return {
        "params": 4 * h * h + 4 * h + 4 * h + h * e,
        "expert_params": e * (2 * fe * h * h + fe * h + h),
        "flops": 2 * s * 4 * h * h + 4 * s * s * h + 2 * sh * e + 8 * group * sh + 4 * fe * h * h * tokens,
        "op_bytes": d * (6 * sh + 4 * a * s * s + tokens * (2 * h + 2 * fe * h) + 2 * fe * h * tokens + 8 * group * s),
        "rep_bytes": d * 12 * sh,
        "act_saved": d * (7.5 * sh + 2.5 * a * s * s + tokens * (h + 2 * fe * h) + 4 * group * s),
        "act_in": d * sh,
        "act_out": d * sh,
        "tp_bytes": 2 * d * sh,
        "a2a_bytes": 2 * d * tokens * h,
        "kernels": 36,
    }


def kind_optimizer_bytes(kind: str) -> float:
    """The optimizer bytes per parameter of the first registered family of ``kind`` (8, AdamW's
    two fp32 moments, when none is): what a user model of that kind is charged."""
    return next((f.optimizer_bytes for f in families().values() if f.kind == kind), 8.0)


def build_transformer(spec: TransformerSpec, optimizer_bytes: float | None = None) -> ModelArch:
    """A GPT or MoE :class:`ModelArch` from a :class:`TransformerSpec` (``optimizer_bytes`` default:
    :func:`kind_optimizer_bytes`; a family's own sizes are charged its ``optimizer_bytes``)."""
    s, h, a, v, d = spec.seq_len, spec.hidden, spec.heads, spec.vocab, DTYPE_BYTES[spec.dtype]
    sh = s * h
    rows: list[dict[str, Any]] = [
        {
            "name": "embed",
            "params": v * h + sh,
            "op_bytes": 3 * d * sh,
            "act_in": 4 * s,
            "act_out": d * sh,
            "act_saved": 4 * s,
            "tp_bytes": d * sh,
            "kernels": 4,
        }
    ]
    for i in range(spec.layers):
        if spec.experts and i % spec.expert_every == spec.expert_every - 1:
            rows.append(
                {"name": f"moe{i}", **_moe_block(s, h, a, spec.experts, spec.expert_ffn_mult, spec.expert_group, d)}
            )
        else:
            rows.append({"name": f"block{i}", **_dense_block(s, h, a, spec.ffn_mult, d)})
    rows.append(
        {
            "name": "head",
            "params": v * h + 2 * h,
            "flops": 2 * sh * v,
            "op_bytes": (d + 12) * s * v,
            "rep_bytes": 3 * d * sh,
            "act_saved": (d + 4) * s * v,
            "act_in": d * sh,
            "act_out": 4,
            "tp_bytes": d * sh,
            "kernels": 8,
        }
    )
    family = ModelRef.parse(spec.name).family
    kind = "moe" if spec.experts else "transformer"
    return ModelArch(
        name=ModelRef.parse(spec.name).name,
        family=family,
        kind=kind,
        dtype=spec.dtype,
        remat=spec.remat,
        sample_tokens=s,
        min_tokens_per_gpu=spec.expert_group if spec.experts else 0,
        experts=spec.experts,
        tied_params=float(v * h) if spec.tied_embeddings else 0.0,
        layers=LayerTable.from_rows(rows),
        config=asdict(spec),
        optimizer_bytes=_optimizer_bytes(kind, optimizer_bytes),
    )


# ----------------------------------------------------------------------------------------------
# Wide-ResNet


@dataclass(frozen=True)
class WideResNetSpec:
    """Alpa's Wide-ResNet: bottleneck blocks (1x1 -> 3x3 x width -> 1x1 x4), base ``channels``."""

    name: str
    depth: int  # 50 or 101
    channels: int
    width_factor: int
    image_size: int = 224
    num_classes: int = 1024
    dtype: str = "fp32"
    remat: bool = False

    def __post_init__(self) -> None:
        if self.depth not in _WRN_STAGES:
            raise ValueError(
                f"model {self.name}: depth {self.depth} unsupported; valid: {', '.join(map(str, _WRN_STAGES))}"
            )
        if self.image_size % 32 or self.channels < 1 or self.width_factor < 1:
            raise ValueError(f"model {self.name}: image size must be a multiple of 32, channels and width >= 1")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"model {self.name}: unknown dtype {self.dtype!r}; valid: {', '.join(DTYPE_BYTES)}")


_WRN_STAGES = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}


def build_wide_resnet(spec: WideResNetSpec, optimizer_bytes: float | None = None) -> ModelArch:
    """A Wide-ResNet :class:`ModelArch` from a :class:`WideResNetSpec` (one layer per block)."""
    d, c, w = DTYPE_BYTES[spec.dtype], spec.channels, spec.width_factor
    hw = spec.image_size // 2  # after the 7x7 stride-2 stem
    stem_out, pooled = hw * hw * c, (hw // 2) ** 2 * c
    rows: list[dict[str, Any]] = [
        {
            "name": "stem",
            "params": 49 * 3 * c + 2 * c,
            "flops": 2 * hw * hw * 49 * 3 * c,
            "op_bytes": d * (spec.image_size**2 * 3 + 7 * stem_out + pooled),
            "act_saved": d * (spec.image_size**2 * 3 + 3 * stem_out + pooled),
            "act_in": d * spec.image_size**2 * 3,
            "act_out": d * pooled,
            "tp_bytes": d * pooled,
            "kernels": 5,
        }
    ]
    hw //= 2
    cin = c
    for stage, blocks in enumerate(_WRN_STAGES[spec.depth]):
        f = c * 2**stage
        for j in range(blocks):
            stride = 2 if stage > 0 and j == 0 else 1
            out_hw = hw // stride
            n_in, n_out = hw * hw, out_hw * out_hw
            x, y1, y2, y3 = n_in * cin, n_in * f, n_out * f * w, n_out * 4 * f
            proj = cin != 4 * f or stride != 1
            p = n_out * 4 * f if proj else 0
            params = cin * f + 9 * f * f * w + f * w * 4 * f + 2 * (f + f * w + 4 * f)
            flops = 2 * (n_in * cin * f + n_out * 9 * f * f * w + n_out * f * w * 4 * f)
            if proj:
                params += cin * 4 * f + 2 * 4 * f
                flops += 2 * n_out * cin * 4 * f
            rows.append(
                {
                    "name": f"block{stage}.{j}",
                    "params": params,
                    "flops": flops,
                    "op_bytes": d
                    * (
                        (x + y1)
                        + (y1 + y2)
                        + (y2 + y3)
                        + ((x + p) if proj else 0)
                        + 3 * (y1 + y2 + y3 + p)
                        + 2 * (y1 + y2 + y3)
                        + 3 * y3
                    ),
                    "act_saved": d * (x + 2 * y1 + 2 * y2 + 2 * y3 + 2 * p + y3),
                    "act_in": d * x,
                    "act_out": d * y3,
                    "tp_bytes": d * (y2 + y3 / 2),
                    "kernels": 15 if proj else 12,
                }
            )
            hw, cin = out_hw, 4 * f
    rows.append(
        {
            "name": "head",
            "params": cin * spec.num_classes + spec.num_classes,
            "flops": 2 * cin * spec.num_classes,
            "op_bytes": d * (hw * hw * cin + cin + spec.num_classes),
            "act_saved": d * hw * hw * cin,
            "act_in": d * hw * hw * cin,
            "act_out": d * spec.num_classes,
            "tp_bytes": d * cin,
            "kernels": 3,
        }
    )
    return ModelArch(
        name=ModelRef.parse(spec.name).name,
        family=ModelRef.parse(spec.name).family,
        kind="wide_resnet",
        dtype=spec.dtype,
        remat=spec.remat,
        sample_tokens=1,
        min_tokens_per_gpu=0,
        experts=0,
        tied_params=0.0,
        layers=LayerTable.from_rows(rows),
        config=asdict(spec),
        optimizer_bytes=_optimizer_bytes("wide_resnet", optimizer_bytes),
    )


# ----------------------------------------------------------------------------------------------
# the zoo: every size of every registered family


def _optimizer_bytes(kind: str, given: float | None) -> float:
    return float(given) if given is not None else float(kind_optimizer_bytes(kind))


def build(spec: TransformerSpec | WideResNetSpec) -> ModelArch:
    """Build the ModelArch of a user spec (the transformer or Wide-ResNet builder, by its type)."""
    return build_transformer(spec) if isinstance(spec, TransformerSpec) else build_wide_resnet(spec)


#: Built architectures by name, with the family record they were built from (rebuilt if it changes).
_BUILT: dict[str, tuple[Any, ModelArch]] = {}


def _family_arch(family: Any, size: str) -> ModelArch:
    name = f"{family.name}__{size}"
    hit = _BUILT.get(name)
    if hit is None or hit[0] is not family:
        arch = family.build(family.sizes[size])
        if arch.kind != family.kind or arch.optimizer_bytes != family.optimizer_bytes:
            arch = replace(arch, kind=family.kind, optimizer_bytes=float(family.optimizer_bytes))
        if arch.name != name:
            raise ValueError(f"model family {family.name}: size {size!r} builds a model named {arch.name!r}")
        hit = _BUILT[name] = (family, arch)
    return hit[1]


def _builtin_names() -> set[str]:
    return {f"{name}__{size}" for name, family in families().items() for size in family.sizes}


def known_models(extra: Mapping[str, ModelArch] | None = None) -> list[str]:
    """Names (``family__size``) of the registered families' models plus ``extra``, sorted."""
    return sorted(_builtin_names() | set(extra or {}))


def get_model(ref: ModelRef | str, extra: Mapping[str, ModelArch] | None = None) -> ModelArch:
    """The architecture of a model; ValueError with the valid names when unknown."""
    model = ref if isinstance(ref, ModelRef) else ModelRef.parse(str(ref))
    arch = (extra or {}).get(model.name)
    if arch is not None:
        return arch
    family = families().get(model.family)
    if family is None or model.size not in family.sizes:
        raise ValueError(f"unknown model {model.name!r}; valid: {', '.join(known_models(extra))}")
    return _family_arch(family, model.size)


#: Most layers a user model may have (its cost table has a row per layer).
MAX_LAYERS = 100_000
#: Largest integer a model spec may give (its sizes are multiplied together).
_MAX_SPEC_INT = 2**31 - 1


def model_from_dict(data: Mapping[str, Any]) -> ModelArch:
    """A user model from a dict: TransformerSpec fields (``experts`` > 0 for MoE) or, with
    ``depth``/``channels``/``width_factor``, WideResNetSpec fields.

    Read by :func:`arena_gym.fields.read_fields` (JSON types exactly: 64.0 is not an integer, true
    not a number); a one-line ValueError names the problem (after ``model spec 'NAME'`` where it is a field's).
    """
    is_object = isinstance(data, Mapping)
    name = data.get("name") if is_object else None
    where = f"model spec {name!r}" if isinstance(name, str) else "model spec"
    cls = WideResNetSpec if is_object and "channels" in data else TransformerSpec
    values = read_fields(cls, data, where)
    for key, value in values.items():
        if fits(value, int) and not 0 <= value <= _MAX_SPEC_INT:
            raise ValueError(f"{where}: {key} must be an integer in 0..2**31-1, got {value!r}")
    if values.get("layers", 0) > MAX_LAYERS:  # one table row per layer
        raise ValueError(f"{where}: layers must be at most {MAX_LAYERS}, got {values['layers']}")
    return build(cls(**values))


def load_models(path: str | Path, allow_shadowing: bool = False) -> dict[str, ModelArch]:
    """User models from a JSON file holding one spec object or a list of them.

    A model named like a zoo model would replace it everywhere: refused (one-line ValueError)
    unless ``allow_shadowing``.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError("nested too deeply to be a model spec file") from None
    items: Iterable[Mapping[str, Any]] = data if isinstance(data, list) else [data]
    archs = [model_from_dict(item) for item in items]
    if not archs:
        raise ValueError("holds no model spec")
    names = [a.name for a in archs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"model(s) {', '.join(twice)} specified more than once")
    builtin = _builtin_names()
    clash = sorted(a.name for a in archs if a.name in builtin)
    if clash and not allow_shadowing:
        raise ValueError(
            f"model(s) {', '.join(clash)} would replace the zoo's model(s) of that name; "
            "rename them, or pass --allow-shadowing to use yours"
        )
    return {a.name: a for a in archs}


def describe(arch: ModelArch) -> str:
    """One line: parameters, FLOPs per sample, layers."""
    return (
        f"{arch.name}: {arch.param_count / 1e9:.2f}B params, {arch.flops_per_sample / 1e9:.1f} GFLOP/sample fwd, "
        f"{len(arch.layers)} layers, {arch.dtype}{', remat' if arch.remat else ''}"
    )
