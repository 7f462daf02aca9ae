"""Fuzz testbed files (``real_runner.testbed.load_testbed``): generated valid JSON and TOML testbeds,
testbeds with one nonsense value, and arbitrary bytes.

Valid files load to exactly the name, device type, nodes, devices, launcher and checkpoint root
written; every other file gives a one-line ValueError naming the file (or the testbed's name).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from real_runner.testbed import load_testbed
from tests.fuzzing import assert_one_line, case_timeout, fuzz

TIMEOUT_S = 5.0
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-testbed-")
ROOT = Path(_SCRATCH.name)

TYPES = ["cpu", "a100", "h100", "a40", "a10", "v100", "CPU", " a100 "]
NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
HOSTS = st.sampled_from(["localhost", "127.0.0.1", "10.0.0.1", "node-2", "gpu.lab.example"])


@st.composite
def bed_objects(draw) -> dict[str, Any]:
    """A valid testbed object: every node has the same power-of-two count of distinct device ids."""
    per_node = draw(st.sampled_from([1, 2, 4, 8]))
    nodes = [
        {
            "host": draw(HOSTS),
            "devices": draw(st.lists(st.integers(0, 4095), min_size=per_node, max_size=per_node, unique=True)),
        }
        for _ in range(draw(st.integers(1, 4)))
    ]
    data: dict[str, Any] = {"device_type": draw(st.sampled_from(TYPES)), "nodes": nodes}
    if draw(st.booleans()):
        data["name"] = draw(NAMES)
    if draw(st.booleans()):
        data["launcher"] = draw(st.sampled_from(["local", "ray"]))
    if draw(st.booleans()):
        data["checkpoint_root"] = draw(st.sampled_from(["", "/shared/ckpt", "ckpt", "d i r/é"]))
    return data


def _toml_value(value: Any) -> str:
    return json.dumps(value)  # strings, integers and integer lists are spelled the same in TOML


def to_toml(data: dict[str, Any]) -> str:
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if k != "nodes"]
    for node in data["nodes"]:
        lines += ["[[nodes]]", *(f"{k} = {_toml_value(v)}" for k, v in node.items())]
    return "\n".join(lines) + "\n"


_FILES = iter(range(10**9))


def write(text: str | bytes, suffix: str) -> Path:
    path = ROOT / f"bed{next(_FILES)}{suffix}"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@fuzz(100)
@given(data=bed_objects(), toml=st.booleans())
def test_valid_testbed_files_load_exactly(data, toml) -> None:
    path = write(to_toml(data) if toml else json.dumps(data), ".toml" if toml else ".json")
    with case_timeout(TIMEOUT_S):
        bed = load_testbed(str(path))
    assert bed.name == data.get("name", path.stem)
    assert bed.device_type == data["device_type"].strip().lower()
    assert [(n.host, list(n.devices)) for n in bed.nodes] == [(n["host"], n["devices"]) for n in data["nodes"]]
    assert bed.launcher == data.get("launcher", "local")
    assert bed.checkpoint_root == data.get("checkpoint_root", "")
    assert bed.total_devices == len(data["nodes"]) * len(data["nodes"][0]["devices"])
    assert bed.cluster().total_gpus == bed.total_devices


#: One nonsense change to a valid testbed object: (label, function of the object).
NONSENSE = {
    "unknown top key": lambda d, v: {**d, "gpus": 4},
    "unknown node key": lambda d, v: {**d, "nodes": [{**d["nodes"][0], "cores": 2}, *d["nodes"][1:]]},
    "device type": lambda d, v: {**d, "device_type": v},
    "nodes": lambda d, v: {**d, "nodes": v},
    "node": lambda d, v: {**d, "nodes": [v, *d["nodes"][1:]]},
    "devices": lambda d, v: {**d, "nodes": [{**d["nodes"][0], "devices": v}, *d["nodes"][1:]]},
    "host": lambda d, v: {**d, "nodes": [{**d["nodes"][0], "host": v}, *d["nodes"][1:]]},
    "launcher": lambda d, v: {**d, "launcher": v},
    "checkpoint root": lambda d, v: {**d, "checkpoint_root": v},
    "name": lambda d, v: {**d, "name": v},
    "uneven nodes": lambda d, v: {
        **d,
        "nodes": [*d["nodes"], {"host": "x", "devices": list(range(len(d["nodes"][0]["devices"]) + 1))}],
    },
}
BAD_VALUES = {
    "device type": st.sampled_from(["", "tpu", "zz", "à40", None, 3, True, ["a100"], {"x": 1}, "a100\nb", " "]),
    "nodes": st.sampled_from([[], {}, None, "localhost", 3, [[]], [None]]),
    "node": st.sampled_from([None, 3, "localhost", [0, 1], {}, {"host": "x"}, {"devices": []}]),
    "devices": st.sampled_from(
        [[], None, "0,1", [0, 0], [-1], [4096], [1.0], [True], [0, "1"], [2**64], [0, 1, 2], [float("nan")]]
    ),
    "host": st.sampled_from(["", None, 3, ["localhost"], {}]),
    "launcher": st.sampled_from(["", "torchrun", "fake", None, 1, ["local"]]),
    "checkpoint root": st.sampled_from([None, 3, ["x"], {}]),
    "name": st.sampled_from(["", None, 7, ["x"]]),
}


@st.composite
def broken(draw) -> tuple[str, dict[str, Any]]:
    data = draw(bed_objects())
    label = draw(st.sampled_from(sorted(NONSENSE)))
    value = draw(BAD_VALUES[label]) if label in BAD_VALUES else None
    return label, NONSENSE[label](data, value)


@fuzz(100)
@given(case=broken(), toml=st.booleans())
def test_testbed_files_with_one_bad_value_are_refused_in_one_line(case, toml) -> None:
    label, data = case
    event(label)
    if toml:
        try:
            text = to_toml(data)
        except (TypeError, AttributeError, KeyError):  # not representable in the tiny TOML writer: use JSON
            toml, text = False, json.dumps(data)
        if "null" in text or "NaN" in text:  # TOML has neither
            toml, text = False, json.dumps(data)
    else:
        text = json.dumps(data)
    path = write(text, ".toml" if toml else ".json")
    with case_timeout(TIMEOUT_S):
        try:
            bed = load_testbed(str(path))
        except ValueError as exc:
            message = assert_one_line(exc)
            assert path.stem in message or str(data.get("name")) in message, message
            return
    raise AssertionError(f"{label}: {data} loaded as {bed}")


@fuzz(100)
@given(
    blob=st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300).map(str.encode),
        st.integers(1, 20000).map(lambda n: b"[" * n),
        st.integers(1, 20000).map(lambda n: b'{"nodes": ' * n),
        st.sampled_from([b"[]", b"3", b'"cpu"', b"null", b"\xff\xfe", b"nodes = 3\n", b"[[nodes]]\n"]),
    ),
    suffix=st.sampled_from([".json", ".toml", ""]),
)
def test_arbitrary_bytes_are_refused_in_one_line(blob, suffix) -> None:
    path = write(blob, suffix)
    with case_timeout(TIMEOUT_S):
        try:
            load_testbed(str(path))
        except ValueError as exc:
            assert_one_line(exc)
            return
    raise AssertionError(f"{blob[:80]!r} loaded as a testbed")
