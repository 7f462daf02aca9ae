"""Hardware catalogue and model zoo."""

from __future__ import annotations

import pytest

from arena_gym.types import ModelRef
from estimator.hardware import GPUS, LINKS, NETWORKS, get_gpu, known_gpus, node_links
from estimator.zoo import TransformerSpec, build_transformer, describe, get_model, known_models, model_from_dict

REQUIRED = (
    "a100-40gb",
    "a100-80gb",
    "v100-16gb",
    "v100-32gb",
    "a40",
    "a10",
    "h100",
    "h200",
    "h800",
    "l20",
    "l40s",
    "rtx3090",
    "t4",
    "p100",
)


def test_catalogue_has_required_types_with_sourced_figures():
    for name in REQUIRED:
        g = GPUS[name]
        assert g.memory_gb > 0 and g.mem_bw_gbs > 0 and g.fp16_tflops > 0 and g.fp32_tflops > 0
        assert g.source and g.intra_link in LINKS and g.network in NETWORKS
    assert all(link.source for link in (*LINKS.values(), *NETWORKS.values()))


def test_trace_names_resolve():
    assert get_gpu("a100").memory_gb == 40 and get_gpu("v100").memory_gb == 32
    assert get_gpu("A40").name == "a40" and get_gpu("a10").memory_gb == 24
    assert get_gpu("h100").fp16_tflops > get_gpu("a100").fp16_tflops > get_gpu("v100").fp16_tflops


def test_unknown_gpu_names_valid_choices():
    with pytest.raises(ValueError) as err:
        get_gpu("x9000")
    text = str(err.value)
    assert "x9000" in text and "a100-40gb" in text and "\n" not in text
    assert "a100" in known_gpus()


def test_cluster_links_override_presets():
    from arena_gym.types import GpuType, NodeGroup

    default = node_links(get_gpu("a40"))
    assert default.intra_gbs == LINKS["pcie4"].gbs
    custom = node_links(get_gpu("a40"), NodeGroup(GpuType("a40"), 4, 2, intra_node_gbps=56.0, inter_node_gbps=3.0))
    assert (custom.intra_gbs, custom.inter_gbs) == (56.0, 3.0)


@pytest.mark.parametrize(
    "name,expected",
    [
        ("gpt__350M", 0.35e9),
        ("gpt__1.3B", 1.3e9),
        ("gpt__6.7B", 6.7e9),
        ("gpt__39B", 39e9),
        ("moe__690M", 0.69e9),
        ("moe__2.4B", 2.4e9),
        ("moe__70B", 70e9),
        ("wide_resnet__500M", 0.5e9),
        ("wide_resnet__6.8B", 6.8e9),
        ("wide_resnet__13B", 13e9),
    ],
)
def test_zoo_parameter_counts_match_labels(name, expected):
    arch = get_model(ModelRef.parse(name))
    assert abs(arch.param_count - expected) / expected < 0.08


def test_zoo_covers_the_artifact_families():
    names = known_models()
    assert len([n for n in names if n.startswith("gpt__")]) == 7 + 2  # Alpa's sizes plus the CPU presets tiny, mini
    assert len([n for n in names if n.startswith("moe__")]) == 6
    assert len([n for n in names if n.startswith("wide_resnet__")]) == 6
    gpt = get_model("bert__1.3B")  # the artifact's alias
    assert gpt.name == "gpt__1.3B" and gpt.dtype == "fp16" and gpt.sample_tokens == 1024
    assert get_model("wide_resnet__1B").dtype == "fp32"
    moe = get_model("moe__10B")
    assert moe.experts == 32 and moe.min_tokens_per_gpu == 2048 and moe.layers.a2a_bytes.sum() > 0


def test_per_layer_costs_are_consistent():
    gpt = get_model("gpt__1.3B")
    h, s = 2048, 1024
    block = gpt.layers.names.index("block0")
    assert gpt.layers.flops[block] == pytest.approx(2 * s * 12 * h * h + 4 * s * s * h)
    assert gpt.layers.act_out[block] == 2 * s * h
    assert (gpt.layers.flops >= 0).all() and (gpt.layers.act_saved > 0).all()


def test_unknown_model_lists_valid_names():
    with pytest.raises(ValueError) as err:
        get_model("gpt__1T")
    assert "gpt__1T" in str(err.value) and "gpt__1.3B" in str(err.value)


def test_user_defined_models():
    spec = TransformerSpec("mygpt__100M", layers=6, hidden=768, heads=12, seq_len=512, vocab=32000)
    arch = build_transformer(spec)
    assert arch.kind == "transformer" and len(arch.layers) == 8
    moe = model_from_dict({"name": "mymoe__1B", "layers": 4, "hidden": 512, "heads": 8, "experts": 8})
    assert moe.kind == "moe" and moe.experts == 8
    assert get_model("mymoe__1B", {moe.name: moe}) is moe
    assert "mymoe__1B" in describe(moe)
    with pytest.raises(ValueError, match="unknown field"):
        model_from_dict({"name": "bad__1B", "layers": 2, "hidden": 64, "heads": 4, "widht": 3})
    with pytest.raises(ValueError, match="multiple of heads"):
        TransformerSpec("bad__1B", layers=2, hidden=65, heads=4)


GPT = {"name": "mine__1B", "layers": 2, "hidden": 64, "heads": 4}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([GPT], r"^model spec must be an object, got \[\{"),
        ({"layers": 2}, r"^model spec: missing field\(s\) name, hidden, heads$"),
        ({**GPT, "name": 3}, r"^model spec: name must be a string, got 3$"),
        ({**GPT, "widht": 3}, r"^model spec 'mine__1B': unknown field\(s\) widht; valid: name, layers, hidden, "),
        ({k: v for k, v in GPT.items() if k != "heads"}, r"^model spec 'mine__1B': missing field\(s\) heads$"),
        ({**GPT, "hidden": 64.0}, r"^model spec 'mine__1B': hidden must be an integer, got 64.0$"),
        ({**GPT, "layers": True}, r"^model spec 'mine__1B': layers must be an integer, got True$"),
        ({**GPT, "remat": 1}, r"^model spec 'mine__1B': remat must be true or false, got 1$"),
        ({**GPT, "dtype": None}, r"^model spec 'mine__1B': dtype must be a string, got None$"),
        ({**GPT, "vocab": -1}, r"^model spec 'mine__1B': vocab must be an integer in 0..2\*\*31-1, got -1$"),
        ({**GPT, "vocab": 2**31}, r"^model spec 'mine__1B': vocab must be an integer in 0..2\*\*31-1, got 2147483648$"),
        ({**GPT, "layers": 100_001}, r"^model spec 'mine__1B': layers must be at most 100000, got 100001$"),
        (
            {"name": "wrn__x", "depth": 50, "channels": 64, "width_factor": "2"},
            r"^model spec 'wrn__x': width_factor must be an integer, got '2'$",
        ),
        (
            {"name": "wrn__x", "depth": 50, "channels": 64, "width_factor": 2, "dtype": "8"},
            r"^model wrn__x: unknown dtype '8'; valid: fp16, bf16, fp32$",
        ),
        ({**GPT, "dtype": "int4"}, r"^model mine__1B: unknown dtype 'int4'; valid: fp16, bf16, fp32$"),
    ],
)
def test_bad_model_specs_are_refused_in_one_line(data, message):
    with pytest.raises(ValueError, match=message):
        model_from_dict(data)
