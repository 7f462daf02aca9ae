"""Deterministic synthetic token batches: the global batch of a step is a function of (seed, step).

Each sequence is an arithmetic progression over the first ``ALPHABET`` tokens of the vocabulary,
``x[t] = (start + t * stride) mod ALPHABET``, with a random start and a random stride in
``1..MAX_STRIDE``. A small transformer learns it quickly (gpt__tiny at lr 1e-3: loss 6.9 -> 2.5 in
100 steps; the next token follows from the previous two), so the loss falls visibly and a resumed
run that lost or repeated state drifts away from the uninterrupted one. Because a batch depends only
on (seed, step), a checkpoint stores the step as its data position, and every plan slices the same
global batch.
"""

from __future__ import annotations

import numpy as np
import torch

#: Largest stride of a synthetic sequence.
MAX_STRIDE = 8
#: Tokens used (the first ones of the vocabulary).
ALPHABET = 64


def global_batch(seed: int, step: int, batch: int, seq_len: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets (int64, ``[batch, seq_len]`` each) of global step ``step``."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, step]))
    alphabet = min(ALPHABET, vocab)
    start = rng.integers(0, alphabet, size=(batch, 1))
    stride = rng.integers(1, MAX_STRIDE + 1, size=(batch, 1))
    tokens = torch.from_numpy((start + stride * np.arange(seq_len + 1)) % alphabet)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def replica_slice(x: torch.Tensor, y: torch.Tensor, dp_rank: int, dp: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows of a global batch that data-parallel replica ``dp_rank`` of ``dp`` trains on."""
    n = x.shape[0] // dp
    return x[dp_rank * n : (dp_rank + 1) * n], y[dp_rank * n : (dp_rank + 1) * n]
