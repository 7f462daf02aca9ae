"""rliable aggregates of an evaluation table: IQM scores, probability of improvement, performance profiles."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from rliable import metrics

from arena_gym.harness.aggregates import (
    AggregateConfig,
    aggregate,
    bootstrap_samples,
    improvement,
    iqm,
    score_matrices,
)

CONFIG = AggregateConfig(reference="arena", reps=300, seed=7)


def evaluation_table(n_workloads: int = 24, seed: int = 0) -> tuple[pd.DataFrame, dict[str, float]]:
    """A table shaped like ``Evaluator.score``'s: workloads of very different scales, four policies, and bounds."""
    rng = np.random.default_rng(seed)
    rows, bounds = [], {}
    for i in range(n_workloads):
        arena = float(rng.lognormal(9.0, 1.5))
        workload = f"w{i}"
        bounds[workload] = arena * float(rng.uniform(0.5, 0.8))
        values = {
            "arena": arena,
            "twin": arena,  # identical to the reference
            "faster": arena * float(rng.uniform(0.6, 0.9)),  # better on every workload
            "mixed": arena * float(rng.uniform(0.8, 1.25)),
        }
        rows.extend({"workload": workload, "policy": p, "padded_jct_s": v, "avg_jct_s": v} for p, v in values.items())
    return pd.DataFrame(rows), bounds


def by_policy(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.set_index("policy")


def test_identical_policy_scores_one_and_improves_with_probability_one_half() -> None:
    table, _ = evaluation_table()
    result = by_policy(aggregate(table, config=CONFIG).table)
    for policy in ("arena", "twin"):
        assert result.loc[policy, "iqm_score"] == pytest.approx(1.0)
        assert result.loc[policy, "poi"] == pytest.approx(0.5)
        assert result.loc[policy, "poi_lo"] == pytest.approx(0.5) and result.loc[policy, "poi_hi"] == pytest.approx(0.5)


def test_uniformly_better_policy_improves_with_probability_one() -> None:
    table, _ = evaluation_table()
    result = by_policy(aggregate(table, config=CONFIG).table)
    assert result.loc["faster", "poi"] == pytest.approx(1.0)
    assert result.loc["faster", "poi_lo"] == pytest.approx(1.0)
    assert result.loc["faster", "iqm_score"] > 1.1
    # the mixed policy is better on some workloads and worse on others
    assert 0.0 < result.loc["mixed", "poi"] < 1.0


def test_intervals_contain_their_point_estimates() -> None:
    table, bounds = evaluation_table()
    result = aggregate(table, bounds, CONFIG).table
    for name in ("iqm_score", "poi", "iqm_bound_score", "iqm_ratio_to_bound"):
        assert (result[f"{name}_lo"] <= result[name] + 1e-12).all(), name
        assert (result[name] <= result[f"{name}_hi"] + 1e-12).all(), name
    # the mixed policy's IQM has a real interval (the bootstrap resamples workloads)
    mixed = by_policy(result).loc["mixed"]
    assert mixed["iqm_score_lo"] < mixed["iqm_score"] < mixed["iqm_score_hi"]


def test_scores_against_the_bound() -> None:
    table, bounds = evaluation_table()
    result = by_policy(aggregate(table, bounds, CONFIG).table)
    # every policy is above the bound: bound score at most 1, ratio to bound at least 1
    assert (result["iqm_bound_score_hi"] <= 1.0).all()
    assert (result["iqm_ratio_to_bound_lo"] >= 1.0).all()
    assert result.loc["faster", "iqm_ratio_to_bound"] < result.loc["arena", "iqm_ratio_to_bound"]
    arena = table[table["policy"] == "arena"]
    expected = np.mean([row.padded_jct_s / bounds[row.workload] for row in arena.itertuples()])
    assert result.loc["arena", "mean_ratio_to_bound"] == pytest.approx(expected)


def test_score_is_reference_over_policy() -> None:
    table, bounds = evaluation_table(n_workloads=3)
    workloads, scores, bound_scores = score_matrices(table, CONFIG, bounds)
    assert workloads == ["w0", "w1", "w2"]
    jct = table.set_index(["policy", "workload"])["padded_jct_s"]
    for w_index, w in enumerate(workloads):
        assert scores["faster"][0, w_index] == pytest.approx(jct["arena", w] / jct["faster", w])
        assert bound_scores["mixed"][0, w_index] == pytest.approx(bounds[w] / jct["mixed", w])
    assert scores["arena"].shape == (1, 3)


def test_seeded_and_leaves_the_global_generator_alone(tmp_path) -> None:
    table, bounds = evaluation_table()
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    first = aggregate(table, bounds, CONFIG, tmp_path / "a" / "profiles.png")
    assert np.array_equal(np.random.get_state()[1], before)
    second = aggregate(table, bounds, CONFIG, tmp_path / "b" / "profiles.png")
    pd.testing.assert_frame_equal(first.table, second.table)
    assert first.plot is not None and first.plot.stat().st_size > 10_000
    assert first.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert first.plot.read_bytes() == second.plot.read_bytes()  # same seed, same figure
    other = aggregate(table, bounds, AggregateConfig(reference="arena", reps=300, seed=8)).table
    assert not np.allclose(other["iqm_score_lo"], first.table["iqm_score_lo"])


def test_several_runs_per_workload_are_runs_of_one_task() -> None:
    table, _ = evaluation_table(n_workloads=6)
    noisy = table[table["policy"] == "mixed"].copy()
    noisy["padded_jct_s"] *= 1.05
    result = by_policy(aggregate(pd.concat([table, noisy]), config=CONFIG).table)
    assert result.loc["mixed", "runs"] == 2 and result.loc["arena", "runs"] == 1


def test_bad_tables_are_refused() -> None:
    table, bounds = evaluation_table(n_workloads=4)
    with pytest.raises(ValueError, match="reference policy 'srtf'"):
        aggregate(table, config=AggregateConfig(reference="srtf"))
    with pytest.raises(ValueError, match="no 'padded_jct_s' column"):
        aggregate(table.drop(columns="padded_jct_s"), config=CONFIG)
    with pytest.raises(ValueError, match="same number of rows"):
        aggregate(table[~((table["policy"] == "mixed") & (table["workload"] == "w1"))], config=CONFIG)
    with pytest.raises(ValueError, match="no bound for 1 workload"):
        aggregate(table, {w: b for w, b in bounds.items() if w != "w2"}, CONFIG)
    with pytest.raises(ValueError, match="reps"):
        AggregateConfig(reps=1)


def test_vectorised_statistics_are_rliables() -> None:
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 4, size=(3, 10)).astype(float), rng.integers(0, 4, size=(2, 10)).astype(float)
    assert iqm(x[None])[0] == pytest.approx(metrics.aggregate_iqm(x))
    # equal run counts: the pair layout of aggregate()
    pair = np.stack([x[:2], y], axis=-1)
    assert improvement(pair[None])[0] == pytest.approx(metrics.probability_of_improvement(x[:2], y))


def test_stratified_bootstrap_resamples_tasks_and_runs() -> None:
    scores = np.arange(12, dtype=float).reshape(3, 4)  # 3 runs x 4 tasks, every value distinct
    samples = bootstrap_samples(scores, 500, np.random.default_rng(0))
    assert samples.shape == (500, 3, 4)
    # a value drawn for a task column always comes from one task's runs, and every task and run is drawn
    task_of = {v: int(v) % 4 for v in scores.ravel()}
    for rep in samples[:50]:
        for column in rep.T:
            assert len({task_of[v] for v in column}) == 1
    assert set(np.unique(samples)) == set(scores.ravel())
    pairs = bootstrap_samples(np.stack([scores, -scores], axis=-1), 50, np.random.default_rng(0))
    # the two members of a pair stay on the same task
    assert all(task_of[a] == task_of[-b] for a, b in pairs.reshape(-1, 2))
