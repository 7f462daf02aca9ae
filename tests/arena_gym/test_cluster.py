"""Cluster presets and user cluster files."""

from __future__ import annotations

import json

import pytest

from arena_gym.cluster import PRESETS, load_cluster


def test_presets_match_the_artifact():
    arena = load_cluster("arena-1280")
    assert arena.total_gpus == 1280
    assert {g.gpu_type: (g.nodes, g.gpus_per_node) for g in arena.groups} == {
        "a100": (80, 4), "v100": (20, 16), "a40": (160, 2), "a10": (160, 2)}
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


@pytest.mark.parametrize("content, message", [
    ("{not json", "cannot parse cluster file"),
    ('{"gpu_types": {}}', "non-empty 'gpu_types'"),
    ('{"gpu_types": {"a10": {"nodes": 2}}}', "needs integer 'nodes' and 'gpus_per_node'"),
    ('{"gpu_types": {"a10": {"nodes": 2, "gpus_per_node": 3}}}', "power of two"),
    ('[1, 2]', "must hold a table"),
])
def test_bad_cluster_files(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_cluster(str(path))


def test_unknown_cluster_lists_presets():
    with pytest.raises(ValueError, match="presets are arena-1280, testbed-64, tiny"):
        load_cluster("nope")
    with pytest.raises(ValueError, match="valid: a40, a10"):
        PRESETS["tiny"].group("h100")
