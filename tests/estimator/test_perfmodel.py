"""The PerfModel: protocol, consistency of lookups, plans and the DP view, the disk cache."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from arena_gym.protocols import PerfModel
from arena_gym.types import ClusterSpec, GpuType, Grid, ModelRef, NodeGroup, ResourceShape
from estimator import default_perf_model
from estimator.dpmemory import dp_need_gib, dp_rule_fits
from estimator.perfmodel import EstimatorPerfModel

CLUSTER = ClusterSpec("t", (NodeGroup(GpuType("a100"), 4, 4), NodeGroup(GpuType("a40"), 8, 2)))
GPT = ModelRef("gpt", "1.3B")
WRN = ModelRef("wide_resnet", "1B")


@pytest.fixture(scope="module")
def perf() -> EstimatorPerfModel:
    return default_perf_model(CLUSTER)


def test_is_a_perf_model(perf):
    assert isinstance(perf, PerfModel) and perf.name == "estimator"


def test_iter_time_is_the_best_grid_and_its_plan_reproduces_it(perf):
    shape = ResourceShape("a100", 2, 4)
    grids = [perf.grid_iter_time(GPT, 256, Grid(shape, s)) for s in (1, 2, 4, 8)]
    best = perf.iter_time(GPT, 256, shape)
    assert best == min(grids) and math.isfinite(best) and best > 0
    plan = perf.proxy_plan(GPT, 256, shape)
    assert plan is not None and plan.num_gpus == 8
    assert perf.estimate(GPT, 256, shape, plan).total_s == pytest.approx(best, rel=1e-9)


def test_grid_plan_and_pareto_set(perf):
    grid = Grid(ResourceShape("a40", 2, 2), 2)
    plans = perf.plan_grid(WRN, 256, grid)
    assert plans.best is not None and plans.best.total_s == pytest.approx(perf.grid_iter_time(WRN, 256, grid))
    times = [p.total_s for p in plans.pareto]
    mems = [p.memory_per_gpu_gb for p in plans.pareto]
    assert times == sorted(times) and all(b < a + 1e-9 for a, b in zip(mems, mems[1:]))
    assert perf.grid_plan(WRN, 256, grid) is not None


def test_more_gpus_speed_up_and_types_rank_by_speed(perf):
    t1 = perf.iter_time(GPT, 256, ResourceShape("a100", 1, 2))
    t4 = perf.iter_time(GPT, 256, ResourceShape("a100", 1, 4))
    assert t4 < t1 / 1.5
    assert perf.iter_time(GPT, 256, ResourceShape("a40", 1, 2)) > t1  # an A40 is slower than an A100


def test_infeasible_is_inf_and_has_no_plan(perf):
    huge = ModelRef("gpt", "39B")
    shape = ResourceShape("a40", 1, 2)
    assert perf.iter_time(huge, 512, shape) == math.inf
    assert perf.proxy_plan(huge, 512, shape) is None
    assert perf.dp_iter_time(huge, 512, shape) == math.inf


def test_dp_view_applies_the_artifact_rule(perf):
    shape = ResourceShape("a100", 1, 4)
    est = perf.dp_estimate(GPT, 256, shape)
    need = dp_need_gib(perf.arch(GPT), 256, 4, perf.params)
    need_ok = bool(dp_rule_fits(need, 40))
    assert math.isfinite(perf.dp_iter_time(GPT, 256, shape)) == need_ok == est.feasible
    assert est.plan.n_stages == 1 and est.plan.stages[0].dp == 4
    if need_ok:
        assert perf.dp_iter_time(GPT, 256, shape) == pytest.approx(est.total_s)
    # a DP-infeasible model that AP can still run: the mismatch Arena exploits
    big = ModelRef("gpt", "6.7B")
    shape8 = ResourceShape("a100", 2, 4)
    assert perf.dp_iter_time(big, 256, shape8) == math.inf and math.isfinite(perf.iter_time(big, 256, shape8))
    assert "DP memory rule" in perf.dp_estimate(big, 256, shape8).reason
    # the table's DP column and the single-shape estimate apply the same rule
    for n_nodes, per_node in ((1, 1), (1, 2), (1, 4), (2, 4), (4, 4)):
        s = ResourceShape("a100", n_nodes, per_node)
        assert math.isfinite(perf.dp_iter_time(GPT, 512, s)) == perf.dp_estimate(GPT, 512, s).feasible


def test_shapes_outside_the_cluster_and_any_batch(perf):
    wide = ResourceShape("a40", 1, 8)  # nodes of this cluster have 2 A40s
    assert math.isfinite(perf.iter_time(GPT, 128, wide))
    assert math.isfinite(perf.iter_time(GPT, 100, ResourceShape("a100", 1, 4)))
    assert math.isfinite(perf.iter_time(GPT, 1, ResourceShape("a100", 1, 1)))
    assert math.isfinite(perf.iter_time(GPT, 256, ResourceShape("h100", 1, 8)))  # a type outside the cluster


def test_bad_inputs_fail_with_one_line(perf):
    with pytest.raises(ValueError) as err:
        perf.iter_time(ModelRef("gpt", "7T"), 128, ResourceShape("a100", 1, 1))
    assert "gpt__7T" in str(err.value) and "gpt__1.3B" in str(err.value)
    with pytest.raises(ValueError, match="unknown GPU type 'b300'.*a100-40gb"):
        perf.iter_time(GPT, 128, ResourceShape("b300", 1, 1))
    with pytest.raises(ValueError, match="unknown GPU type"):
        EstimatorPerfModel(ClusterSpec("bad", (NodeGroup(GpuType("b300"), 1, 8),)))


def test_disk_cache_round_trip(tmp_path):
    first = EstimatorPerfModel(CLUSTER, cache_dir=tmp_path)
    first.prebuild([(GPT, 128), (WRN, 256)])
    files = sorted(tmp_path.glob("*.npy"))
    assert len(files) == 4
    second = EstimatorPerfModel(CLUSTER, cache_dir=tmp_path)
    table_a, table_b = first.table(GPT, 128, "a40"), second.table(GPT, 128, "a40")
    assert np.array_equal(table_a.time, table_b.time) and np.array_equal(table_a.dp, table_b.dp)
    shape = ResourceShape("a40", 2, 2)
    assert second.proxy_plan(GPT, 128, shape) == first.proxy_plan(GPT, 128, shape)
    files[0].write_bytes(b"not an array")  # a corrupt cache file is rebuilt, not trusted
    third = EstimatorPerfModel(CLUSTER, cache_dir=tmp_path)
    third.prebuild([(GPT, 128), (WRN, 256)])
    assert third.iter_time(GPT, 128, shape) == first.iter_time(GPT, 128, shape)


def test_cache_packing_is_exact_for_every_field(perf):
    from estimator.table import TableRequest, pack, unpack

    table = perf.table(GPT, 128, "a100")
    req = perf._request(GPT, 128, "a100")
    back = unpack(pack(table), req, perf.config.stage_counts)
    arrays = [f.name for f in dataclasses.fields(table) if f.init and isinstance(getattr(table, f.name), np.ndarray)]
    assert len(arrays) == 13
    for name in arrays:
        want, got = getattr(table, name), getattr(back, name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    assert isinstance(req, TableRequest) and back.best == table.best and back.best_stage == table.best_stage


def test_cache_file_that_does_not_fit_its_request_is_rebuilt(tmp_path):
    first = EstimatorPerfModel(CLUSTER, cache_dir=tmp_path)
    want = first.table(GPT, 128, "a40").time
    (path,) = tmp_path.glob("*.npy")
    np.save(path, np.zeros((2, 3, 4)))  # a well-formed array of the wrong shape
    second = EstimatorPerfModel(CLUSTER, cache_dir=tmp_path)
    assert np.array_equal(second.table(GPT, 128, "a40").time, want)
    assert np.load(path).shape[0] == len(want)  # rewritten with the real table


_FILL_CACHE = """
import sys
from arena_gym.types import ClusterSpec, GpuType, ModelRef, NodeGroup
from estimator.perfmodel import EstimatorPerfModel
cluster = ClusterSpec("t", (NodeGroup(GpuType("a100"), 4, 4), NodeGroup(GpuType("a40"), 8, 2)))
perf = EstimatorPerfModel(cluster, cache_dir=sys.argv[1])
perf.prebuild([(ModelRef("gpt", "1.3B"), b) for b in (64, 128, 256)])
"""


def test_concurrent_runs_share_one_cache(tmp_path):
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-c", _FILL_CACHE, str(tmp_path)]) for _ in range(3)]
    try:
        assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    finally:
        for p in procs:
            p.kill()
    assert len(list(tmp_path.glob("*.npy"))) == 6 and not list(tmp_path.glob(".*"))  # no partial files left
    cached = EstimatorPerfModel(CLUSTER, cache_dir=tmp_path)
    fresh = EstimatorPerfModel(CLUSTER)
    for batch in (64, 128, 256):
        assert np.array_equal(cached.table(GPT, batch, "a100").time, fresh.table(GPT, batch, "a100").time)


def test_prebuild_matches_lazy_build():
    lazy = default_perf_model(CLUSTER)
    bulk = default_perf_model(CLUSTER)
    assert bulk.prebuild([(GPT, 256), (WRN, 512), (ModelRef("moe", "2.4B"), 512)]) == 6
    for model, batch in ((GPT, 256), (WRN, 512), (ModelRef("moe", "2.4B"), 512)):
        for t in ("a100", "a40"):
            assert np.array_equal(lazy.table(model, batch, t).time, bulk.table(model, batch, t).time)


def test_works_without_a_cluster():
    perf = default_perf_model()
    assert math.isfinite(perf.iter_time(GPT, 128, ResourceShape("v100", 1, 8)))
