"""PROFILE.json: schema, version, device description, round trip, and the interpolation rules."""

from __future__ import annotations

import copy
import dataclasses
import json
import re

import numpy as np
import pytest

from estimator.profile import (
    GROUPED_SUFFIX,
    PROFILE_VERSION,
    CommTable,
    Curve,
    DeviceInfo,
    LayerParams,
    ModelInfo,
    OptimizerFit,
    OrderCurve,
    Profile,
    ProfileError,
    interp_curve,
    interp_table,
    load_profile,
    monotone,
)

SIZES = tuple(2**k for k in range(10, 21, 2))  # 1 KiB .. 1 MiB
#: (latency s, bandwidth B/s) of each synthetic collective: t = latency + bytes / bandwidth (exactly linear)
LINKS = {
    "all_reduce": (1e-4, 1e9),
    "all_gather": (2e-4, 5e8),
    "reduce_scatter": (3e-4, 5e8),
    "send_recv": (5e-5, 2e9),
    "all_to_all": (1e-4, 1e9),
}


def linear(per_sample_s: float, samples=(1, 8, 16)) -> tuple[tuple[int, ...], tuple[float, ...]]:
    return tuple(samples), tuple(per_sample_s * n for n in samples)


def synthetic_profile() -> Profile:
    """A profile of gpt__tiny on cpu-2 with round numbers (seconds linear in samples and bytes)."""
    info = ModelInfo(
        "gpt__tiny",
        4,
        64,
        4,
        64,
        1024,
        4,
        {"embed": LayerParams(2, 69632), "block": LayerParams(16, 49984, 12, 49600), "head": LayerParams(3, 65664)},
    )

    def curve(layer, variant, tp, fw, bw, constant=False):
        samples = (1, 8, 16)
        f = tuple(fw if constant else fw * n for n in samples)
        b = tuple(bw if constant else bw * n for n in samples)
        return Curve("gpt__tiny", layer, variant, tp, samples, f, b)

    compute = (
        curve("embed", "compute", 1, 1e-4, 2e-4),
        curve("block", "compute", 1, 1e-3, 2e-3),
        curve("block", "compute", 2, 6e-4, 1.2e-3),
        curve("head", "compute", 1, 2e-3, 3e-3),
    )
    overhead = (
        curve("block", "tp", 1, 5e-4, 1e-3, True),
        curve("embed", "fsdp", 1, 2e-4, 3e-4, True),
        curve("block", "fsdp", 1, 2e-4, 3e-4, True),
        curve("head", "fsdp", 1, 2e-4, 3e-4, True),
        curve("model", "pipeline", 1, 1e-4, 1e-4, True),
    )
    comm = tuple(CommTable(op, 2, 1, SIZES, tuple(lat + s / bw for s in SIZES)) for op, (lat, bw) in LINKS.items())
    return Profile(
        DeviceInfo("cpu", "gloo", "cpu-2", 1, 2, "test CPU", "2.13.0+cpu", 1, "busy"),
        {"gpt__tiny": info},
        compute,
        overhead,
        OptimizerFit(1e-5, 1e-9, {"tp": 2e-5, "fsdp": 3e-5}),
        {"gpt__tiny": ((1, 16), (1e-4, 1.6e-3))},
        comm,
        1e-5,
        {"device_s": 10.0, "wall_s": 5.0, "devices": 2.0},
        {"rounds": 3},
        "2026-01-01T00:00:00+00:00",
        "test",
    )


def grouped_profile() -> Profile:
    """The synthetic profile plus grouped curves on 2 devices: a TP block (fw 1e-3 s + 5e-4 s/sample, bw twice that)
    and FSDP2 units (every kind: fw 1.5e-3 s/sample + 1e-3 s, bw 2.5e-3 s/sample + 2e-3 s without gradient
    synchronisation; 4e-3 s more in backward with it)."""
    samples = (1, 8, 16)
    tp = Curve(
        "gpt__tiny",
        "block",
        "tp" + GROUPED_SUFFIX,
        2,
        samples,
        tuple(1e-3 + 5e-4 * n for n in samples),
        tuple(2e-3 + 1e-3 * n for n in samples),
    )
    fsdp = tuple(
        Curve(
            "gpt__tiny",
            kind,
            wrapper + GROUPED_SUFFIX,
            2,
            samples,
            tuple(1e-3 + 1.5e-3 * n for n in samples),
            tuple(2e-3 + 2.5e-3 * n + extra for n in samples),
        )
        for kind in ("embed", "block", "head")
        for wrapper, extra in (("fsdp", 0.0), ("fsdp_sync", 4e-3))
    )
    return dataclasses.replace(synthetic_profile(), grouped=(tp, *fsdp))


@pytest.fixture
def profile_file(tmp_path):
    path = tmp_path / "PROFILE.json"
    path.write_text(synthetic_profile().to_json())
    return path


def test_round_trip_keeps_everything(profile_file):
    loaded = load_profile(profile_file)
    original = synthetic_profile()
    assert loaded.to_dict() == original.to_dict()
    assert loaded.version == PROFILE_VERSION
    assert loaded.device == original.device
    assert loaded.device.device_type == "cpu" and loaded.device.backend == "gloo" and loaded.device.neighbours == "busy"
    assert loaded.models["gpt__tiny"].layers["block"].local(tp=2) == (16, 49984 - 49600 / 2)
    assert loaded.covers("gpt__tiny", "cpu") and not loaded.covers("gpt__tiny", "a100-40gb")
    assert not loaded.covers("gpt__mini", "cpu")


def test_grouped_curves_round_trip_and_a_version_2_profile_still_loads(tmp_path):
    path = tmp_path / "grouped.json"
    path.write_text(grouped_profile().to_json())
    loaded = load_profile(path)
    assert loaded.to_dict() == grouped_profile().to_dict() and len(loaded.grouped) == 7
    curve = loaded.grouped_curve("gpt__tiny", "block", "tp", 2)
    assert curve is not None and curve.at(4)[0] == pytest.approx(1e-3 + 5e-4 * 4)
    assert curve.at(0.5)[0] == pytest.approx(1e-3 + 5e-4)  # below the smallest count: its time (fixed costs)
    assert loaded.grouped_curve("gpt__tiny", "block", "tp", 4) is None
    assert loaded.grouped_curve("gpt__tiny", "head", "fsdp", 2) is not None
    old = synthetic_profile().to_dict()
    old.pop("grouped")
    old["version"] = 2
    path.write_text(json.dumps(old))
    assert load_profile(path).grouped == () and load_profile(path).version == 2


def order_profile():
    """The synthetic profile with order fractions of gpt__tiny at 2 and 8 micro-batches in flight."""
    order = (
        OrderCurve("gpt__tiny", 2, (1, 4), (-0.02, 0.04)),
        OrderCurve("gpt__tiny", 8, (1, 4), (0.10, 0.16)),
    )
    return dataclasses.replace(synthetic_profile(), order=order)


def test_order_curves_round_trip_and_a_version_3_profile_composes_without_them(tmp_path):
    path = tmp_path / "order.json"
    path.write_text(order_profile().to_json())
    loaded = load_profile(path)
    assert loaded.to_dict() == order_profile().to_dict() and loaded.order == order_profile().order
    old = synthetic_profile().to_dict()
    old.pop("order")
    old["version"] = 3
    path.write_text(json.dumps(old))
    assert load_profile(path).order == () and load_profile(path).order_fraction("gpt__tiny", 2, 8) == 0.0


def test_order_fractions_interpolate_in_samples_and_micro_batches_in_flight():
    p = order_profile()
    assert p.order_fraction("gpt__tiny", 4, 1) == 0.0  # one in flight: the profiled layer order
    assert p.order_fraction("gpt__tiny", 4, 2) == pytest.approx(0.04)
    assert p.order_fraction("gpt__tiny", 2, 8) == pytest.approx(0.12)  # linear in samples: 0.10 + 0.06 / 3
    assert p.order_fraction("gpt__tiny", 16, 8) == pytest.approx(0.16)  # the nearest end outside
    assert p.order_fraction("gpt__tiny", 4, 5) == pytest.approx(0.04 + (0.16 - 0.04) / 2)  # linear in flight
    assert p.order_fraction("gpt__tiny", 4, 32) == pytest.approx(0.16)  # the largest count's value beyond it
    assert p.order_fraction("gpt__tiny", 1, 2) == 0.0  # a negative fraction counts as zero
    assert p.order_fraction("gpt__tiny", 1, 5) == pytest.approx(0.05)  # from 0 at 2 (clamped) to 0.10 at 8
    assert p.order_fraction("gpt__mini", 4, 8) == 0.0  # a model without order curves


@pytest.mark.parametrize(
    "make, mutate, message",
    [
        (grouped_profile, lambda d: d["grouped"][0].update(wrapper="pipeline"), "grouped[0].wrapper"),
        (grouped_profile, lambda d: d["grouped"][0].update(group=1), "grouped[0].group"),
        (grouped_profile, lambda d: d["grouped"][1].update(layer="model"), "grouped[1].layer"),
        # tensor parallelism wraps blocks only
        (grouped_profile, lambda d: d["grouped"][0].update(layer="head"), "grouped[0].layer"),
        (
            grouped_profile,
            lambda d: d["grouped"].append(copy.deepcopy(d["grouped"][0])),
            "grouped lists a curve twice",
        ),
        (order_profile, lambda d: d["order"][0].update(in_flight=1), "order[0].in_flight"),
        (order_profile, lambda d: d["order"][1].update(model="gpt__mini"), "order[1].model"),
        (
            order_profile,
            lambda d: d["order"][0].update(fraction=[0.1]),
            "order[0]: samples and fraction differ in length",
        ),
        (order_profile, lambda d: d["order"].append(copy.deepcopy(d["order"][0])), "order lists a curve twice"),
    ],
)
def test_bad_grouped_and_order_curves_are_named(tmp_path, make, mutate, message):
    data = make().to_dict()
    mutate(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match=re.escape(message)):
        load_profile(path)


def test_the_file_format_is_plain_json(profile_file):
    data = json.loads(profile_file.read_text())
    assert data["format"] == "arena-gym-profile" and data["version"] == PROFILE_VERSION
    assert set(data) >= {
        "device",
        "models",
        "compute",
        "overhead",
        "optimizer",
        "data",
        "comm",
        "calls",
        "cost",
        "settings",
    }
    assert data["comm"][0]["bytes"] == list(SIZES)


def _broken(mutate) -> dict:
    data = synthetic_profile().to_dict()
    mutate(data)
    return data


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(version=PROFILE_VERSION + 1), "version"),
        (lambda d: d.update(format="something"), "not a profile"),
        (lambda d: d.pop("comm"), "profile: missing field(s) comm"),
        (lambda d: d.update(extra=1), "profile: unknown field(s) extra; valid: format, version"),
        (lambda d: d["device"].update(backend="mpi"), "device.backend"),
        (lambda d: d["device"].pop("device_type"), "device: missing field(s) device_type"),
        (lambda d: d["device"].update(nodes=True), "device: nodes must be an integer, got True"),
        (lambda d: d["device"].update(nodes="1"), "device: nodes must be an integer, got '1'"),
        (lambda d: d["models"]["gpt__tiny"].update(blocks=4.0), "models.gpt__tiny: blocks must be an integer, got 4.0"),
        (lambda d: d["models"]["gpt__tiny"]["layers"].pop("head"), "models.gpt__tiny.layers: missing field(s) head"),
        (lambda d: d["models"]["gpt__tiny"]["layers"]["block"].update(x=1), "layers.block: unknown field(s) x"),
        (lambda d: d["compute"][0].update(tp=False), "compute[0]: tp must be an integer, got False"),
        (lambda d: d["compute"][0].update(fw_s=["1", 2.0, 3.0]), "compute[0]: fw_s must be a tuple of numbers"),
        (lambda d: d["compute"][0].update(wrapper="tp"), "compute[0]: unknown field(s) wrapper"),
        (lambda d: d["overhead"][0].pop("wrapper"), "overhead[0]: missing field(s) wrapper"),
        (lambda d: d["optimizer"].update(per_tensor_s="0.1"), "optimizer: per_tensor_s must be a number, got '0.1'"),
        (lambda d: d["calls"].update(backward_s=True), "calls: backward_s must be a number, got True"),
        (lambda d: d["comm"][0].update(extra=1), "comm[0]: unknown field(s) extra"),
        (lambda d: d["data"][0].pop("seconds"), "data[0]: missing field(s) seconds"),
        (lambda d: d.update(version=4.0), "profile: version must be an integer, got 4.0"),
        (lambda d: d["compute"][0].update(samples=[8, 1, 16]), "strictly increasing"),
        (lambda d: d["compute"][0].update(fw_s=[1.0, -1.0, 2.0]), "compute[0].fw_s[1]"),
        (lambda d: d["compute"][0].update(fw_s=[1.0, 2.0]), "differ in length"),
        (lambda d: d["compute"][0].update(model="gpt__mini"), "not in models"),
        (lambda d: d["comm"][0].update(ranks=1), "comm[0].ranks"),
        (lambda d: d["comm"].append(copy.deepcopy(d["comm"][0])), "twice"),
        (lambda d: d["overhead"][0].update(wrapper="ddp"), "wrapper"),
        (lambda d: d.update(compute=[c for c in d["compute"] if c["layer"] != "head"]), "no head curve"),
        (lambda d: d["models"]["gpt__tiny"]["layers"]["block"].update(tp_elements=10**9), "tensor-parallel part"),
        (lambda d: d.update(created=None), "created must be a string, got None"),  # was read as the text "None"
        (lambda d: d.update(code_version=7), "code_version must be a string"),
    ],
)
def test_bad_profiles_fail_with_one_line_naming_the_problem(tmp_path, mutate, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_broken(mutate)))
    with pytest.raises(ProfileError) as err:
        load_profile(path)
    text = str(err.value)
    assert message in text and str(path) in text and "\n" not in text


def test_unreadable_files_fail_with_one_line(tmp_path):
    with pytest.raises(ProfileError, match="no such profile"):
        load_profile(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ProfileError, match="not valid JSON"):
        load_profile(tmp_path / "x.json")


# ----------------------------------------------------------------------------------------------
# interpolation rules


def test_curves_interpolate_linearly_and_extrapolate_along_the_last_segment():
    xs, ys = (1, 2, 4), (1.0, 3.0, 4.0)
    assert interp_curve(xs, ys, 3, True) == pytest.approx(3.5)
    assert interp_curve(xs, ys, 8, True) == pytest.approx(4.0 + 0.5 * 4)  # slope of the last segment: 0.5 per sample
    assert interp_curve(xs, (4.0, 3.0, 1.0), 100, True) == 0.0  # never below zero
    assert interp_curve(xs, ys, 0.5, True) == pytest.approx(0.5)  # below: proportional (compute)
    assert interp_curve(xs, ys, 0.5, False) == pytest.approx(1.0)  # below: constant (overheads)
    assert interp_curve((4,), (2.0,), 8, True) == pytest.approx(4.0)  # one point: proportional


def test_curve_rules_depend_on_the_variant():
    compute = Curve("m", "block", "compute", 1, (2, 4), (2.0, 4.0), (4.0, 8.0))
    overhead = Curve("m", "block", "tp", 1, (2, 4), (2.0, 4.0), (-1.0, 8.0))
    assert compute.at(1)[0] == pytest.approx(1.0) and overhead.at(1)[0] == pytest.approx(2.0)
    np.testing.assert_allclose(compute.at([3, 6])[1], [6.0, 12.0])
    np.testing.assert_allclose(overhead.at([3, 6])[0], [3.0, 4.0])  # overheads: the nearest end outside
    assert overhead.at(2)[1] == 0.0  # a negative measured overhead counts as zero


def test_curves_never_cost_more_for_fewer_samples():
    # a cold first call at 1 sample measured above the 2-sample time takes the 2-sample time; the rest is untouched
    assert monotone((3.0, 2.0, 4.0, 3.5, 8.0)) == (2.0, 2.0, 3.5, 3.5, 8.0)
    compute = Curve("m", "block", "compute", 1, (1, 2, 4), (3.0, 2.0, 4.0), (1.0, 2.0, 4.0))
    assert compute.at(1)[0] == pytest.approx(2.0) and compute.at(1)[1] == pytest.approx(1.0)
    assert compute.at(0.5)[0] == pytest.approx(1.0)  # proportional below the smallest count, from the corrected point
    grouped = Curve("m", "block", "tp" + GROUPED_SUFFIX, 2, (1, 2), (5.0, 4.0), (1.0, 2.0))
    assert grouped.at(1)[0] == pytest.approx(4.0)
    overhead = Curve("m", "block", "tp", 1, (1, 4), (3.0, 2.0), (1.0, 1.0))
    assert overhead.at(1)[0] == pytest.approx(3.0)  # overheads are per call: not made monotone


def test_tables_interpolate_in_bytes_hold_the_latency_floor_and_use_arenas_rule_above():
    sizes, secs = (1024, 2048, 4096), (1.0, 2.0, 6.0)
    assert interp_table(sizes, secs, 3072) == pytest.approx(4.0)
    assert interp_table(sizes, secs, 8) == pytest.approx(1.0)  # below the smallest: its time
    # above the largest S = 4096: k * t(S) + t(rest): 2 * 6 + t(1536) = 12 + 1.5
    assert interp_table(sizes, secs, 2 * 4096 + 1536) == pytest.approx(13.5)
    assert interp_table(sizes, secs, 3 * 4096) == pytest.approx(18.0)
    np.testing.assert_allclose(interp_table(sizes, secs, [1024, 4096]), [1.0, 6.0])


def test_group_size_rule_scales_the_nearest_profiled_group_by_the_ring_volume():
    p = synthetic_profile()
    two = float(p.comm_s("all_reduce", 2**20, 2))
    assert two == pytest.approx(1e-4 + 2**20 / 1e9)
    assert float(p.comm_s("all_reduce", 2**20, 4)) == pytest.approx(two * (3 / 4) / (1 / 2))
    assert float(p.comm_s("all_reduce", 2**20, 2, nodes=2)) == pytest.approx(two)  # nearest node count
    assert float(p.comm_s("all_reduce", 2**20, 1)) == 0.0
    with pytest.raises(ProfileError, match="no gather table"):
        p.comm_s("gather", 10, 2)


def test_lookups_name_what_is_missing():
    p = synthetic_profile()
    with pytest.raises(ProfileError, match="tp=4"):
        p.compute_curve("gpt__tiny", "block", 4)
    assert p.compute_curve("gpt__tiny", "head", 4).tp == 1  # the head is replicated under TP
    with pytest.raises(ProfileError, match="profiled: gpt__tiny"):
        p.model("gpt__mini")
    assert p.data_s("gpt__tiny", 8) == pytest.approx(8e-4)
    assert p.optimizer.step_s(10, 1000, {"tp": 4}) == pytest.approx(10e-5 + 1e-6 + 8e-5)


def test_a_profile_records_the_device_that_ran_it_and_one_measured_on_another_kind_is_refused(tmp_path) -> None:
    profile = synthetic_profile()
    assert profile.device.measured_on == "cpu" and profile.device.to_dict()["measured_on"] == "cpu"
    data = profile.to_dict()
    del data["device"]["measured_on"]  # written before the field existed: read from the backend
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    assert load_profile(path).device.measured_on == "cpu"
    data["device"]["device_type"] = "a100-40gb"  # what a CUDA testbed's profile measured with gloo on the CPU said
    path.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match="describes a100-40gb devices but was measured on cpu") as refused:
        load_profile(path)
    assert len(str(refused.value).splitlines()) == 1 and str(path) in str(refused.value)
