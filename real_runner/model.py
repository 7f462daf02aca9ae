"""The torch GPT that the estimator's :class:`~estimator.zoo.TransformerSpec` describes.

The module tree mirrors the estimator's layer table ``[embed, block0 .. block{L-1}, head]``:
layer index 0 is :class:`Embedding` (token + learned position embeddings), indices 1..L are the
:class:`Block` s in ``GPT.blocks`` (an ``nn.ModuleDict`` keyed by the global block index, so every
pipeline stage keeps the parameter names of the unsharded model), and index L+1 is :class:`Head`
(final LayerNorm + vocabulary projection). Parameter counts equal the zoo's per-layer ``params``.

Every layer is initialised from a generator seeded by (seed, layer index), so a pipeline stage that
builds only its own layers holds exactly the weights the full model would hold.

Each layer can also be built alone, at the per-device shapes of a tensor-parallel degree ``tp``
(``build_layer(spec, index, tp=...)``), for profiling single layers.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from estimator.plan_space import tp_fits
from estimator.zoo import TransformerSpec

#: Standard deviation of the normal initialisation of weight matrices and embeddings.
INIT_STD = 0.02


def _check_tp(spec: TransformerSpec, tp: int) -> None:
    if not tp_fits(spec.heads, tp):
        raise ValueError(f"model {spec.name}: tensor-parallel degree {tp} does not divide {spec.heads} heads")


class Attention(nn.Module):
    """Causal multi-head self-attention with separate ``wq/wk/wv/wo`` projections.

    With ``tp > 1`` the projections have the per-device shapes of a column-parallel q/k/v and a
    row-parallel output projection (``heads / tp`` local heads). The forward pass infers the local
    head count from the projected width, so DTensor-sharded full-size modules work too.
    """

    def __init__(self, hidden: int, heads: int, tp: int = 1) -> None:
        super().__init__()
        self.head_dim = hidden // heads
        local = hidden // tp
        self.wq = nn.Linear(hidden, local)
        self.wk = nn.Linear(hidden, local)
        self.wv = nn.Linear(hidden, local)
        self.wo = nn.Linear(local, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[batch, seq, hidden]`` -> same shape."""
        b, t, _ = x.shape
        q, k, v = (w(x).view(b, t, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, t, -1))


class MLP(nn.Module):
    """Feed-forward layer ``fc2(gelu(fc1(x)))`` with ``ffn_mult x hidden`` (divided by ``tp``) inner width."""

    def __init__(self, hidden: int, ffn_mult: int, tp: int = 1) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn_mult * hidden // tp)
        self.fc2 = nn.Linear(ffn_mult * hidden // tp, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[batch, seq, hidden]`` -> same shape."""
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: ``x + attn(ln1(x))``, then ``x + mlp(ln2(x))``.

    With ``remat`` set, a forward pass that records gradients keeps only the block's input and
    recomputes its activations in the backward pass (``torch.utils.checkpoint``, non-reentrant). The
    recomputation runs inside the block's ``forward``, so hooks on the block itself (FSDP2's
    all-gather) run once per pass and parameter names stay those of the plain block.
    """

    def __init__(self, spec: TransformerSpec, tp: int = 1) -> None:
        super().__init__()
        _check_tp(spec, tp)
        self.remat = False
        self.ln1 = nn.LayerNorm(spec.hidden)
        self.attn = Attention(spec.hidden, spec.heads, tp)
        self.ln2 = nn.LayerNorm(spec.hidden)
        self.mlp = MLP(spec.hidden, spec.ffn_mult, tp)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[batch, seq, hidden]`` -> same shape."""
        if self.remat and torch.is_grad_enabled():
            return checkpoint(self._body, x, use_reentrant=False)
        return self._body(x)

    def _body(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Embedding(nn.Module):
    """Token plus learned position embeddings (layer 0 of the layer table)."""

    def __init__(self, spec: TransformerSpec) -> None:
        super().__init__()
        self.tok = nn.Embedding(spec.vocab, spec.hidden)
        self.pos = nn.Embedding(spec.seq_len, spec.hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens``: int64 ``[batch, seq]`` -> ``[batch, seq, hidden]``."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.tok(tokens) + self.pos(positions)


class Head(nn.Module):
    """Final LayerNorm and the vocabulary projection (the last layer of the layer table)."""

    def __init__(self, spec: TransformerSpec) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(spec.hidden)
        self.proj = nn.Linear(spec.hidden, spec.vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``[batch, seq, hidden]`` -> logits ``[batch, seq, vocab]``."""
        return self.proj(self.norm(x))


def n_layers(spec: TransformerSpec) -> int:
    """Length of the layer table: embedding, ``spec.layers`` blocks, head."""
    return spec.layers + 2


def layer_seed(seed: int, index: int) -> int:
    """The initialisation seed of layer ``index`` (a pure function of the model seed)."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint64)[0] >> 1)


@torch.no_grad()
def init_layer(module: nn.Module, seed: int, index: int) -> None:
    """Initialise one layer deterministically: weights ~ N(0, INIT_STD), biases 0, norms 1/0."""
    gen = torch.Generator().manual_seed(layer_seed(seed, index))
    for sub in module.modules():
        if isinstance(sub, nn.LayerNorm):
            sub.weight.fill_(1.0)
            sub.bias.fill_(0.0)
        elif isinstance(sub, (nn.Linear, nn.Embedding)):
            sub.weight.copy_(torch.randn(sub.weight.shape, generator=gen) * INIT_STD)
            if getattr(sub, "bias", None) is not None:
                sub.bias.zero_()


def build_layer(spec: TransformerSpec, index: int, tp: int = 1, seed: int = 0) -> nn.Module:
    """Layer ``index`` of the layer table alone (embedding, block or head), initialised from ``seed``.

    ``tp`` gives the block's per-device shapes under that tensor-parallel degree (embedding and
    head are never sharded).
    """
    last = n_layers(spec) - 1
    if not 0 <= index <= last:
        raise ValueError(f"model {spec.name}: layer {index} out of range 0..{last}")
    module: nn.Module
    if index == 0:
        module = Embedding(spec)
    elif index == last:
        module = Head(spec)
    else:
        module = Block(spec, tp)
    init_layer(module, seed, index)
    return module


class GPT(nn.Module):
    """Layers ``[start, end)`` of the layer table as one module (the whole model by default).

    ``embed`` exists only when the range starts at 0, ``head`` only when it ends at the last layer;
    ``blocks`` holds the range's blocks keyed by their global block index. ``remat`` makes every
    block recompute its activations in the backward pass; ``autocast`` (a half-precision dtype, or
    None) runs the forward pass under ``torch.autocast`` while parameters stay fp32.
    """

    def __init__(
        self,
        spec: TransformerSpec,
        start: int = 0,
        end: int | None = None,
        seed: int = 0,
        *,
        remat: bool = False,
        autocast: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        total = n_layers(spec)
        end = total if end is None else end
        if not 0 <= start < end <= total:
            raise ValueError(f"model {spec.name}: layer range [{start}, {end}) is not inside 0..{total}")
        if spec.experts:
            raise ValueError(f"model {spec.name}: mixture-of-experts layers are not supported by the runner")
        self.spec = spec
        self.start, self.end = start, end
        self.embed = build_layer(spec, 0, seed=seed) if start == 0 else None
        self.blocks = nn.ModuleDict(
            {str(i - 1): build_layer(spec, i, seed=seed) for i in range(max(start, 1), min(end, total - 1))}
        )
        self.head = build_layer(spec, total - 1, seed=seed) if end == total else None
        for block in self.blocks.values():
            block.remat = remat
        self.autocast = autocast
        if spec.tied_embeddings:
            if self.embed is None or self.head is None:
                raise ValueError(f"model {spec.name}: tied embeddings need the embedding and the head in one stage")
            self.head.proj.weight = self.embed.tok.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens (first stage) or hidden states in; hidden states or logits (last stage) out."""
        with torch.autocast(x.device.type, dtype=self.autocast, enabled=self.autocast is not None):
            if self.embed is not None:
                x = self.embed(x)
            for block in self.blocks.values():
                x = block(x)
            if self.head is not None:
                x = self.head(x)
        return x


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy, computed in fp32 whatever the logits' dtype."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())
