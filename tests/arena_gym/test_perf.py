"""Performance-model specs: the noisy belief wrapper and the measured-table spec."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arena_gym.cluster import PRESETS
from arena_gym.perf import NoisyPerfModel
from arena_gym.registry import make_perf
from arena_gym.restarts import RestartCost, RestartCosts
from arena_gym.types import GpuType, ModelRef, ResourceShape
from tests.helpers import GPT, table_model

BASE = table_model({(GPT, 128, "a40", 1, n): 10.0 / n for n in (1, 2)} | {(GPT, 128, "a10", 1, 2): math.inf})


def shape(t="a40", n=2):
    return ResourceShape(GpuType(t), 1, n)


def test_noisy_belief_is_fixed_per_point_and_seeded():
    a, b = NoisyPerfModel(BASE, 0.2, seed=1), NoisyPerfModel(BASE, 0.2, seed=1)
    assert a.iter_time(GPT, 128, shape()) == b.iter_time(GPT, 128, shape())
    assert a.iter_time(GPT, 128, shape()) != NoisyPerfModel(BASE, 0.2, seed=2).iter_time(GPT, 128, shape())
    assert math.isinf(a.iter_time(GPT, 128, shape("a10")))  # infeasible stays infeasible
    assert NoisyPerfModel(BASE, 0.0).iter_time(GPT, 128, shape()) == pytest.approx(5.0)


def test_noisy_errors_are_lognormal_with_the_given_sigma():
    noisy = NoisyPerfModel(BASE, 0.3, seed=0)
    logs = np.log([noisy._factor(ModelRef("gpt", str(i)), 128, shape()) for i in range(4000)])
    assert abs(logs.mean()) < 0.03 and logs.std() == pytest.approx(0.3, rel=0.06)


def test_noisy_model_keeps_its_bases_measured_restart_costs_off_by_the_start_noise_alone():
    cost = RestartCost(start_s=4.0, held_s=3.0, save_s=0.5, load_s=1.5)

    class Profiled:  # BASE's times, with measured (re)start costs for gpt on a40
        def __getattr__(self, name):
            return getattr(BASE, name)

        def restart_cost(self, model, gpu_type):
            return cost if (model, gpu_type) == (GPT, "a40") else None

    noisy = NoisyPerfModel(Profiled(), 0.2, seed=1)
    assert isinstance(noisy, RestartCosts)
    assert noisy.restart_cost(GPT, "a40") is cost and noisy.restart_cost(GPT, "a10") is None
    assert noisy.iter_time(GPT, 128, shape()) == NoisyPerfModel(BASE, 0.2, seed=1).iter_time(GPT, 128, shape())
    assert NoisyPerfModel(BASE, 0.2).restart_cost(GPT, "a40") is None  # a base without figures: the constants
    starts = NoisyPerfModel(Profiled(), 0.2, seed=1, start_sigma=0.3)
    slow = starts.restart_cost(GPT, "a40")
    assert slow is not None and slow == NoisyPerfModel(Profiled(), 0.0, seed=1, start_sigma=0.3).restart_cost(
        GPT, "a40"
    )
    factor = slow.start_s / cost.start_s
    assert factor != pytest.approx(1.0, abs=1e-3) and slow.held_s == pytest.approx(cost.held_s * factor)
    assert (slow.save_s, slow.load_s) == (cost.save_s, cost.load_s)  # checkpoints keep their figures
    assert starts.iter_time(GPT, 128, shape()) == noisy.iter_time(GPT, 128, shape())  # steps: the same draw
    assert NoisyPerfModel(Profiled(), 0.2, seed=2, start_sigma=0.3).restart_cost(GPT, "a40") != slow
    with pytest.raises(ValueError, match="start noise sigma must be in"):
        NoisyPerfModel(BASE, 0.1, start_sigma=-1.0)


def test_noisy_spec_wraps_the_truth_and_rejects_garbage():
    noisy = make_perf("noisy:0.1", PRESETS["tiny"], seed=3, truth=BASE)
    assert isinstance(noisy, NoisyPerfModel) and noisy.base is BASE and noisy.seed == 3
    with pytest.raises(ValueError, match="noisy:SIGMA needs a number"):
        make_perf("noisy:lots", PRESETS["tiny"], truth=BASE)
    with pytest.raises(ValueError, match="needs a ground-truth model"):
        make_perf("noisy:0.1", PRESETS["tiny"])


def test_measured_spec_with_dp_memory_table(shared_data):
    arena = shared_data / "arena"
    perf = make_perf(f"measured:{arena / 'measured_iter_time.csv'},{arena / 'dp_memory_gb.csv'}", PRESETS["arena-1280"])
    gpt67 = ModelRef("gpt", "6.7B")
    a100x8 = ResourceShape(GpuType("a100"), 2, 4)
    # GPT-6.7B runs with AP on 8 A100s, but is DP-infeasible at every count (docs/arena.md §8.5)
    assert math.isfinite(perf.iter_time(gpt67, 128, a100x8)) and math.isinf(perf.dp_iter_time(gpt67, 128, a100x8))
    plain = make_perf(f"measured:{arena / 'measured_iter_time.csv'}", PRESETS["arena-1280"])
    assert math.isfinite(plain.dp_iter_time(gpt67, 128, a100x8))
