"""Testbed descriptions: presets, files, the cluster a policy sees, one-line errors."""

from __future__ import annotations

import json

import pytest

from real_runner.testbed import PRESETS, Testbed, TestbedNode, load_testbed


def test_presets_are_cpu_testbeds_with_a_core_per_device() -> None:
    cpu4 = load_testbed("cpu-4")
    assert (len(cpu4.nodes), cpu4.devices_per_node, cpu4.total_devices) == (2, 2, 4)
    assert [n.devices for n in cpu4.nodes] == [(0, 1), (2, 3)]
    cluster = cpu4.cluster()
    assert cluster.gpu_types == ("cpu",) and cluster.total_gpus == 4 and cluster.groups[0].gpus_per_node == 2
    assert PRESETS["cpu-2"].cluster().total_gpus == 2


def test_oversubscription_counts_devices_per_core() -> None:
    assert load_testbed("cpu-4").oversubscription(2) == 2.0
    assert load_testbed("cpu-2").oversubscription(2) == 1.0
    gpu = Testbed("g", "a100", (TestbedNode("h", (0, 1)),))
    assert gpu.oversubscription(1) == 1.0 and not gpu.is_cpu


def test_gpu_testbed_file_round_trips_hosts_and_devices(tmp_path) -> None:
    path = tmp_path / "lab.json"
    path.write_text(
        json.dumps(
            {
                "name": "lab",
                "device_type": "A100",
                "launcher": "ray",
                "checkpoint_root": "/ckpt",
                "nodes": [{"host": "10.0.0.1", "devices": [0, 1]}, {"host": "10.0.0.2", "devices": [2, 3]}],
            }
        )
    )
    bed = load_testbed(str(path))
    assert bed.device_type == "a100" and bed.launcher == "ray" and bed.checkpoint_root == "/ckpt"
    assert bed.nodes[1] == TestbedNode("10.0.0.2", (2, 3))
    assert bed.cluster().groups[0].nodes == 2


def test_toml_testbed_file(tmp_path) -> None:
    path = tmp_path / "bed.toml"
    path.write_text('device_type = "cpu"\n[[nodes]]\ndevices = [0]\n')
    bed = load_testbed(str(path))
    assert bed.name == "bed" and bed.nodes == (TestbedNode("localhost", (0,)),)
    assert bed.precision == "auto"


def test_testbed_file_sets_the_jobs_precision(tmp_path) -> None:
    path = tmp_path / "bf16.json"
    path.write_text(json.dumps({"device_type": "cpu", "precision": "bf16", "nodes": [{"devices": [0]}]}))
    assert load_testbed(str(path)).precision == "bf16"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"device_type": "tpu", "nodes": [{"devices": [0]}]}, "unknown GPU type 'tpu'"),
        ({"device_type": "cpu", "nodes": []}, "nodes must be a non-empty list"),
        ({"device_type": "cpu", "nodes": [{"devices": [0, 1]}, {"devices": [2]}]}, "same device count"),
        ({"device_type": "cpu", "nodes": [{"devices": [0, 1, 2]}]}, "power of two"),
        ({"device_type": "cpu", "nodes": [{"devices": [0, 0]}]}, "lists a device twice"),
        (
            {"device_type": "cpu", "nodes": [{"devices": [True]}]},
            "nodes[0]: devices must be a tuple of integers, got [True]",
        ),
        (
            {"device_type": "cpu", "nodes": [{"devices": [4096]}]},
            "devices must be a non-empty list of device ids 0..4095",
        ),
        ({"device_type": "cpu", "nodes": [{"devices": [0]}], "launcher": "slurm"}, "unknown launcher 'slurm'"),
        ({"device_type": "cpu", "nodes": [{"devices": [0]}], "gpus": 3}, "unknown field(s) gpus"),
        ({"device_type": "cpu", "nodes": [{"devices": [0], "port": 1}]}, "nodes[0]: unknown field(s) port"),
        ({"device_type": "cpu", "nodes": [{"devices": [0]}], "precision": "int8"}, "precision 'int8' is unknown"),
    ],
)
def test_bad_testbed_files_fail_with_one_line(tmp_path, data, message) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError) as info:
        load_testbed(str(path))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_unknown_name_and_unparsable_file(tmp_path) -> None:
    with pytest.raises(ValueError, match="unknown testbed 'cpu-9'.*presets are cpu-1, cpu-2, cpu-4"):
        load_testbed("cpu-9")
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000)
    with pytest.raises(ValueError, match="cannot parse testbed file"):
        load_testbed(str(path))
