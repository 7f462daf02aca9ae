"""MoE: GShard-style mixture of experts (seq 1024, vocabulary 32,000, fp16, every second layer an
expert layer with 8x-wide experts, top-2 gating, expert group 2,048 tokens; 16 heads).

Optimizer: Adafactor (Alpa's script), whose factored second moments and absent momentum are
negligible per parameter (0 bytes). Trace mix: docs/arena.md section 8.3; nominal iteration times
as for GPT (:mod:`estimator.families.gpt`), batch 256; 27B and 70B extrapolated. Not trained live.
"""

from __future__ import annotations

from arena_gym.families import ModelFamily, TraceMix
from estimator.zoo import TransformerSpec, build_transformer

#: (hidden, layers, experts).
SIZES = {
    "690M": (768, 8, 16),
    "1.3B": (768, 16, 16),
    "2.4B": (1024, 16, 16),
    "10B": (1536, 16, 32),
    "27B": (2048, 16, 48),
    "70B": (2048, 32, 64),
}

FAMILY = ModelFamily(
    name="moe",
    kind="moe",
    sizes={
        size: TransformerSpec(f"moe__{size}", n, h, 16, vocab=32000, ffn_mult=8, experts=e)
        for size, (h, n, e) in SIZES.items()
    },
    build=build_transformer,
    optimizer_bytes=0,
    trace=TraceMix(
        sizes=("690M", "1.3B", "2.4B", "10B", "27B", "70B"),
        batches=(256, 512, 1024),
        min_gpus={"690M": 1, "1.3B": 1, "2.4B": 2, "10B": 4},
        nominal_iter_s={"690M": 7.2, "1.3B": 12.0, "2.4B": 17.0, "10B": 32.0, "27B": 57.0, "70B": 100.0},
    ),
    live=None,
    efficiency={"eta_compute": 0.7, "eta_memory": 0.5, "tile_rows": 128.0},
    description="GShard mixture of experts (Alpa's suite)",
)
