"""Policy iteration of the residual: the distillation's algebra, a window's labels from the lookahead, config checks,
a seeded run on the real traces."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from agents.residual.priority import RESIDUAL_FEATURES, ResidualWeights
from arena_gym.cluster import load_cluster
from arena_gym.harness import load_jobs
from arena_gym.harness.trainers.policy_iteration import (
    Labels,
    PolicyIteration,
    PolicyIterationConfig,
    SearchTask,
    distil,
    search_window,
)
from arena_gym.registry import make_perf
from envs import EnvConfig, Workload

F = len(RESIDUAL_FEATURES)
TRACE = "synthetic:mix=testbed,n_jobs=14,rate_per_h=40,iter_log_mean=6.5,iter_log_sigma=1.2,iter_min=50,iter_max=20000"


def _labels(rows: int, winner: int, seed: int = 0) -> Labels:
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, (rows, F))
    x[:, 0] = 1.0
    return Labels(x, np.full(rows, winner), 1, int(winner != 0))


def test_distillation_fits_the_winners_and_the_ridge_pulls_to_the_current_weights() -> None:
    rng = np.random.default_rng(1)
    theta, other = 0.05 * rng.standard_normal(2 * F), 0.05 * rng.standard_normal(2 * F)
    proposals = np.stack([theta, other])
    won = _labels(200, winner=1)
    assert distil(theta, proposals, won, ridge=1e-9, clip=3.0) == pytest.approx(other, abs=1e-6)
    assert distil(theta, proposals, won, ridge=1e9, clip=3.0) == pytest.approx(theta, abs=1e-6)
    halfway = distil(theta, proposals, won, ridge=1.0, clip=3.0)
    assert np.linalg.norm(halfway - other) < np.linalg.norm(theta - other)
    kept = _labels(200, winner=0)
    assert distil(theta, proposals, kept, ridge=1e-9, clip=3.0) == pytest.approx(theta, abs=1e-6)
    empty = Labels(np.empty((0, F)), np.empty(0, np.int64), 0, 0)
    assert distil(theta, proposals, empty, ridge=0.1, clip=3.0) is theta
    # the targets are the winner's multipliers as applied: clipped to the bound
    loud = np.full(2 * F, 10.0)
    big = distil(np.zeros(2 * F), np.stack([np.zeros(2 * F), loud]), won, ridge=1e-9, clip=0.5)
    x = won.features
    fitted, *_ = np.linalg.lstsq(x, np.clip(x @ loud.reshape(2, F).T, -0.5, 0.5), rcond=None)
    assert big == pytest.approx(fitted.T.ravel(), abs=1e-5) and np.abs(big).max() < 5.0


def search_task(seed: int = 7) -> SearchTask:
    """A 14-job synthetic window on testbed-64, the zero residual against two that push the order and urgency."""
    cluster = load_cluster("testbed-64")
    jobs = load_jobs(TRACE, cluster, make_perf("estimator", cluster), seed=2)
    workload = Workload("synthetic@seed2", TRACE, "all", 2, 1.0, "factor", 1.0, cluster.name, tuple(jobs))
    base = ResidualWeights()
    push = np.zeros(2 * F)
    push[1], push[F + 4] = 1.5, -1.5  # the order by the index, urgency against waiting
    candidates = (base.with_vector(push), base.with_vector(-push))
    return SearchTask(EnvConfig(cluster="testbed-64"), workload, base, candidates, 2, 1800.0, seed)


def test_a_window_is_labelled_at_every_search_with_the_residuals_features() -> None:
    labels = search_window(search_task())
    assert labels.searches >= 1 and 0 <= labels.changed <= labels.searches
    assert labels.features.shape == (len(labels.winner), F) and len(labels.winner) >= labels.searches
    assert (labels.features[:, 0] == 1.0).all() and set(labels.winner.tolist()) <= {0, 1, 2}
    assert (labels.winner != 0).any() == (labels.changed > 0)
    again = search_window(search_task())
    assert (again.features == labels.features).all() and (again.winner == labels.winner).all()


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("rounds", 0, "rounds must be >= 1"),
        ("pairs", 0, "pairs must be >= 1"),
        ("worlds", 0, "worlds must be >= 1"),
        ("patience", 0, "patience must be >= 1"),
        ("sigma", 0.0, "sigma must be finite and > 0"),
        ("ridge", float("inf"), "ridge must be finite and > 0"),
        ("horizon_s", -1.0, "horizon_s must be finite and > 0"),
        ("clusters", ("nope",), "clusters: unknown cluster 'nope'"),
    ],
)
def test_bad_settings_are_refused(field: str, value, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        PolicyIterationConfig(**{field: value})


def test_a_bad_warm_start_is_refused_before_any_work(tmp_path) -> None:
    (tmp_path / "w.json").write_text("{}")
    with pytest.raises(ValueError, match="not a 'arena-gym residual weights' file"):
        PolicyIteration(PolicyIterationConfig(warm_start=str(tmp_path / "w.json")), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_seeded_round_writes_its_labels_history_and_the_best_network(shared_data, tmp_path) -> None:
    config = PolicyIterationConfig(
        data_dir=str(shared_data),
        traces=("data:arena/traces/testbed.csv?iteration_divisor=1",),
        rounds=1,
        windows=1,
        validation_limit=1,
        worlds=2,
        horizon_s=1800.0,
        workers=1,
        seed=4,
    )
    weights = PolicyIteration(config, tmp_path / "run").run(progress=False)
    history = pd.read_csv(tmp_path / "run" / "history.csv")
    assert history["round"].tolist() == [0, 1] and history["searches"][1] >= 1
    assert history["labelled_rows"][1] >= history["searches"][1]
    best = int(history["validation_geomean_ratio"].idxmin())
    assert weights.trained["round"] == best
    assert weights.vector.tolist() == pytest.approx(json.loads(history["weights"][best]), abs=1e-6)
    assert ResidualWeights.load(tmp_path / "run" / "residual.json").vector.tolist() == weights.vector.tolist()
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "config.json",
        "history.csv",
        "history.png",
        "residual.json",
    ]
