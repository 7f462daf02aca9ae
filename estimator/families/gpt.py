"""GPT: Alpa's GPT suite (seq 1024, vocabulary 51,200, fp16, tied embeddings), plus two small
fp32 sizes that the live runner trains on CPU (``tiny``, ``mini``).

Optimizer: AdamW, two fp32 moments (8 bytes per parameter), as Alpa's benchmark scripts train it.
Trace mix: the artifact's ``supported_model_cfgs`` (docs/arena.md section 8.3). Nominal iteration
times: arena/measured_iter_time.csv (A40 rows), the median over (batch, count) of
iter_time x 1.5^log2(count) x 128 / batch, two figures; 15B and 39B extrapolated with the
artifact's 1.8x per size step. Alias ``bert``: the artifact's traces call this family so.
"""

from __future__ import annotations

from arena_gym.families import ModelFamily, TraceMix
from estimator.zoo import TransformerSpec, build_transformer

#: Alpa's sizes: (hidden, layers, heads).
SIZES = {
    "350M": (1024, 24, 16),
    "760M": (1536, 24, 16),
    "1.3B": (2048, 24, 32),
    "2.6B": (2560, 32, 32),
    "6.7B": (4096, 32, 32),
    "15B": (5120, 48, 40),
    "39B": (8192, 48, 64),
}
#: Small sizes the runner trains on CPU: (hidden, layers, heads, vocabulary, sequence); fp32, no
#: rematerialisation, untied embeddings (so any pipeline split is valid).
CPU_SIZES = {"tiny": (64, 4, 4, 1024, 64), "mini": (256, 6, 8, 2048, 128)}

SPECS: dict[str, TransformerSpec] = {
    **{size: TransformerSpec(f"gpt__{size}", n, h, a, vocab=51200) for size, (h, n, a) in SIZES.items()},
    **{
        size: TransformerSpec(
            f"gpt__{size}", n, h, a, seq_len=s, vocab=v, dtype="fp32", tied_embeddings=False, remat=False
        )
        for size, (h, n, a, v, s) in CPU_SIZES.items()
    },
}

FAMILY = ModelFamily(
    name="gpt",
    aliases=("bert",),
    kind="transformer",
    sizes=SPECS,
    build=build_transformer,
    optimizer_bytes=8,
    trace=TraceMix(
        sizes=("760M", "1.3B", "2.6B", "6.7B", "15B", "39B"),
        batches=(128, 256, 512),
        min_gpus={"760M": 1, "1.3B": 1, "2.6B": 4, "6.7B": 8},
        nominal_iter_s={"760M": 10.0, "1.3B": 18.0, "2.6B": 26.0, "6.7B": 62.0, "15B": 110.0, "39B": 200.0},
    ),
    live="transformer",
    efficiency={"eta_compute": 0.7, "eta_memory": 0.5, "tile_rows": 128.0},
    description="GPT (Alpa's suite; tiny and mini for CPU testbeds)",
)
