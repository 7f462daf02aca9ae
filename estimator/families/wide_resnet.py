"""Wide-ResNet: Alpa's bottleneck Wide-ResNet (image 224, 1,024 classes, fp32).

Optimizer: two fp32 moments' worth (8 bytes per parameter). Alpa's script uses SGD with Nesterov
momentum (one buffer), but charging one buffer changes no feasibility verdict on the measured
table and only shifts the fitted efficiencies (docs/estimator.md). Trace mix: docs/arena.md
section 8.3; nominal iteration times as for GPT (:mod:`estimator.families.gpt`), batch 256; 13B
extrapolated. Not trained live. Aliases ``wrn``, ``wresnet``.
"""

from __future__ import annotations

from arena_gym.families import ModelFamily, TraceMix
from estimator.zoo import WideResNetSpec, build_wide_resnet

#: (depth, channels, width factor).
SIZES = {
    "500M": (50, 224, 2),
    "1B": (50, 320, 2),
    "2B": (50, 448, 2),
    "4B": (50, 640, 2),
    "6.8B": (50, 320, 16),
    "13B": (101, 320, 16),
}

FAMILY = ModelFamily(
    name="wide_resnet",
    aliases=("wrn", "wresnet"),
    kind="wide_resnet",
    sizes={size: WideResNetSpec(f"wide_resnet__{size}", d, c, w) for size, (d, c, w) in SIZES.items()},
    build=build_wide_resnet,
    optimizer_bytes=8,
    trace=TraceMix(
        sizes=("500M", "1B", "2B", "4B", "6.8B", "13B"),
        batches=(256, 512, 1024),
        min_gpus={"500M": 1, "1B": 2, "2B": 2, "4B": 4, "6.8B": 8},
        nominal_iter_s={"500M": 15.0, "1B": 32.0, "2B": 72.0, "4B": 140.0, "6.8B": 230.0, "13B": 420.0},
    ),
    live=None,
    efficiency={"eta_compute": 0.6, "eta_memory": 0.2, "tile_rows": 256.0},
    description="Wide-ResNet (Alpa's suite)",
)
