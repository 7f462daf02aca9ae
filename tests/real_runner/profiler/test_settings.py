"""Profiler settings and job files: validation with one-line errors, round trips, tabulated groups."""

from __future__ import annotations

from dataclasses import replace

import pytest

from real_runner.profiler.settings import ProfileJob, ProfilerSettings, tp_degrees


def test_settings_round_trip_and_sizes():
    s = ProfilerSettings()
    assert ProfilerSettings.from_dict(s.to_dict()) == s
    assert s.sizes()[0] == 2**10 and s.sizes()[-1] == 2**26 and len(s.sizes()) == 17
    q = ProfilerSettings.quick()
    assert q.sizes() == [2**10, 2**12, 2**14, 2**16, 2**18, 2**20]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"samples": (4, 1)}, "samples"),
        ({"samples": ()}, "samples"),
        ({"overhead_samples": (3,)}, "overhead_samples"),
        ({"tp": (3,)}, "powers of two"),
        ({"rounds": 0}, "rounds"),
        ({"layer_repeats": 0}, "layer_repeats"),
        ({"neighbours": "loud"}, "neighbours"),
        ({"comm_min_exp": 20, "comm_max_exp": 10}, "comm_min_exp"),
        ({"comm_ops": ("broadcast",)}, "broadcast"),
        ({"statistic": "max"}, "statistic"),
        ({"grouped_statistic": "mode"}, "grouped_statistic"),
        ({"clock": "sundial"}, "clock"),
        ({"gap_s": 5.0}, "gap_s"),
        ({"order_in_flight": (1, 8)}, "order_in_flight must start at 2"),
        ({"order_samples": (4, 1)}, "order_samples"),
        ({"order_rounds": 0}, "order_rounds"),
    ],
)
def test_bad_settings_name_the_setting(change, message):
    with pytest.raises(ValueError, match=message):
        replace(ProfilerSettings(), **change)
    with pytest.raises(ValueError, match="profiler settings: unknown field\\(s\\) sample; valid: samples"):
        ProfilerSettings.from_dict({"sample": [1]})
    with pytest.raises(ValueError, match="profiler settings: rounds must be an integer, got 2.5"):
        ProfilerSettings.from_dict({"rounds": 2.5})


def test_tensor_parallel_degrees_follow_the_heads_and_the_node():
    s = ProfilerSettings()
    assert tp_degrees(s, heads=4, devices_per_node=2) == [1, 2]
    assert tp_degrees(s, heads=4, devices_per_node=8) == [1, 2, 4]
    assert tp_degrees(replace(s, tp=(2, 8)), heads=4, devices_per_node=2) == [1, 2]


def test_job_files_round_trip(tmp_path):
    job = ProfileJob(("gpt__tiny",), ProfilerSettings.quick(), "cpu-4", 2, 2, (0, 1), str(tmp_path))
    assert ProfileJob.load(job.save(tmp_path / "job.json")) == job
    assert job.world_size == 4
    with pytest.raises(ValueError, match="dense transformers"):
        ProfileJob(("moe__10B",), ProfilerSettings(), "t", 1, 1, (0,), str(tmp_path))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a profiler job file .*missing field\\(s\\) models, settings"):
        ProfileJob.load(tmp_path / "bad.json")


def test_groups_cover_every_size_inside_and_across_nodes(tmp_path):
    pytest.importorskip("torch")
    from real_runner.profiler.comm import group_specs

    def groups(nodes, per_node, ops=("all_reduce", "send_recv")):
        job = ProfileJob(
            ("gpt__tiny",),
            replace(ProfilerSettings(), comm_ops=ops),
            "t",
            nodes,
            per_node,
            tuple(range(per_node)),
            str(tmp_path),
        )
        return [(g.op, g.ranks, g.nodes) for g in group_specs(job)]

    assert groups(1, 1) == []
    assert groups(1, 2) == [("all_reduce", (0, 1), 1), ("send_recv", (0, 1), 1)]
    assert groups(2, 2, ("all_reduce",)) == [
        ("all_reduce", (0, 1), 1),
        ("all_reduce", (0, 2), 2),
        ("all_reduce", (0, 1, 2, 3), 2),
    ]
