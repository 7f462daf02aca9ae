"""Synthetic generator: determinism, the recipe's mixes, arrival processes, limits, bad settings."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from traces import SyntheticConfig, synthetic
from traces.recipe import MIXES, family_batches, family_sizes, nominal_iter_time
from traces.synthetic import PHILLY_ITER_LOG_MEAN, PHILLY_ITER_LOG_SIGMA

ANY = lambda m, b, t, n: True  # noqa: E731  (the recipe's raw weights, no rejection)
N = 4000


@pytest.fixture(scope="module")
def big():
    return synthetic(n_jobs=N, rate_per_h=10, seed=11, feasible=ANY)


def shares(values) -> dict:
    counts = Counter(values)
    return {k: v / sum(counts.values()) for k, v in counts.items()}


def test_same_seed_same_trace_different_seed_different():
    a, b = synthetic(n_jobs=300, seed=5), synthetic(n_jobs=300, seed=5)
    assert a == b
    c = synthetic(n_jobs=300, seed=6)
    assert [j.submit_time for j in a] != [j.submit_time for j in c]
    assert [j.model for j in a] != [j.model for j in c]
    bursty = synthetic(n_jobs=300, seed=5, arrival="bursty")
    assert [j.model for j in bursty] == [j.model for j in a]  # independent streams per aspect


def test_default_is_valid_and_starts_at_zero():
    trace = synthetic()
    assert len(trace) == SyntheticConfig().n_jobs
    assert trace.jobs[0].submit_time == 0 and trace.time_offset_s == 0
    assert trace.source == "synthetic:seed=0"
    assert all(j.deadline is None for j in trace)


def test_family_size_batch_type_mix_match_the_recipe(big):
    mix = MIXES["philly"]
    fam_w = dict(mix.family_weights)
    for fam, share in shares(j.model.family for j in big).items():
        assert share == pytest.approx(fam_w[fam] / sum(fam_w.values()), abs=0.03)
    size_idx = shares(family_sizes()[j.model.family].index(j.model.size) for j in big)
    for i, w in enumerate(mix.size_weights):
        assert size_idx[i] == pytest.approx(w / sum(mix.size_weights), abs=0.03)
    batch_idx = shares(family_batches()[j.model.family].index(j.global_batch) for j in big)
    for i, w in enumerate(mix.batch_weights):
        assert batch_idx[i] == pytest.approx(w / sum(mix.batch_weights), abs=0.03)
    type_w = dict(mix.gpu_type_weights)
    for gtype, share in shares(j.requested_gpu_type for j in big).items():
        assert share == pytest.approx(type_w[gtype] / sum(type_w.values()), abs=0.03)


def test_gpu_count_capped_by_size_index(big):
    mix = MIXES["philly"]
    cdf = np.cumsum(mix.count_weights)
    p_size = np.array(mix.size_weights) / sum(mix.size_weights)
    expected = np.zeros(5)
    for s, ps in enumerate(p_size):
        cap = min(4, s + 2)
        expected[: cap + 1] += ps * np.array(mix.count_weights[: cap + 1]) / cdf[cap]
    got = shares(j.requested_gpus for j in big)
    for i, n in enumerate((1, 2, 4, 8, 16)):
        assert got.get(n, 0) == pytest.approx(expected[i], abs=0.03)
    for j in big:
        assert j.requested_gpus <= 2 ** (family_sizes()[j.model.family].index(j.model.size) + 2)


def test_iterations_follow_the_philly_fit(big):
    logs = np.log([j.iterations for j in big])
    assert np.median(logs) == pytest.approx(PHILLY_ITER_LOG_MEAN, abs=0.1)
    assert np.subtract(*np.quantile(logs, [0.75, 0.25])) / 1.349 == pytest.approx(PHILLY_ITER_LOG_SIGMA, abs=0.15)
    cfg = SyntheticConfig()
    assert min(j.iterations for j in big) >= cfg.iter_min and max(j.iterations for j in big) <= cfg.iter_max


def test_fitted_numbers_match_the_philly_file(shared_data):
    philly = pd.read_csv(shared_data / "arena/traces/philly.csv")
    logs = np.log(np.ceil(philly.num_iteration / 5))
    assert logs.mean() == pytest.approx(PHILLY_ITER_LOG_MEAN, abs=1e-3)
    assert logs.std(ddof=1) == pytest.approx(PHILLY_ITER_LOG_SIGMA, abs=1e-3)


def test_poisson_and_bursty_arrivals(big):
    gaps = np.diff([j.submit_time for j in big])
    assert 3600 / gaps.mean() == pytest.approx(10, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.1)
    bursty = synthetic(n_jobs=N, rate_per_h=10, seed=11, arrival="bursty", feasible=ANY)
    bgaps = np.diff([j.submit_time for j in bursty])
    assert 3600 / bgaps.mean() == pytest.approx(10, rel=0.25)
    assert bgaps.std() / bgaps.mean() > 1.8


def test_cluster_limits_and_default_feasibility():
    trace = synthetic(n_jobs=500, seed=2, gpu_types=("A40", "a10"), max_gpus=4)
    assert {j.requested_gpu_type for j in trace} == {"a40", "a10"}
    assert {j.requested_gpus for j in trace} <= {1, 2, 4}
    # the built-in rule keeps sizes without artifact data (e.g. gpt 15B) out
    assert all(j.model.size not in ("15B", "39B", "27B", "70B", "13B") for j in synthetic(n_jobs=500, seed=3))
    with pytest.raises(ValueError, match="no feasible"):
        synthetic(n_jobs=5, gpu_types=("a10",), max_gpus=1, feasible=lambda m, b, t, n: n >= 2, max_tries=20)


def test_unknown_gpu_types_get_the_mean_weight():
    trace = synthetic(n_jobs=2000, seed=4, gpu_types=("h100", "a40"), feasible=ANY)
    got = shares(j.requested_gpu_type for j in trace)
    assert got["h100"] == pytest.approx(22.5 / 52.5, abs=0.04)


def test_testbed_mix_and_deadlines():
    trace = synthetic(n_jobs=300, seed=1, mix="testbed", deadline_factor=1.5)
    assert {j.requested_gpu_type for j in trace} <= {"a40", "a10"}
    for j in trace:
        it = nominal_iter_time(j.model, j.global_batch, j.requested_gpu_type, j.requested_gpus)
        assert j.deadline == pytest.approx(j.submit_time + 1.5 * j.iterations * it)


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"n_jobs": 0}, r"n_jobs must be in 1\.\.1000000, got 0"),
        ({"n_jobs": 10_000_000}, r"n_jobs must be in 1\.\.1000000, got 10000000"),
        ({"arrival": "uniform"}, "arrival must be one of poisson, bursty"),
        ({"rate_per_h": -1.0}, r"rate_per_h must be in 1e-06\.\.1e\+09"),
        ({"rate_per_h": math.nan}, r"rate_per_h must be in"),
        ({"iter_max": 10**20}, r"iter_max <= 9007199254740991"),
        ({"max_tries": 10**9}, r"max_tries must be in 1\.\.100000"),
        ({"arrival": "bursty", "mean_burst_s": 1e-9}, "calm/burst cycles"),
        ({"arrival": "bursty", "mean_burst_s": math.inf}, "mean_burst_s > 0 \\(finite\\)"),
        ({"mix": "helios"}, "mix must be one of philly, testbed"),
        ({"arrival": "bursty", "burst_factor": 20.0}, "burst_factor x burst_fraction must be < 1"),
        ({"iter_min": 10, "iter_max": 5}, "need 1 <= iter_min <= iter_max"),
        ({"max_gpus": 0}, "max_gpus must be >= 1"),
        ({"gpu_types": ()}, "gpu_types must name at least one type"),
    ],
)
def test_bad_settings(overrides, message):
    with pytest.raises(ValueError, match=message):
        synthetic(**overrides)


def test_unknown_setting_lists_valid_keys():
    with pytest.raises(ValueError, match=r"unknown synthetic setting\(s\) jobs; valid: n_jobs, arrival, "):
        synthetic(jobs=3)


def test_config_is_frozen():
    cfg = SyntheticConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.n_jobs = 3  # type: ignore[misc]


def test_nominal_iteration_times_take_the_catalogue_figures_and_refuse_an_unknown_type():
    from traces.table import parse_model

    model = parse_model("gpt__760M")
    a40 = nominal_iter_time(model, 16, "a40", 1)
    assert nominal_iter_time(model, 16, "a100", 2) == pytest.approx(a40 / (2.4 * 1.75))
    assert nominal_iter_time(model, 16, "v100-16gb", 1) == pytest.approx(a40 / 1.23)  # every V100 alike
    with pytest.raises(ValueError, match="unknown GPU type 'nope'"):
        nominal_iter_time(model, 16, "nope", 1)
