"""Fuzz cluster files: generated JSON/TOML clusters load to exactly the values written; one
nonsense value (wrong type, out of range, unknown key) is refused with one line naming the key;
arbitrary bytes never escape as another exception."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from arena_gym.cluster import MAX_GPUS_PER_NODE, MAX_LINK_GBPS, MAX_NODES, load_cluster
from tests.fuzzing import assert_one_line, case_timeout, fuzz

TYPES = ("a100", "A100-80GB", "v100", "a40", "A10", "h100", "t4", "l40s", "p100", "rtx3090")
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-cluster-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
TIMEOUT_S = 5.0

LINK = st.floats(1e-6, MAX_LINK_GBPS, allow_nan=False) | st.integers(1, int(MAX_LINK_GBPS))
GROUP = st.fixed_dictionaries(
    {"nodes": st.integers(1, MAX_NODES), "gpus_per_node": st.sampled_from([2**k for k in range(7)])},
    optional={"intra_node_gbps": LINK, "inter_node_gbps": LINK},
)


def _lower_key(item: tuple[str, dict]) -> str:
    return item[0].lower()


CLUSTER = st.fixed_dictionaries(
    {
        "gpu_types": st.lists(
            st.tuples(st.sampled_from(TYPES), GROUP), min_size=1, max_size=5, unique_by=_lower_key
        ).map(dict)
    },
    optional={"name": st.text("abcxyz-_ 0123", min_size=1, max_size=12).filter(str.strip)},
)


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value == math.inf else "-inf" if value == -math.inf else repr(value))
        )
    if value is None or isinstance(value, (int, str)):
        return json.dumps(value)  # None -> null: not TOML, so such a file is refused at parsing
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"  # type: ignore[union-attr]


def write(data: dict, as_toml: bool) -> Path:
    path = Path(_SCRATCH.name) / ("c.toml" if as_toml else "c.json")
    if as_toml:
        lines = [f"{json.dumps(k)} = {toml_value(v)}" for k, v in data.items() if k != "gpu_types"]
        types = data.get("gpu_types", {})
        if isinstance(types, dict):
            for gpu_type, group in types.items():
                if isinstance(group, dict):
                    lines.append(f"[gpu_types.{json.dumps(gpu_type)}]")
                    lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in group.items()]
                else:
                    lines.append(f"gpu_types.{json.dumps(gpu_type)} = {toml_value(group)}")
        else:
            lines.append(f"gpu_types = {toml_value(types)}")
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(data), encoding="utf-8")
    return path


@fuzz(400)
@given(data=CLUSTER, as_toml=st.booleans())
def test_generated_clusters_load_exactly(data, as_toml):
    path = write(data, as_toml)
    with case_timeout(TIMEOUT_S):
        cluster = load_cluster(str(path))
    assert cluster.name == data.get("name", path.stem).strip()
    assert [g.gpu_type for g in cluster.groups] == [t.lower() for t in data["gpu_types"]]
    for group, spec in zip(cluster.groups, data["gpu_types"].values()):
        assert (group.nodes, group.gpus_per_node) == (spec["nodes"], spec["gpus_per_node"])
        assert group.intra_node_gbps == float(spec.get("intra_node_gbps", 0.0))
        assert group.inter_node_gbps == float(spec.get("inter_node_gbps", 0.0))


#: Values that are wrong for a field whatever else the file holds.
NAN, INF = math.nan, math.inf
BAD = {
    "nodes": [True, False, None, "2", 2.5, 2.0, 0, -1, MAX_NODES + 1, 10**30, 1e30, NAN, INF, [], {}],
    "gpus_per_node": [True, None, "2", 2.0, 0, 3, 6, MAX_GPUS_PER_NODE * 2, -4, NAN, [1], {}],
    "intra_node_gbps": [True, None, "2", 0, 0.0, -1, -1e-9, MAX_LINK_GBPS * 2, 1e300, NAN, INF, -INF, [], {}],
    "inter_node_gbps": [False, None, "fast", 0, -5.5, 1e30, NAN, INF, [2], {"x": 1}],
    "name": [7, 1.5, True, "", "   ", "a\nb", [], {}],
}


@st.composite
def one_bad_value(draw):
    data = draw(CLUSTER)
    types = data["gpu_types"]
    gpu_type = draw(st.sampled_from(list(types)))
    kind = draw(st.sampled_from(["field", "field", "field", "unknown", "missing", "type-name", "twice", "top"]))
    where = f"gpu_types.{gpu_type}"
    if kind == "field":
        field = draw(st.sampled_from(list(BAD)))
        value = draw(st.sampled_from(BAD[field]))
        if field == "name":
            data["name"], where = value, "name"
        else:
            types[gpu_type][field] = value
            where = f"{where}.{field}"
    elif kind == "unknown":
        key = draw(st.sampled_from(["node", "gpus", "Nodes", "intra_gbps", "x"]))
        if draw(st.booleans()):
            types[gpu_type][key] = 1
        else:
            data[key], where = 1, "unknown field"
    elif kind == "missing":
        del types[gpu_type][draw(st.sampled_from(["nodes", "gpus_per_node"]))]
        where = f"{where}: missing field"
    elif kind == "type-name":
        bad_name = draw(st.sampled_from(["", "a 40", "à40", "x/y", "-a40", "a40!"]))
        types[bad_name] = types.pop(gpu_type)
        where = "is not a GPU type name"
    elif kind == "twice":  # every name in TYPES has a letter, so swapcase() is another spelling
        types[gpu_type.swapcase()] = dict(types[gpu_type])
        where = "listed twice"
    else:
        data = draw(st.sampled_from([[], 3, "cluster", None, {"gpu_types": []}, {"gpu_types": {}}, {}]))
        where = ""
    return data, where


@fuzz(500)
@given(case=one_bad_value(), as_toml=st.booleans())
def test_one_nonsense_value_is_refused_in_one_line(case, as_toml):
    data, where = case
    if as_toml and not isinstance(data, dict):
        as_toml = False  # TOML has no non-table document
    path = write(data, as_toml)
    with case_timeout(TIMEOUT_S):
        try:
            cluster = load_cluster(str(path))
        except ValueError as exc:
            message = assert_one_line(exc, str(path))
        else:
            raise AssertionError(f"{data!r} loaded as {cluster}")
    if where and "cannot parse" not in message:  # TOML has no null (and no 10**30): the file itself is refused
        assert where in message, (where, message)


@fuzz(250)
@given(
    blob=st.one_of(
        st.binary(max_size=400),
        st.text(max_size=400),
        st.integers(1, 3000).map(lambda n: "[" * n),
        st.integers(1, 3000).map(lambda n: '{"a":' * n),
    ),
    suffix=st.sampled_from([".json", ".toml", ".cfg"]),
)
def test_arbitrary_bytes_never_escape(blob, suffix):
    path = Path(_SCRATCH.name) / f"junk{suffix}"
    path.write_bytes(blob if isinstance(blob, bytes) else blob.encode("utf-8", "surrogatepass"))
    with case_timeout(TIMEOUT_S):
        try:
            cluster = load_cluster(str(path))
        except ValueError as exc:
            assert_one_line(exc, str(path))
        else:
            assert cluster.total_gpus >= 1
