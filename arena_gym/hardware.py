"""The hardware catalogue: GPU datasheet figures, intra-node links and inter-node network presets.

This is the one place a GPU type is described: the estimator, the trace recipe, the measured
tables, the testbeds and the command line all read :func:`get_gpu`. A new type is one
:class:`GpuSpec` handed to :func:`register_gpu` (from any module, before its first use).

Every GPU figure is a vendor datasheet number (dense, i.e. without structured sparsity); the
``source`` field of each entry names the document. The ``cpu`` entry (one CPU core standing in for
a device, for live testbeds on CPU machines) is nominal: a measured profile replaces it. Bandwidths are GB/s (1e9 bytes/s) per
direction, rates TFLOPS (1e12 FLOP/s).

Trace names resolve through :data:`ALIASES`: ``a100`` is the 40 GB part and ``v100`` the
32 GB part (the artifact's simulated cluster, docs/arena.md §8.1).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """A link class: bandwidth per direction (GB/s) and a per-message latency (µs)."""

    name: str
    gbs: float
    latency_us: float
    source: str


#: Share of a dual-issue FP32 peak that matrix kernels can use. Ampere GA10x and Ada SMs double
#: their FP32 peak with a second datapath shared with INT32, so integer instructions (address
#: arithmetic) take FP32 slots: with ``i`` integer per floating-point instruction the FP32 rate is
#: ``2 / (1 + i)`` of the single-issue rate, i.e. ``1 / (1 + i)`` of the datasheet peak. NVIDIA's
#: Turing architecture whitepaper (2018) gives a typical mix of 36 integer per 100 floating-point
#: instructions, hence 1 / 1.36 = 0.735.
DUAL_ISSUE_FP32_FACTOR = 0.735


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU model: memory, peak dense rates per dtype, memory bandwidth and default node."""

    name: str
    memory_gb: float
    mem_bw_gbs: float
    fp16_tflops: float  # dense tensor-core FP16 with FP32 accumulate (or plain FP16 without tensor cores)
    bf16_tflops: float  # 0 when the part has no BF16 support
    tf32_tflops: float  # 0 when the part has no TF32 tensor cores
    fp32_tflops: float  # non-tensor FP32
    intra_link: str  # key of LINKS: NVLink generation or PCIe
    gpus_per_node: int  # default node size (preset)
    network: str  # key of NETWORKS: inter-node network of the default node preset
    source: str
    dual_issue_fp32: bool = False  # FP32 peak counts a datapath shared with INT32 (GA10x, AD10x SMs)
    #: Device memory the CUDA driver reports (nvidia-smi ``Memory-Usage`` total), MiB; 0: the nominal
    #: ``memory_gb``. It is below the nominal size: GDDR6 parts with ECC on (A40, A10) give 1/16 of it to
    #: ECC (46,068 MiB of 49,152 for a 48 GB A40), HBM parts lose the driver's reservation (40,536 MiB of
    #: 40,960 for an A100-40GB, 32,510 of 32,768 for a V100-32GB).
    reported_memory_mib: float = 0.0
    #: The trace recipe's rough iteration times (``traces.recipe.nominal_iter_time``): speed relative
    #: to an A40, and the speed-up from doubling the GPU count; 0: derived (the FP16 peak relative to
    #: the A40's; 1.5).
    trace_speed: float = 0.0
    trace_doubling: float = 0.0

    def peak_tflops(self, dtype: str) -> float:
        """Peak dense rate for a model dtype (``fp16``, ``bf16``, ``fp32``); bf16 falls back to fp32."""
        if dtype == "fp16":
            return self.fp16_tflops
        if dtype == "bf16":
            return self.bf16_tflops or self.fp32_tflops
        if dtype == "fp32":
            return self.fp32_tflops
        raise ValueError(f"unknown dtype {dtype!r}; valid: fp16, bf16, fp32")

    def matrix_tflops(self, dtype: str) -> float:
        """Peak rate usable by matrix kernels: the datasheet peak, with a dual-issue FP32 figure
        scaled by :data:`DUAL_ISSUE_FP32_FACTOR`."""
        peak = self.peak_tflops(dtype)
        fp32_path = dtype == "fp32" or (dtype == "bf16" and not self.bf16_tflops)
        return peak * DUAL_ISSUE_FP32_FACTOR if fp32_path and self.dual_issue_fp32 else peak


#: Source of the nominal ``cpu`` figures: not a datasheet, a starting point until a profile exists.
_CPU_NOMINAL = (
    "nominal: one x86-64 core as a device (AVX2/AVX-512 FMA, ~100 GFLOP/s fp32 peak, ~10 GB/s), "
    "gloo over loopback; replace with a measured profile (arena-gym estimate profile)"
)

#: Intra-node links. NVLink figures are the datasheets' total bidirectional bandwidth halved.
LINKS: dict[str, LinkSpec] = {
    "pcie3": LinkSpec("pcie3", 15.75, 10.0, "PCI-SIG PCIe 3.0 x16: 15.75 GB/s per direction"),
    "pcie4": LinkSpec("pcie4", 31.5, 10.0, "PCI-SIG PCIe 4.0 x16: 31.5 GB/s per direction"),
    "pcie5": LinkSpec("pcie5", 63.0, 10.0, "PCI-SIG PCIe 5.0 x16: 63 GB/s per direction"),
    "nvlink1": LinkSpec("nvlink1", 80.0, 5.0, "NVIDIA Tesla P100 datasheet: NVLink 160 GB/s bidirectional"),
    "nvlink2": LinkSpec("nvlink2", 150.0, 5.0, "NVIDIA V100 datasheet: NVLink 300 GB/s bidirectional"),
    "nvlink3": LinkSpec("nvlink3", 300.0, 5.0, "NVIDIA A100 datasheet: NVLink 600 GB/s bidirectional"),
    "nvlink4": LinkSpec("nvlink4", 450.0, 5.0, "NVIDIA H100 datasheet: NVLink 900 GB/s bidirectional"),
    "nvlink-h800": LinkSpec("nvlink-h800", 200.0, 5.0, "NVIDIA H800 SXM product brief: NVLink 400 GB/s bidirectional"),
    "nvlink-bridge": LinkSpec(
        "nvlink-bridge", 56.25, 5.0, "NVIDIA A40 / RTX 3090 datasheets: 2-way NVLink bridge 112.5 GB/s bidirectional"
    ),
    "loopback": LinkSpec("loopback", 2.0, 250.0, _CPU_NOMINAL),
}

#: Inter-node networks: aggregate NIC bandwidth per node (GB/s per direction).
NETWORKS: dict[str, LinkSpec] = {
    "eth-10g": LinkSpec("eth-10g", 1.25, 50.0, "IEEE 802.3 10GbE: 10 Gb/s"),
    "eth-25g": LinkSpec("eth-25g", 3.125, 30.0, "IEEE 802.3by 25GbE: 25 Gb/s"),
    "roce-100g": LinkSpec("roce-100g", 12.5, 10.0, "IEEE 802.3 100GbE (RoCE v2): 100 Gb/s"),
    "ib-edr": LinkSpec("ib-edr", 12.5, 5.0, "InfiniBand EDR 4x: 100 Gb/s (IBTA spec)"),
    "ib-hdr": LinkSpec("ib-hdr", 25.0, 5.0, "InfiniBand HDR 4x: 200 Gb/s (IBTA spec)"),
    "ib-edr-x8": LinkSpec("ib-edr-x8", 100.0, 5.0, "NVIDIA DGX-2 datasheet: 8x 100 Gb/s EDR InfiniBand"),
    "ib-hdr-x8": LinkSpec("ib-hdr-x8", 200.0, 5.0, "NVIDIA DGX A100 datasheet: 8x 200 Gb/s HDR InfiniBand"),
    "ib-ndr-x8": LinkSpec("ib-ndr-x8", 400.0, 5.0, "NVIDIA DGX H100 datasheet: 8x 400 Gb/s NDR InfiniBand"),
    "ib-edr-x4": LinkSpec("ib-edr-x4", 50.0, 5.0, "NVIDIA DGX-1 datasheet: 4x 100 Gb/s EDR InfiniBand"),
    "loopback": LinkSpec("loopback", 2.0, 250.0, _CPU_NOMINAL),
}

_A100 = "NVIDIA A100 Tensor Core GPU datasheet (SXM4; 2021)"
_V100 = "NVIDIA Tesla V100 GPU datasheet (SXM2; 2020)"
# The trace recipe's figures below (docs/arena.md section 8.5: A100 ~2.4x an A40 and 1.75x from doubling,
# V100 ~1.23x and 1.87x; the A10 is not in the measured data: 0.7x assumed from its clocks and
# bandwidth, doubling like the A40).

#: The catalogue. Node presets (``gpus_per_node``, ``network``) follow the artifact's testbeds
#: where known (A100 4/node, V100 16/node, A40 and A10 2/node) and common servers otherwise. The
#: only 16-GPU V100 nodes built are the NVSwitch HGX-2 designs (NVIDIA DGX-2 datasheet, 2019:
#: 16 Tesla V100 32 GB, six NVLinks per GPU into NVSwitch, 300 GB/s bidirectional per GPU to any
#: other GPU, 8x 100 Gb/s EDR InfiniBand), hence NVLink2 bandwidth for every GPU pair of the node.
_GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec(
            "a100-40gb",
            40,
            1555,
            312,
            312,
            156,
            19.5,
            "nvlink3",
            4,
            "ib-hdr",
            _A100,
            reported_memory_mib=40536.0,
            trace_speed=2.4,
            trace_doubling=1.75,
        ),
        GpuSpec(
            "a100-80gb",
            80,
            2039,
            312,
            312,
            156,
            19.5,
            "nvlink3",
            8,
            "ib-hdr-x8",
            _A100,
            reported_memory_mib=81920.0,
            trace_speed=2.4,
            trace_doubling=1.75,
        ),
        GpuSpec(
            "v100-16gb",
            16,
            900,
            125,
            0,
            0,
            15.7,
            "nvlink2",
            8,
            "ib-edr-x4",
            _V100,
            reported_memory_mib=16160.0,
            trace_speed=1.23,
            trace_doubling=1.87,
        ),
        GpuSpec(
            "v100-32gb",
            32,
            900,
            125,
            0,
            0,
            15.7,
            "nvlink2",
            16,
            "ib-edr-x8",
            _V100,
            reported_memory_mib=32510.0,
            trace_speed=1.23,
            trace_doubling=1.87,
        ),
        GpuSpec(
            "a40",
            48,
            696,
            149.7,
            149.7,
            74.8,
            37.4,
            "pcie4",
            2,
            "ib-edr",
            "NVIDIA A40 datasheet (2021)",
            True,
            reported_memory_mib=46068.0,
            trace_speed=1.0,
            trace_doubling=1.5,
        ),
        GpuSpec(
            "a10",
            24,
            600,
            125,
            125,
            62.5,
            31.2,
            "pcie4",
            2,
            "ib-edr",
            "NVIDIA A10 datasheet (2021)",
            True,
            reported_memory_mib=23028.0,
            trace_speed=0.7,
            trace_doubling=1.5,
        ),
        GpuSpec(
            "h100",
            80,
            3350,
            989.4,
            989.4,
            494.7,
            66.9,
            "nvlink4",
            8,
            "ib-ndr-x8",
            "NVIDIA H100 Tensor Core GPU datasheet (SXM5; 2023)",
        ),
        # H200 SXM: 141 GB HBM3e at 4.8 TB/s, the H100 SXM's tensor cores (dense FP16/BF16 989.4, TF32 494.7,
        # FP32 66.9 TFLOPS), NVLink 900 GB/s bidirectional (NVLink 4), 8 per HGX H200 board with 8x 400 Gb/s NDR
        # (DGX H200 datasheet). The driver's reported memory is not a datasheet figure: left nominal (0).
        GpuSpec(
            "h200",
            141,
            4800,
            989.4,
            989.4,
            494.7,
            66.9,
            "nvlink4",
            8,
            "ib-ndr-x8",
            "NVIDIA H200 Tensor Core GPU datasheet (SXM; 2024)",
        ),
        GpuSpec(
            "h800",
            80,
            3350,
            989.4,
            989.4,
            494.7,
            66.9,
            "nvlink-h800",
            8,
            "ib-ndr-x8",
            "NVIDIA H800 SXM5 product brief (2023)",
        ),
        GpuSpec(
            "l20", 48, 864, 119.5, 119.5, 59.8, 59.8, "pcie4", 8, "roce-100g", "NVIDIA L20 product brief (2023)", True
        ),
        GpuSpec(
            "l40s", 48, 864, 362.05, 362.05, 183.2, 91.6, "pcie4", 8, "roce-100g", "NVIDIA L40S datasheet (2023)", True
        ),
        GpuSpec(
            "rtx3090",
            24,
            936.2,
            71,
            71,
            35.6,
            35.6,
            "pcie4",
            8,
            "eth-25g",
            "NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090 (2021)",
            True,
        ),
        GpuSpec("t4", 16, 320, 65, 0, 0, 8.1, "pcie3", 4, "eth-25g", "NVIDIA T4 Tensor Core GPU datasheet (2019)"),
        GpuSpec(
            "p100",
            16,
            732,
            21.2,
            0,
            0,
            10.6,
            "nvlink1",
            8,
            "ib-edr-x4",
            "NVIDIA Tesla P100 datasheet (SXM2 16 GB; 2016)",
        ),
        GpuSpec("cpu", 4, 10, 0, 0, 0, 0.1, "loopback", 2, "loopback", _CPU_NOMINAL),
    )
}

#: Other spellings, including the trace names of the artifact's cluster.
_ALIASES: dict[str, str] = {
    "a100": "a100-40gb",
    "a100-40g": "a100-40gb",
    "a100-80g": "a100-80gb",
    "v100": "v100-32gb",
    "v100-32g": "v100-32gb",
    "v100-16g": "v100-16gb",
    "h100-80gb": "h100",
    "h100-sxm": "h100",
    "h200-141gb": "h200",
    "h200-sxm": "h200",
    "3090": "rtx3090",
    "rtx-3090": "rtx3090",
    "l40-s": "l40s",
    "p100-16gb": "p100",
}


def known_gpus() -> list[str]:
    """Canonical GPU names followed by their aliases, sorted."""
    return sorted(_GPUS) + sorted(_ALIASES)


def canonical_gpu_name(name: str) -> str:
    """The catalogue key for a GPU name or alias (case and ``_``/``-`` insensitive)."""
    key = str(name).strip().lower().replace("_", "-")
    key = _ALIASES.get(key, key)
    if key not in _GPUS:
        raise ValueError(f"unknown GPU type {name!r}; valid: {', '.join(known_gpus())}")
    return key


def get_gpu(name: str) -> GpuSpec:
    """The spec of a GPU type by name or alias; ValueError listing valid names otherwise."""
    return _GPUS[canonical_gpu_name(name)]


#: Read-only views of the catalogue (:func:`register_gpu` adds to them).
GPUS: Mapping[str, GpuSpec] = MappingProxyType(_GPUS)
ALIASES: Mapping[str, str] = MappingProxyType(_ALIASES)


def _key(name: str) -> str:
    return str(name).strip().lower().replace("_", "-")


def register_gpu(spec: GpuSpec, aliases: Iterable[str] = (), *, replace: bool = False) -> None:
    """Add a GPU type (and other spellings of its name) to the catalogue.

    Registering the same spec again is a no-op; another spec under a taken name or alias needs
    ``replace=True``. Its links must be catalogue links (:data:`LINKS`, :data:`NETWORKS`).
    """
    name = _key(spec.name)
    if name != spec.name or not name:
        raise ValueError(f"GPU type name {spec.name!r} must be lower case, with '-' (not '_') and no spaces")
    if spec.intra_link not in LINKS:
        raise ValueError(f"GPU type {name}: intra_link {spec.intra_link!r} is unknown; valid: {', '.join(LINKS)}")
    if spec.network not in NETWORKS:
        raise ValueError(f"GPU type {name}: network {spec.network!r} is unknown; valid: {', '.join(NETWORKS)}")
    if not (spec.memory_gb > 0 and spec.mem_bw_gbs > 0 and spec.gpus_per_node >= 1):
        raise ValueError(f"GPU type {name}: memory_gb, mem_bw_gbs and gpus_per_node must be positive")
    old = _GPUS.get(name)
    if old is not None and old != spec and not replace:
        raise ValueError(f"GPU type {name!r} is already in the catalogue; pass replace=True to change it")
    keys = [_key(a) for a in aliases]
    for alias in keys:
        taken = _ALIASES.get(alias)
        if (alias in _GPUS and alias != name) or (taken is not None and taken != name and not replace):
            raise ValueError(f"GPU alias {alias!r} already names {taken or alias!r}")
    _GPUS[name] = spec
    _ALIASES.update({a: name for a in keys if a != name})


def unregister_gpu(name: str) -> None:
    """Remove a registered GPU type and its aliases (for tests and notebooks)."""
    key = _key(name)
    _GPUS.pop(key, None)
    for alias in [a for a, t in _ALIASES.items() if t == key]:
        del _ALIASES[alias]
