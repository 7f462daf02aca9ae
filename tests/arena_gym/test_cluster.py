"""Cluster presets and user cluster files."""

from __future__ import annotations

import json

import pytest

from arena_gym.cluster import PRESETS, load_cluster, resolve_cluster


def test_presets_match_the_artifact():
    arena = load_cluster("arena-1280")
    assert arena.total_gpus == 1280
    assert {g.gpu_type: (g.nodes, g.gpus_per_node) for g in arena.groups} == {
        "a100": (80, 4),
        "v100": (20, 16),
        "a40": (160, 2),
        "a10": (160, 2),
    }
    assert load_cluster("testbed-64").total_gpus == 64
    assert load_cluster("tiny").total_gpus == 8 and len(PRESETS["tiny"].groups) == 2


def test_json_and_toml_files(tmp_path):
    j = tmp_path / "mine.json"
    j.write_text(json.dumps({"gpu_types": {"H100": {"nodes": 2, "gpus_per_node": 8, "inter_node_gbps": 50}}}))
    c = load_cluster(str(j))
    assert c.name == "mine" and c.group("h100").total_gpus == 16 and c.group("h100").inter_node_gbps == 50
    t = tmp_path / "lab.toml"
    t.write_text('name = "lab"\n[gpu_types.a10]\nnodes = 3\ngpus_per_node = 2\n')
    assert load_cluster(str(t)).total_gpus == 6


def a10(**fields) -> str:
    return json.dumps({"gpu_types": {"a10": {"nodes": 2, "gpus_per_node": 2, **fields}}})


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "cannot parse cluster file"),
        ('{"gpu_types": {}}', "non-empty 'gpu_types'"),
        ('{"name": "x"}', r": missing field\(s\) gpu_types$"),
        ('{"gpu_types": {"a10": {"nodes": 2}}}', r"gpu_types.a10: missing field\(s\) gpus_per_node$"),
        ('{"gpu_types": {"a10": 2}}', r"gpu_types.a10 must be an object, got 2$"),
        (
            '{"gpu_types": {"a10": {"nodes": 2, "gpus_per_node": 3}}}',
            r"gpu_types.a10.gpus_per_node: expected a power of two in 1..64, got 3",
        ),
        ("[1, 2]", r"bad.json must be an object, got \[1, 2\]$"),
        # nonsense that used to be repaired silently or crash later
        (a10(intra_node_gbps=-5), r"gpu_types.a10.intra_node_gbps: expected a number of GB/s in \(0, 100000\]"),
        (a10(inter_node_gbps=float("nan")), r"gpu_types.a10.inter_node_gbps: .* got NaN"),
        (a10(inter_node_gbps=0), r"inter_node_gbps: .* got 0"),
        (a10(inter_node_gbps=True), r"inter_node_gbps: .* got true"),
        (
            '{"gpu_types": {"a10": {"nodes": true, "gpus_per_node": 2}}}',
            r"gpu_types.a10.nodes: expected an integer in 1..100000, got true",
        ),
        (
            '{"gpu_types": {"a10": {"nodes": 1e30, "gpus_per_node": 2}}}',
            r"nodes: expected an integer in 1..100000, got 1e\+30",
        ),
        ('{"gpu_types": {"a10": {"nodes": 2.0, "gpus_per_node": 2}}}', r"nodes: expected an integer .* got 2.0"),
        ('{"gpu_types": {"a10": {"nodes": "2", "gpus_per_node": 2}}}', r'nodes: expected an integer .* got "2"'),
        (
            '{"gpu_types": {"a10": {"nodes": 2, "gpus_per_node": 128}}}',
            r"gpus_per_node: expected a power of two in 1..64",
        ),
        (
            a10(nodez=1),
            r"gpu_types.a10: unknown field\(s\) nodez; valid: nodes, gpus_per_node, intra_node_gbps, inter_node_gbps$",
        ),
        (
            '{"gpu_types": {"a10": {"nodes": 1, "gpus_per_node": 2}}, "nmae": "x"}',
            r"bad.json: unknown field\(s\) nmae; valid: name, gpu_types$",
        ),
        (
            '{"name": 7, "gpu_types": {"a10": {"nodes": 1, "gpus_per_node": 2}}}',
            r"name: expected a non-empty one-line string, got 7",
        ),
        (
            '{"gpu_types": {"a10": {"nodes": 1, "gpus_per_node": 2}, "A10": {"nodes": 1, "gpus_per_node": 2}}}',
            "listed twice",
        ),
        (
            '{"gpu_types": {"a10": {"nodes": 1, "gpus_per_node": 2}, "a10": {"nodes": 9, "gpus_per_node": 2}}}',
            "key 'a10' appears twice",
        ),
        ('{"gpu_types": {"\u00e040": {"nodes": 1, "gpus_per_node": 2}}}', r'"\\u00e040" is not a GPU type name'),
        ("[" * 100_000, "nested too deeply"),
        ('{"gpu_types": ' * 50_000, "nested too deeply"),
        (b"\xff\xfe".decode("latin-1"), "not UTF-8 text"),
    ],
)
def test_bad_cluster_files(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="latin-1" if content.startswith("\xff") else "utf-8")
    with pytest.raises(ValueError, match=message) as info:
        load_cluster(str(path))
    assert "\n" not in str(info.value) and str(info.value).startswith(str(path))


def test_deeply_nested_toml_is_one_line(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("x = " + "[" * 100_000)
    with pytest.raises(ValueError, match="cannot parse cluster file") as info:
        load_cluster(str(path))
    assert "\n" not in str(info.value)


def test_link_speeds_are_kept_exactly(tmp_path):
    path = tmp_path / "c.json"
    path.write_text(a10(intra_node_gbps=12.5, inter_node_gbps=3))
    group = load_cluster(str(path)).group("a10")
    assert (group.intra_node_gbps, group.inter_node_gbps, group.nodes, group.gpus_per_node) == (12.5, 3.0, 2, 2)


def test_unknown_cluster_lists_presets():
    with pytest.raises(ValueError, match="presets are arena-1280, testbed-64, tiny"):
        load_cluster("nope")
    with pytest.raises(ValueError, match="valid: a40, a10"):
        PRESETS["tiny"].group("h100")


def test_variant_node_counts_are_read_as_integers():
    assert resolve_cluster("tiny[a40=3, A10=1]").groups == resolve_cluster("tiny[a40=3.0,a10=1e0]").groups
    assert (
        resolve_cluster("tiny[a40=3]").group("a40").nodes == 3
        and resolve_cluster("tiny[]").groups == PRESETS["tiny"].groups
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        ("tiny[a40=true]", r"^cluster 'tiny\[a40=true\]': node count 'true' of a40 is not an integer$"),
        ("tiny[a40=8.5]", r"^cluster 'tiny\[a40=8.5\]': node count '8.5' of a40 is not an integer$"),
        ("tiny[a40=nan]", r"node count 'nan' of a40 is not an integer$"),
        ("tiny[a40=]", r"node count '' of a40 is not an integer$"),
        ("tiny[a40=0]", r"^cluster 'tiny\[a40=0\]': node count of a40 must be in 1..100000, got 0$"),
        ("tiny[a40=1e6]", r"node count of a40 must be in 1..100000, got 1000000$"),
        ("tiny[h100=2]", r"'h100=2' is not TYPE=NODES with TYPE one of a40, a10$"),
        ("tiny[a40]", r"'a40' is not TYPE=NODES"),
    ],
)
def test_bad_variants_are_refused_in_one_line(spec, message):
    with pytest.raises(ValueError, match=message):
        resolve_cluster(spec)
