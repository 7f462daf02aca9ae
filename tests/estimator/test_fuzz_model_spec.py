"""Fuzz ``--model-spec`` files (``arena_gym.harness.experiment.user_models``): generated valid transformer, MoE and
Wide-ResNet specs, specs with one nonsense field, and arbitrary bytes.

Valid files load to exactly the models written (name, layer count, dtype, parameter count of a rebuilt spec); every
other file gives a one-line ValueError naming the file.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from arena_gym.harness.experiment import user_models
from estimator.zoo import MAX_LAYERS, TransformerSpec, WideResNetSpec, build
from tests.fuzzing import assert_one_line, case_timeout, fuzz

TIMEOUT_S = 5.0
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-model-spec-")
ROOT = Path(_SCRATCH.name)
_FILES = iter(range(10**9))
FAMILIES = st.sampled_from(["mine", "gptx", "tfm", "wrnx"])
SIZES = st.sampled_from(["1B", "350M", "tiny", "7b", "x1"])


@st.composite
def transformer(draw) -> dict[str, Any]:
    heads = draw(st.sampled_from([1, 2, 4, 8, 16]))
    spec: dict[str, Any] = {
        "name": f"{draw(FAMILIES)}__{draw(SIZES)}",
        "layers": draw(st.integers(1, 48)),
        "hidden": heads * draw(st.integers(1, 64)) * 8,
        "heads": heads,
    }
    for key, values in (
        ("seq_len", st.integers(1, 4096)),
        ("vocab", st.integers(1, 60000)),
        ("ffn_mult", st.integers(1, 8)),
        ("dtype", st.sampled_from(["fp16", "bf16", "fp32"])),
        ("tied_embeddings", st.booleans()),
        ("remat", st.booleans()),
    ):
        if draw(st.booleans()):
            spec[key] = draw(values)
    if draw(st.integers(0, 3)) == 0:
        spec["experts"] = draw(st.integers(1, 16))
        spec["expert_every"] = draw(st.integers(1, 4))
    return spec


@st.composite
def wide_resnet(draw) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": f"{draw(FAMILIES)}__{draw(SIZES)}",
        "depth": draw(st.sampled_from([50, 101])),
        "channels": draw(st.integers(1, 512)),
        "width_factor": draw(st.integers(1, 8)),
    }
    if draw(st.booleans()):
        spec["image_size"] = 32 * draw(st.integers(1, 10))
    if draw(st.booleans()):
        spec["dtype"] = draw(st.sampled_from(["fp16", "fp32"]))
    return spec


SPECS = st.one_of(transformer(), wide_resnet())


def write(content: str | bytes) -> Path:
    path = ROOT / f"models{next(_FILES)}.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


@fuzz(100)
@given(specs=st.lists(SPECS, min_size=1, max_size=3, unique_by=lambda s: s["name"]), single=st.booleans())
def test_valid_model_spec_files_load_exactly(specs, single) -> None:
    path = write(json.dumps(specs[0] if single and len(specs) == 1 else specs))
    with case_timeout(TIMEOUT_S):
        models = user_models(str(path))
    assert models is not None and sorted(models) == sorted(s["name"] for s in specs)
    for spec in specs:
        arch = models[spec["name"]]
        cls = WideResNetSpec if "channels" in spec else TransformerSpec
        expected = build(cls(**spec))
        assert arch.param_count == expected.param_count and math.isfinite(arch.param_count) and arch.param_count > 0
        assert arch.dtype == spec.get("dtype", "fp32" if cls is WideResNetSpec else "fp16")
        if cls is TransformerSpec:
            assert len(arch.layers) == spec["layers"] + 2 and arch.experts == spec.get("experts", 0)


#: Values no field of a spec may take.
NONSENSE = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    64.0,
    "8",
    "",
    [],
    {},
    2**70,
    2**31 - 1,
    float("nan"),
    float("inf"),
    "fp8",
    "x" * 5,
]
FIELDS = {
    "transformer": ["name", "layers", "hidden", "heads", "seq_len", "vocab", "ffn_mult", "dtype", "experts", "remat"],
    "wide_resnet": ["name", "depth", "channels", "width_factor", "image_size", "dtype"],
}


def _acceptable(spec: dict[str, Any], field: str, value: Any) -> bool:
    """Whether ``value`` is in fact a valid value of ``field`` (then the draw is not nonsense)."""
    if field == "layers" and isinstance(value, int) and value > MAX_LAYERS:  # refused before a row per layer is built
        return False
    try:
        build((WideResNetSpec if "channels" in spec else TransformerSpec)(**{**spec, field: value}))
    except Exception:  # noqa: BLE001 - anything the constructor refuses is nonsense
        return False
    kinds = {"remat": bool, "tied_embeddings": bool, "dtype": str, "name": str}
    return isinstance(value, kinds.get(field, int)) and (field in kinds or not isinstance(value, bool))


@st.composite
def broken(draw) -> tuple[str, Any]:
    """(label, file content) with one thing wrong."""
    spec = draw(SPECS)
    kind = draw(st.sampled_from(["field", "field", "unknown field", "missing name", "item", "duplicate", "zoo name"]))
    if kind == "field":
        field = draw(st.sampled_from(FIELDS["wide_resnet" if "channels" in spec else "transformer"]))
        value = draw(st.sampled_from(NONSENSE + ["gpt", "a__b__c", "__1B", "mine__"] if field == "name" else NONSENSE))
        if _acceptable(spec, field, value):
            value = None
        return f"{field}={value!r}", [{**spec, field: value}]
    if kind == "unknown field":
        return kind, [{**spec, draw(st.sampled_from(["hiddn", "params", "", "layers "])): 1}]
    if kind == "missing name":
        return kind, [{k: v for k, v in spec.items() if k != "name"}]
    if kind == "item":
        return kind, [spec, draw(st.sampled_from([None, 3, "gpt__1B", [], [spec]]))]
    if kind == "duplicate":
        return kind, [spec, spec]
    return kind, [{**spec, "name": draw(st.sampled_from(["gpt__6.7B", "gpt__tiny", "moe__1.3B"]))}]


@fuzz(100)
@given(case=broken())
def test_model_spec_files_with_one_bad_entry_are_refused_in_one_line(case) -> None:
    label, content = case
    event(label.split("=")[0])
    path = write(json.dumps(content))
    with case_timeout(TIMEOUT_S):
        try:
            models = user_models(str(path))
        except ValueError as exc:
            assert_one_line(exc, str(path))
            return
    raise AssertionError(f"{label}: {content} loaded as {models}")


@fuzz(100)
@given(
    blob=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(str.encode),
        st.integers(1, 100_000).map(lambda n: b"[" * n),
        st.sampled_from([b"", b"[]", b"{}", b"null", b"3", b'"gpt__1B"', b"\xef\xbb\xbf[]", b'[{"name": 3}]']),
    )
)
def test_arbitrary_bytes_are_refused_in_one_line(blob) -> None:
    path = write(blob)
    with case_timeout(TIMEOUT_S):
        try:
            models = user_models(str(path))
        except ValueError as exc:
            assert_one_line(exc, str(path))
            return
    raise AssertionError(f"{blob[:80]!r} loaded as {models}")
