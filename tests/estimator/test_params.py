"""estimator.params: the parameter file read through arena_gym.fields."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from estimator.params import EstimatorParams, default_params


def _file() -> dict[str, Any]:
    return default_params().to_dict()


def test_the_committed_file_round_trips() -> None:
    params = default_params()
    back = EstimatorParams.from_dict(_file(), params.source)
    assert back == params and back.fingerprint() == params.fingerprint()


def _broken(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(_file())
    *parents, last = path
    node = data
    for key in parents:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("global",), None, "^estimator parameters f.json: missing field\\(s\\) global$"),
        (("global", "kernel_us"), None, "^estimator parameters f.json: global: missing field\\(s\\) kernel_us$"),
        (("global", "kernel_us"), "x", "^estimator parameters f.json: global: kernel_us must be a number, got 'x'$"),
        (("global", "nu_intr"), 0.1, "^estimator parameters f.json: global: unknown field\\(s\\) nu_intr; valid: "),
        (
            ("kinds", "moe", "eta_compute"),
            None,
            "^estimator parameters f.json: kinds.moe: missing field\\(s\\) eta_compute$",
        ),
        (
            ("kinds", "moe", "tile_rows"),
            True,
            "^estimator parameters f.json: kinds.moe: tile_rows must be a number, got True$",
        ),
        (("gpu_types", "a40", "comm"), None, "^estimator parameters f.json: gpu_types.a40: missing field\\(s\\) comm$"),
        (("dp_memory",), [], "^estimator parameters f.json: dp_memory must be a mapping, got \\[\\]$"),
        (("global", "nu_inter"), 0.0, "^estimator parameters f.json: every efficiency must be positive$"),
    ],
)
def test_a_bad_file_is_refused_in_one_line_naming_the_field(path: tuple[str, ...], value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        EstimatorParams.from_dict(_broken(path, value), "f.json")


def test_optional_fields_take_their_defaults() -> None:
    data = _broken(("global", "memory_fraction"), None)
    del data["kinds"]["moe"]["tile_rows"], data["gpu_types"]["a40"]["compute_fp32"]
    params = EstimatorParams.from_dict(data, "f.json")
    assert params.memory_fraction == 0.8 and params.kinds["moe"].tile_rows == 128.0
    assert params.gpu_types["a40"].compute_fp32 == 1.0
