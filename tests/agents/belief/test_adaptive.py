"""The episode's work scale: inferred from finished jobs (exact) and running ones (censored), and used by the samples."""

from __future__ import annotations

import numpy as np
import pytest

from agents.belief import default_belief
from agents.belief.adaptive import EpisodeScale, Likelihoods, Observation
from agents.belief.arrivals import JobAttributes
from arena_gym.types import GpuType, ModelRef

JOB = JobAttributes(ModelRef("gpt", "1.3B"), 128, None, None, reference_s=1.0)


@pytest.fixture(scope="module")
def belief():
    return default_belief("synthetic")  # one log-normal of iterations


@pytest.mark.parametrize("log_theta", [-2.0, 0.0, 1.5])
def test_finished_jobs_reveal_the_scale(belief, log_theta: float) -> None:
    rng = np.random.default_rng(0)
    totals = belief.sample_total([JOB] * 30, np.zeros(30), rng, log_scale=log_theta)[:, 0]
    seen = {f"j{i}": Observation(JOB, float(t), True) for i, t in enumerate(totals)}
    scale = EpisodeScale(belief)
    weights = scale.posterior(seen)
    mean = float(np.dot(weights, scale.grid))
    assert abs(mean - log_theta) < 0.6 and weights.sum() == pytest.approx(1.0)


def test_running_jobs_only_push_the_scale_up_and_nothing_seen_is_the_prior(belief) -> None:
    scale = EpisodeScale(belief)
    prior = scale.posterior({})
    assert float(np.dot(prior, scale.grid)) == pytest.approx(0.0, abs=1e-9)
    median = float(np.median(belief.sample_total(JOB, 0.0, np.random.default_rng(1), n=200)))
    seen = {f"r{i}": Observation(JOB, 5 * median, False) for i in range(5)}  # still running far past the median
    assert float(np.dot(scale.posterior(seen), scale.grid)) > 0.5


def test_scaled_samples_never_fall_below_the_attained(belief) -> None:
    rng = np.random.default_rng(2)
    for log_theta in (-3.0, 0.0, 3.0):
        draws = belief.sample_total([JOB] * 4, [0.0, 10.0, 1e4, 1e7], rng, n=50, log_scale=log_theta)
        assert (draws > np.array([0.0, 10.0, 1e4, 1e7])[:, None]).all()
    base = np.median(belief.sample_total(JOB, 0.0, np.random.default_rng(3), n=400))
    scaled = np.median(belief.sample_total(JOB, 0.0, np.random.default_rng(3), n=400, log_scale=1.0))
    assert scaled / base == pytest.approx(np.e, rel=0.05)


def test_bad_settings_are_refused(belief) -> None:
    with pytest.raises(ValueError, match="prior_sd must be > 0"):
        EpisodeScale(belief, prior_sd=0.0)
    with pytest.raises(ValueError, match="at least two points"):
        EpisodeScale(belief, grid=(0.0,))


def test_a_memo_of_likelihood_rows_gives_the_posterior_to_the_last_bit() -> None:
    belief = default_belief("real")  # 118 groups: the rows are summed group by group
    kinds = [
        JobAttributes(ModelRef("gpt", "1.3B"), 128, GpuType("a10"), 4, reference_s=0.8),
        JobAttributes(ModelRef("gpt", "6.7B"), 256, None, None, reference_s=2.0),
        JobAttributes(ModelRef("moe", "2.4B"), 64, None, None, reference_s=1.1),
        JOB,
    ]
    rng = np.random.default_rng(4)
    scale, memo, seen = EpisodeScale(belief), Likelihoods(), {}
    for step in range(40):
        seen[f"j{step}"] = Observation(kinds[step % len(kinds)], 0.0, False)  # arrives with no work
        for job, o in list(seen.items()):
            if not o.finished:  # runs on, and sometimes finishes
                seen[job] = Observation(o.attributes, o.work + float(rng.integers(0, 500)), rng.random() < 0.1)
        kept = {j: r[2] for j, r in memo.rows.items() if r[0].finished}
        assert np.array_equal(scale.posterior(seen, memo), scale.posterior(seen))
        assert all(memo.rows[j][2] is row for j, row in kept.items())  # a finished job's row is computed once
    assert any(r[0].finished for r in memo.rows.values())
    twin, other = memo.fork(), EpisodeScale(belief, grid=tuple(np.linspace(-3.0, 3.0, 25)))
    assert np.array_equal(other.posterior(seen, twin), other.posterior(seen))  # another grid starts afresh
    assert memo.grid == scale.grid and twin.grid == other.grid and len(memo.rows) == len(twin.rows)


def test_a_memo_told_only_of_changes_beyond_a_running_jobs_work_gives_the_posterior_to_the_last_bit() -> None:
    belief = default_belief("real")
    kinds = [JobAttributes(ModelRef("gpt", "1.3B"), 128, GpuType("a10"), 4, reference_s=0.8), JOB]
    rng = np.random.default_rng(5)
    scale, memo, seen = EpisodeScale(belief), Likelihoods(), {}
    for step in range(40):
        changed = {f"j{step}"}
        seen[f"j{step}"] = Observation(kinds[step % len(kinds)], 0.0, False)
        for job, o in list(seen.items()):
            if not o.finished:  # runs on (or waits), and sometimes finishes
                new = Observation(o.attributes, o.work + float(rng.integers(0, 3) * 200), rng.random() < 0.1)
                if new.finished or not (new.work > 0 and o.work > 0):  # what EpisodeLog.observe names
                    changed.add(job)
                seen[job] = new
        assert np.array_equal(scale.posterior(seen, memo, changed), scale.posterior(seen))
    assert any(o.finished for o in seen.values()) and any(o.work > 0 and not o.finished for o in seen.values())


def test_a_memo_asked_about_other_jobs_gives_their_posterior_to_the_last_bit() -> None:
    belief = default_belief("real")
    a = JobAttributes(ModelRef("gpt", "1.3B"), 128, GpuType("a10"), 4, reference_s=0.8)
    scale, memo = EpisodeScale(belief), Likelihoods()
    first = {"A": Observation(a, 900.0, True), "R": Observation(a, 100.0, False)}
    second = {"B": Observation(a, 4000.0, True), "R": Observation(a, 300.0, False), "W": Observation(a, 0.0, False)}
    for seen in (first, second, first, {"A": first["A"]}, second):  # jobs leave and come back
        assert np.array_equal(scale.posterior(seen, memo), scale.posterior(seen))
    twin = memo.fork()
    assert np.array_equal(scale.posterior(first, twin), scale.posterior(first))
    assert not np.array_equal(scale.posterior(first), scale.posterior(second))


@pytest.mark.parametrize("kind", ["real", "synthetic"])
def test_the_slot_readers_give_what_the_attribute_readers_give(kind: str) -> None:
    belief = default_belief(kind)  # request_seconds and iterations: the index's reference time differs
    jobs = [
        JobAttributes(ModelRef("gpt", "1.3B"), 128, GpuType("a10"), 4, reference_s=0.8),
        JobAttributes(ModelRef("moe", "2.4B"), 64, None, None, reference_s=1.1),
        JOB,
        JOB,
    ]
    work, finished, grid = [0.0, 3e4, 7.5, 120.0], [False, True, False, True], np.asarray(EpisodeScale(belief).grid)
    groups, scales = belief.slots(jobs)
    references = np.array([belief.reference_time(a) for a in jobs])
    expected_groups, rows = belief.scale_likelihood_rows(jobs, work, finished, grid)
    assert np.array_equal(groups, expected_groups)
    assert np.array_equal(belief.scale_likelihood_rows_at(groups, scales, work, finished, grid), rows)
    assert np.array_equal(belief.gittins_index_at(groups, scales, references, work), belief.gittins_index(jobs, work))
    with pytest.raises(ValueError, match="attained must be finite and >= 0"):
        belief.gittins_index_at(groups, scales, references, [0.0, -1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="work must be finite and >= 0"):
        belief.scale_likelihood_rows_at(groups, scales, [0.0, np.nan, 0.0, 0.0], finished, grid)
