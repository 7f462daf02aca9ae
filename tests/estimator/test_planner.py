"""The planner: pruning against exhaustive search, partitions, quota vectors."""

from __future__ import annotations

import numpy as np
import pytest

from arena_gym.types import ModelRef, ResourceShape
from estimator.costmodel import rates_for
from estimator.hardware import get_gpu, node_links
from estimator.params import default_params
from estimator.perfmodel import EstimatorPerfModel
from estimator.planner import PlannerConfig, all_partitions, exhaustive_best, pipeline_units, quota_vectors
from estimator.zoo import get_model


def test_partitions_and_quotas():
    parts = all_partitions(6, 3)
    assert len(parts) == 10 and (parts[:, 0] == 0).all() and (parts[:, -1] == 6).all()
    assert (np.diff(parts, axis=1) >= 1).all()
    q = quota_vectors(8, 3)
    assert {tuple(x) for x in q} == {(4, 2, 2), (2, 4, 2), (2, 2, 4)}
    assert len(all_partitions(3, 5)) == 0


def test_units_coarsen_long_models():
    units = pipeline_units(get_model("gpt__15B"), 16)
    assert len(units) == 17 and units[0] == 0 and units[-1] == 50 and (np.diff(units) >= 1).all()
    assert len(pipeline_units(get_model("moe__690M"), 16)) == 11  # 10 layers stay as they are


@pytest.mark.parametrize(
    "model,batch,shape",
    [
        ("gpt__760M", 128, ResourceShape("a40", 2, 2)),
        ("wide_resnet__500M", 256, ResourceShape("v100", 1, 4)),
        ("moe__1.3B", 512, ResourceShape("a100", 1, 4)),
    ],
)
def test_exhaustive_search_is_never_worse_and_pruning_stays_close(model, batch, shape):
    arch, gpu = get_model(model), get_gpu(shape.gpu_type)
    rates = rates_for(arch, gpu, node_links(gpu), default_params())
    cfg = PlannerConfig()
    best_t, best_plan = exhaustive_best(arch, batch, gpu, rates, shape, cfg)
    proxy = EstimatorPerfModel().iter_time(ModelRef.parse(model), batch, shape)
    assert best_plan is not None and best_t <= proxy * (1 + 1e-9)
    assert proxy <= best_t * 1.5
