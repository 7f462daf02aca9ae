"""The torch GPT matches the estimator's layer table; synthetic data is a function of (seed, step)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from estimator.zoo import get_model  # noqa: E402
from real_runner.data import global_batch, replica_slice  # noqa: E402
from real_runner.model import GPT, Block, build_layer, n_layers  # noqa: E402
from real_runner.plans import model_spec  # noqa: E402


@pytest.mark.parametrize("name", ["gpt__tiny", "gpt__mini"])
def test_parameters_match_the_zoo_layer_by_layer(name):
    spec, arch = model_spec(name), get_model(name)
    model = GPT(spec)
    per_layer = [sum(p.numel() for p in build_layer(spec, i).parameters()) for i in range(n_layers(spec))]
    assert per_layer == [int(x) for x in arch.layers.params]
    assert sum(p.numel() for p in model.parameters()) == arch.param_count


def test_stages_hold_their_layers_with_global_names_and_the_full_models_weights():
    spec = model_spec("gpt__tiny")  # layer table: embed, block0..block3, head
    full = dict(GPT(spec, seed=3).named_parameters())
    first, middle, last = GPT(spec, 0, 2, seed=3), GPT(spec, 2, 4, seed=3), GPT(spec, 4, 6, seed=3)
    assert first.embed is not None and first.head is None and list(first.blocks) == ["0"]
    assert middle.embed is None and middle.head is None and list(middle.blocks) == ["1", "2"]
    assert last.embed is None and last.head is not None and list(last.blocks) == ["3"]
    names = set()
    for stage in (first, middle, last):
        for name, p in stage.named_parameters():
            assert torch.equal(p, full[name]), name
            names.add(name)
    assert names == set(full)
    assert not torch.equal(GPT(spec, seed=4).blocks["0"].attn.wq.weight, full["blocks.0.attn.wq.weight"])


def test_stages_chain_to_the_full_forward():
    spec = model_spec("gpt__tiny")
    x, _ = global_batch(0, 0, 2, spec.seq_len, spec.vocab)
    with torch.no_grad():
        expected = GPT(spec)(x)
        staged = GPT(spec, 3, 6)(GPT(spec, 0, 3)(x))
    assert expected.shape == (2, spec.seq_len, spec.vocab)
    torch.testing.assert_close(staged, expected)


def test_a_block_alone_at_tensor_parallel_shapes():
    spec = model_spec("gpt__mini")  # hidden 256, 8 heads
    block = Block(spec, tp=4)
    assert block.attn.wq.weight.shape == (64, 256) and block.attn.wo.weight.shape == (256, 64)
    assert block.mlp.fc1.weight.shape == (256, 256) and block.mlp.fc2.weight.shape == (256, 256)
    x = torch.randn(2, 16, 256)
    assert block(x).shape == x.shape  # runs on the 2 local heads
    with pytest.raises(ValueError, match="does not divide 8 heads"):
        Block(spec, tp=3)


def test_invalid_ranges_and_models_are_refused():
    spec = model_spec("gpt__tiny")
    with pytest.raises(ValueError, match=r"layer range \[4, 7\)"):
        GPT(spec, 4, 7)
    with pytest.raises(ValueError, match="out of range"):
        build_layer(spec, 6)
    with pytest.raises(ValueError, match="'moe' has no live model builder: it runs in the simulator only"):
        model_spec("moe__690M")


def test_tied_embeddings_share_one_weight():
    spec = model_spec("gpt__350M")
    assert spec.tied_embeddings
    small = type(spec)("gpt__t", 1, 32, 2, seq_len=8, vocab=64, dtype="fp32")
    model = GPT(small)
    assert model.head.proj.weight is model.embed.tok.weight
    with pytest.raises(ValueError, match="tied embeddings"):
        GPT(small, 0, 2)


def test_batches_are_a_function_of_seed_and_step():
    x, y = global_batch(7, 12, 8, 64, 1024)
    x2, y2 = global_batch(7, 12, 8, 64, 1024)
    assert x.dtype == torch.int64 and x.shape == (8, 64)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    assert torch.equal(x[:, 1:], y[:, :-1])  # targets are the next tokens
    assert not torch.equal(x, global_batch(7, 13, 8, 64, 1024)[0])
    assert not torch.equal(x, global_batch(8, 12, 8, 64, 1024)[0])
    assert int(x.min()) >= 0 and int(x.max()) < 64  # the alphabet
    parts = [replica_slice(x, y, r, 4)[0] for r in range(4)]
    assert torch.equal(torch.cat(parts), x)


def test_a_single_process_learns_the_synthetic_task():
    spec = model_spec("gpt__tiny")
    model = GPT(spec)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for step in range(60):
        x, y = global_batch(0, step, 8, spec.seq_len, spec.vocab)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(6.93, abs=0.05)  # ln(1024): uniform at initialisation
    assert losses[-1] < 4.5
