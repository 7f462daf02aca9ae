"""The DP view's memory need: its physical defaults, the fit, and agreement with the artifact's table."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arena_gym.cluster import PRESETS
from arena_gym.types import ModelRef, best_locality
from estimator.dpmemory import (
    GIB,
    REPLICATED_COPIES,
    activation_bytes_per_sample,
    dp_need_gib,
    dp_rule_fits,
    fit_dp_memory,
    validate_dp_memory,
)
from estimator.measured import ARTIFACT_GPU_MEMORY_GB, DpMemoryTable
from estimator.params import DpMemoryParams, EstimatorParams, default_params
from estimator.perfmodel import EstimatorPerfModel
from estimator.zoo import get_model

GPT = get_model("gpt__1.3B")
WRN = get_model("wide_resnet__1B")


def test_default_need_is_states_plus_sharded_optimizer_plus_one_micro_batch():
    params = EstimatorParams()
    n = np.array([1, 2, 4, 8])
    need = dp_need_gib(GPT, 256, n, params)
    wb, _, ob = GPT.state_bytes_per_param
    expected = (
        REPLICATED_COPIES * wb * GPT.param_count
        + ob * GPT.param_count / n
        + activation_bytes_per_sample(GPT) * 256 / 16 / n
    ) / GIB
    assert need == pytest.approx(expected)
    assert np.all(np.diff(need) < 0)  # more replicas, less memory each
    assert dp_need_gib(GPT, 512, 4, params) > dp_need_gib(GPT, 256, 4, params)  # bigger micro-batches


def test_fit_recovers_known_coefficients():
    truth = EstimatorParams(
        dp_memory={"transformer": DpMemoryParams(10.0, 2.5), "wide_resnet": DpMemoryParams(4.0, 2.0)}
    )
    table = {}
    for name, arch in (
        ("gpt__760M", get_model("gpt__760M")),
        ("gpt__1.3B", GPT),
        ("wide_resnet__1B", WRN),
        ("wide_resnet__500M", get_model("wide_resnet__500M")),
    ):
        ref = ModelRef.parse(name)
        for batch in (256, 512):
            for n in (2, 4, 8, 16):
                table[(ref.family, ref.size, batch, n)] = float(dp_need_gib(arch, batch, n, truth))
    table[("gpt", "1.3B", 128, 1)] = math.inf  # out-of-memory rows are ignored
    fitted = fit_dp_memory(table)
    assert set(fitted) == {"transformer", "wide_resnet"}
    assert fitted["transformer"].sharded_bytes == pytest.approx(10.0, rel=1e-6)
    assert fitted["transformer"].act_factor == pytest.approx(2.5, rel=1e-6)
    assert fitted["wide_resnet"].sharded_bytes == pytest.approx(4.0, rel=1e-6)


def test_params_round_trip_and_reject_bad_dp_memory():
    params = EstimatorParams(dp_memory={"moe": DpMemoryParams(3.0, 3.5)})
    back = EstimatorParams.from_dict(params.to_dict())
    assert back.dp_memory == params.dp_memory and back.fingerprint() == params.fingerprint()
    assert params.fingerprint() != EstimatorParams().fingerprint()
    bad = params.to_dict()
    bad["dp_memory"]["moe"]["act_factor"] = 0.0
    with pytest.raises(ValueError, match="dp_memory"):
        EstimatorParams.from_dict(bad)


def _agreement(table: DpMemoryTable, params: EstimatorParams) -> tuple[int, int]:
    """(points where the DP view and the artifact's rule on its own table agree, points) on arena-1280."""
    cluster = PRESETS["arena-1280"]
    perf = EstimatorPerfModel(cluster, params)
    agree = total = 0
    for (family, size, batch, n), measured in table.need_gb.items():
        for group in cluster.groups:
            memory = ARTIFACT_GPU_MEMORY_GB[group.gpu_type]
            artifact = bool(dp_rule_fits(measured, memory))
            shape = best_locality(group.gpu_type, n, group.gpus_per_node)
            agree += artifact == math.isfinite(perf.dp_iter_time(ModelRef(family, size), batch, shape))
            total += 1
    return agree, total


def test_committed_fit_matches_the_artifact_table(shared_data):
    table = DpMemoryTable.load(shared_data / "arena" / "dp_memory_gb.csv")
    committed = default_params()
    # the fit lands on the optimizers of Alpa's benchmark scripts: AdamW with an fp32 master copy
    # for GPT (12 B), Adafactor with a master copy for MoE (4 B), SGD with momentum for WRN (4 B)
    assert 10 < committed.dp_memory["transformer"].sharded_bytes < 14
    assert 2 < committed.dp_memory["moe"].sharded_bytes < 5
    assert 3 < committed.dp_memory["wide_resnet"].sharded_bytes < 6
    fitted, _ = _agreement(table, committed)
    physical, total = _agreement(table, EstimatorParams())
    assert total == 720 and fitted >= 700 and physical < fitted
    check = validate_dp_memory(table.need_gb, committed, ARTIFACT_GPU_MEMORY_GB.values())
    assert check.rows == 90 and check.mape < 8.0 and check.points == 720 and check.agree >= 680


def test_rule_and_validation_on_a_hand_table():
    assert bool(dp_rule_fits(26.6, 40)) and not bool(dp_rule_fits(26.7, 40))  # 26.67 * 1.2 = 0.8 * 40
    params = EstimatorParams()
    exact = float(dp_need_gib(GPT, 256, 4, params))
    table = {("gpt", "1.3B", 256, 4): exact * 1.1, ("gpt", "1.3B", 128, 1): math.inf}
    check = validate_dp_memory(table, params, [40.0, 80.0])
    assert check.rows == 1 and check.mape == pytest.approx(100 / 11) and check.points == 4
