"""The belief over unknown work: conditional sampling, the Gittins index, the arrival model, files."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

from agents.belief import (
    ArrivalModel,
    JobAttributes,
    ReferenceTable,
    WorkBelief,
    WorkGroup,
    default_belief,
    fresh_ids,
    gittins_on_grid,
)
from agents.belief.files import DATA_DIR, belief_to_dict, read_belief, save_belief
from agents.belief.kernels import logsumexp_rows
from arena_gym.harness.belief_fit import fit_real, fit_synthetic, kernel_group
from arena_gym.types import GpuType, JobId, JobSpec, JobStatus, JobView, ModelRef
from traces.synthetic import PHILLY_ITER_LOG_MEAN, PHILLY_ITER_LOG_SIGMA, synthetic

GPT = ModelRef("gpt", "1.3B")
JOB = JobAttributes(GPT, 128, GpuType("a40"), 4)


def toy_belief(groups: tuple[WorkGroup, ...], unit: str = "iterations", reference_s: float = 2.0) -> WorkBelief:
    """A belief over hand-made groups (the last one pooled), with one reference time."""
    refs = ReferenceTable((dataclasses.replace(JOB, reference_s=reference_s),))
    levels = tuple(dict.fromkeys(g.level for g in groups[:-1]))
    arrivals = ArrivalModel(2.0, 7200.0, 10, (JOB,), (1.0,))
    provenance = default_belief("synthetic").provenance
    return WorkBelief("synthetic", unit, levels, 30, groups, refs, arrivals, provenance)


def lognormal(mu: float, sigma: float) -> WorkGroup:
    return WorkGroup("pooled", (), 1, sigma, (mu,), (1.0,))


# ---------------------------------------------------------------------- conditional sampling
REAL = default_belief("real")
SYNTHETIC = default_belief("synthetic")
GROUP_JOBS = [
    JobAttributes(ModelRef.parse(str(g.key[0])), *g.key[1:]) for g in REAL.groups if g.level == "configuration"
]


@settings(max_examples=60, deadline=None)
@given(
    job=st.sampled_from(GROUP_JOBS + list(REAL.arrivals.mix[:40])),
    attained=st.one_of(st.just(0.0), st.floats(0.0, 1e4), st.floats(1e4, 1e12)),
    seed=st.integers(0, 2**32 - 1),
)
def test_sample_total_never_below_attained(job, attained, seed):
    rng = np.random.default_rng(seed)
    for belief in (REAL, SYNTHETIC):
        draws = belief.sample_total(job, attained, rng, 50)
        assert draws.shape == (50,) and draws.dtype == np.int64
        assert (draws > attained).all() and (draws >= math.floor(attained) + 1).all()


def test_sample_total_is_vectorised_over_jobs_and_accepts_views_and_specs():
    spec = JobSpec(JobId("j"), GPT, 128, 5000, 0.0, GpuType("a40"), 4)
    view = JobView(spec, JobStatus.PENDING, None, 0.0, 0.0, 0.0, None, None, 0.0, 0.0, 0, 0)
    a = REAL.sample_total(JOB, 300.0, np.random.default_rng(3), 20)
    assert (REAL.sample_total(spec, 300.0, np.random.default_rng(3), 20) == a).all()
    assert (REAL.sample_total(view, 300.0, np.random.default_rng(3), 20) == a).all()
    many = REAL.sample_total([JOB, spec, view], [0.0, 300.0, 1e6], np.random.default_rng(3), 20)
    assert many.shape == (3, 20) and (many[2] > 1e6).all()
    with pytest.raises(ValueError, match="attained must be finite"):
        REAL.sample_total(JOB, -1.0, np.random.default_rng(0))


def test_samples_follow_a_known_lognormal_and_its_truncation():
    mu, sigma = 9.0, 1.2
    belief = toy_belief((lognormal(mu, sigma),))
    rng = np.random.default_rng(7)
    truth = stats.lognorm(sigma, scale=math.exp(mu))
    assert stats.kstest(belief.sample_total(JOB, 0.0, rng, 4000), truth.cdf).pvalue > 1e-3
    a = math.exp(mu + sigma)  # condition on the top 16 %
    given_a = belief.sample_total(JOB, a, rng, 4000)
    assert stats.kstest(given_a, lambda x: (truth.cdf(x) - truth.cdf(a)) / truth.sf(a)).pvalue > 1e-3


def test_conditional_samples_of_a_mixture_follow_its_survival():
    group = WorkGroup("pooled", (), 3, 0.4, (6.0, 8.0, 11.0), (5.0, 3.0, 1.0))
    belief = toy_belief((group,))
    rng = np.random.default_rng(11)
    for a in (0.0, 2000.0, 3e5):
        la = group.log_survival(np.array([math.log(a)]))[0] if a > 0 else 0.0

        def cdf(x, la=la):
            return 1.0 - np.exp(group.log_survival(np.log(np.atleast_1d(x))) - la)

        assert stats.kstest(belief.sample_total(JOB, a, rng, 3000), cdf).pvalue > 1e-3


@pytest.mark.parametrize("attained", [1e7, 1e9])  # 22 and 31 bandwidths beyond sizes around 150
def test_far_beyond_every_size_it_extrapolates_from_the_tail(attained):
    belief = toy_belief((lognormal(5.0, 0.5),))
    draws = belief.sample_total(JOB, attained, np.random.default_rng(0), 4000)
    assert (draws > attained).all()
    z = (math.log(attained) - 5.0) / 0.5
    assert np.mean(np.log(draws / attained)) == pytest.approx(0.5 / z, rel=0.1)  # the kernel's tail: h / z


def test_a_fit_on_draws_of_a_known_distribution_reproduces_it():
    rng = np.random.default_rng(5)
    mu, sigma = 8.0, 1.0
    group = kernel_group("pooled", (), rng.normal(mu, sigma, 20_000))
    draws = toy_belief((group,)).sample_total(JOB, 0.0, rng, 5000)
    assert stats.kstest(draws, stats.lognorm(sigma, scale=math.exp(mu)).cdf).statistic < 0.03


def test_the_synthetic_belief_matches_the_generator():
    iterations = [j.iterations for j in synthetic(n_jobs=3000, seed=12345).jobs]
    truth = stats.lognorm(PHILLY_ITER_LOG_SIGMA, scale=math.exp(PHILLY_ITER_LOG_MEAN))
    assert stats.kstest(iterations, truth.cdf).pvalue > 1e-3
    draws = SYNTHETIC.sample_total(JOB, 0.0, np.random.default_rng(1), 3000)
    assert stats.ks_2samp(iterations, draws).pvalue > 1e-3


# ---------------------------------------------------------------------- Gittins index
def test_gittins_of_an_exponential_is_its_rate():
    x = np.linspace(0.0, 30.0, 300)
    assert gittins_on_grid(x, -0.5 * x) == pytest.approx(np.full(300, 0.5), rel=1e-9)
    rng = np.random.default_rng(2)
    fitted = toy_belief((kernel_group("pooled", (), np.log(rng.exponential(100.0, 20_000))),))
    index = fitted.gittins_index([JOB] * 7, np.linspace(5.0, 300.0, 7)) * 2.0  # per second at 2 s / iteration
    assert index == pytest.approx(np.full(7, 0.01), rel=0.1)  # memoryless: constant


def test_gittins_of_a_uniform_size_is_srpt_like():
    x = np.linspace(0.0, 1.0 - 1e-6, 500)
    index = gittins_on_grid(x, np.log1p(-x))
    bulk = x < 0.9
    assert index[bulk] == pytest.approx(2.0 / (1.0 - x[bulk]), rel=1e-3)  # 1 / E[S - a | S > a]


def test_gittins_of_a_near_deterministic_size_grows_with_attained():
    belief = toy_belief((lognormal(math.log(1000.0), 0.005),))
    a = np.array([0.0, 100.0, 500.0, 900.0, 950.0])
    per_iteration = belief.gittins_index([JOB] * 5, a) * 2.0
    assert (np.diff(per_iteration) > 0).all()
    assert per_iteration == pytest.approx(1.0 / (1000.0 - a), rel=0.02)  # shortest remaining first


def test_gittins_of_a_heavy_tail_decreases_with_attained():
    alpha, beta = 1.5, 2.0  # Pareto (Lomax): hazard alpha / (beta + x), decreasing
    x = np.concatenate([[0.0], np.geomspace(1e-3, 1e4, 600)])
    index = gittins_on_grid(x, -alpha * np.log1p(x / beta))
    assert index[:-1] == pytest.approx(alpha / (beta + x[:-1]), rel=0.02)
    belief = toy_belief((lognormal(math.log(1000.0), 2.5),))
    per = belief.gittins_index([JOB] * 8, np.geomspace(1000.0, 1e6, 8))
    assert (np.diff(per) < 0).all()  # least attained first


def test_gittins_index_is_per_second_of_service_at_the_reference_time():
    slow = dataclasses.replace(JOB, reference_s=4.0)
    seconds = toy_belief((lognormal(9.0, 1.0),), unit="request_seconds")
    # the same seconds of work attained: the same index per second
    assert seconds.gittins_index(slow, 100.0) == pytest.approx(seconds.gittins_index(JOB, 200.0), rel=1e-12)
    iters = toy_belief((lognormal(9.0, 1.0),), unit="iterations")
    assert iters.gittins_index(slow, 100.0) == pytest.approx(iters.gittins_index(JOB, 100.0) / 2.0, rel=1e-12)
    jobs = list(REAL.arrivals.mix[:30])
    attained = np.linspace(0.0, 5000.0, 30)
    together = REAL.gittins_index(jobs, attained)
    assert together == pytest.approx([REAL.gittins_index(j, a) for j, a in zip(jobs, attained)], rel=1e-12)
    assert (together > 0).all() and np.isfinite(together).all()


def test_reference_times_come_from_the_table_or_the_job():
    assert REAL.reference_time(JOB) > 0
    on_a40 = [r.reference_s for r in REAL.references.entries if r.config[:3] == (GPT, 128, "a40")]
    assert len(on_a40) > 1 and REAL.reference_time(JobAttributes(GPT, 128, GpuType("a40"), None)) == min(on_a40)
    with pytest.raises(ValueError, match="no reference iteration time for mine__1B"):
        REAL.gittins_index(JobAttributes(ModelRef("mine", "1B"), 64, GpuType("a40"), 1), 0.0)
    assert REAL.gittins_index(JobAttributes(ModelRef("mine", "1B"), 64, GpuType("a40"), 1, 3.0), 0.0) > 0


# ---------------------------------------------------------------------- arrivals
def test_rate_estimate_follows_the_observed_arrivals():
    model = SYNTHETIC.arrivals
    assert model.rate(100.0, []) == pytest.approx(model.rate_shape / model.rate_s)
    assert model.rate(100.0, [0.0]) == pytest.approx(model.rate_shape / (model.rate_s + 100.0))
    rng = np.random.default_rng(4)
    for per_s in (1 / 60, 1 / 3600):
        times = np.cumsum(rng.exponential(1 / per_s, 400))
        times -= times[0]
        assert model.rate(float(times[-1]), times) == pytest.approx(per_s, rel=0.15)
    with pytest.raises(ValueError, match="arrival times must be finite and <= now"):
        model.rate(10.0, [0.0, 20.0])


def test_future_jobs_come_from_the_mix_within_the_horizon():
    rng = np.random.default_rng(9)
    seen = [0.0, 600.0, 1200.0, 1800.0]
    counts = []
    mix = set(REAL.arrivals.mix)
    for _ in range(300):
        jobs = REAL.future_jobs(1800.0, seen, 7200.0, rng)
        counts.append(len(jobs))
        assert all(1800.0 < j.submit_time <= 9000.0 for j in jobs)
        assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)
        assert all(JobAttributes.of(j) in mix and j.iterations >= 1 for j in jobs)
    shape, rate = REAL.arrivals.posterior(1800.0, seen)
    assert np.mean(counts) == pytest.approx(shape / rate * 7200.0, rel=0.15)
    assert len(REAL.future_jobs(1800.0, seen, 1e6, rng, max_jobs=3)) <= 3


def test_generated_ids_never_equal_taken_ones():
    taken = {"~sampled-0", "~sampled-2", "7", "syn-1"}
    ids = fresh_ids(5, taken)
    assert len(set(ids)) == 5 and not set(ids) & taken
    jobs = REAL.future_jobs(0.0, [0.0], 1e6, np.random.default_rng(0), taken=taken, max_jobs=20)
    assert jobs and not {j.job_id for j in jobs} & taken


def test_generated_ids_never_equal_a_real_jobs_id(shared_data):
    from envs import ENV_CONFIGS, WorkloadSampler
    from envs.scenario import env_scenario

    config = ENV_CONFIGS["ArenaGym/Testbed64Real-v1"].replace(data_dir=str(shared_data), window_jobs=0)
    scenario = env_scenario(config)
    sampler = WorkloadSampler(config, scenario.cluster, scenario.truth)
    real_ids = {j.job_id for split in ("train", "validation", "test") for w in sampler.fixed(split) for j in w.jobs}
    generated = {j.job_id for j in REAL.future_jobs(0.0, [0.0], 1e9, np.random.default_rng(0), max_jobs=5000)}
    assert len(generated) == 5000 and not generated & real_ids
    assert not set(fresh_ids(100, real_ids)) & real_ids


# ---------------------------------------------------------------------- files
def test_save_load_round_trip(tmp_path):
    for belief in (REAL, SYNTHETIC):
        path = save_belief(belief, tmp_path / f"{belief.kind}.json")
        again = read_belief(path)
        assert again == belief and belief_to_dict(again) == belief_to_dict(belief)
        assert again.gittins_index(JOB, 123.0) == belief.gittins_index(JOB, 123.0)


def test_the_committed_belief_files_are_written_back_byte_for_byte(tmp_path):
    files = sorted(DATA_DIR.glob("*.json"))
    assert [f.name for f in files] == ["belief-real.json", "belief-synthetic.json"]
    for path in files:
        again = save_belief(read_belief(path), tmp_path / path.name)
        assert again.read_bytes() == path.read_bytes(), path


def _corrupt(data, change):
    data = json.loads(json.dumps(data))
    change(data)
    return data


CORRUPTIONS = {
    "format": (lambda d: d.update(format="pickle"), "format must be 'arena-gym-belief'"),
    "version": (lambda d: d.update(version=2), "version must be 1"),
    "missing": (lambda d: d.pop("groups"), "belief: missing field\\(s\\) groups"),
    "unknown key": (lambda d: d.update(extra=1), "belief: unknown field\\(s\\) extra"),
    "unit": (lambda d: d.update(unit="hours"), "unit must be one of"),
    "bandwidth": (lambda d: d["groups"][0].update(bandwidth=-1.0), "bandwidth must be a positive"),
    "centres": (
        lambda d: d["groups"][0].update(centres="x"),
        "groups\\[0\\]: centres must be a tuple of numbers, got 'x'",
    ),
    "weights": (lambda d: d["groups"][0]["weights"].append(1.0), "as many finite centres as positive weights"),
    "no pooled": (lambda d: d["groups"].pop(), "groups must end with the one pooled group"),
    "reference": (lambda d: d["references"][0].pop(), "references\\[0\\]: expected \\[model"),
    "reference time": (lambda d: d["references"][0].__setitem__(4, 0.0), "references\\[0\\]: .*reference_s"),
    "model": (lambda d: d["arrivals"]["mix"][0].__setitem__(0, "gpt"), "arrivals.mix\\[0\\]: model name 'gpt'"),
    "rate": (lambda d: d["arrivals"].update(rate_s="fast"), "arrivals: rate_s must be a number, got 'fast'"),
    "jobs": (lambda d: d["provenance"].update(jobs=1.5), "provenance: jobs must be an integer, got 1.5"),
    "bool jobs": (lambda d: d["provenance"].update(jobs=True), "provenance: jobs must be an integer, got True"),
    "bool version": (lambda d: d.update(version=True), "version must be 1, got True"),
    "text jobs": (lambda d: d["groups"][0].update(jobs="7"), "groups\\[0\\]: jobs must be an integer, got '7'"),
    "text loglik": (lambda d: d["selection"][0].update(loglik="1"), "selection\\[0\\]: loglik must be a number"),
    "provenance key": (lambda d: d["provenance"].update(note=1), "provenance: unknown field\\(s\\) note"),
    "arrivals key": (lambda d: d["arrivals"].update(weights=[1]), "arrivals: unknown field\\(s\\) weights"),
    "group key": (lambda d: d["groups"][-1].update(model="gpt__1.3B"), "unknown field\\(s\\) model"),
    "missing key": (lambda d: d["provenance"].pop("split"), "provenance: missing field\\(s\\) split"),
    "missing group key": (lambda d: d["groups"][0].pop("bandwidth"), "groups\\[0\\]: missing field\\(s\\) bandwidth"),
}


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_malformed_files_raise_one_line_errors(tmp_path, name):
    change, message = CORRUPTIONS[name]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_corrupt(belief_to_dict(SYNTHETIC), change)), encoding="utf-8")
    with pytest.raises(ValueError, match=f"^belief file {re.escape(str(path))}: .*{message}") as info:
        read_belief(path)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"), [("{", "not JSON"), ("[1, 2]", "belief: expected a JSON object"), (None, "cannot read it")]
)
def test_unreadable_files_raise_one_line_errors(tmp_path, text, message):
    path = tmp_path / "bad.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^belief file {re.escape(str(path))}: {message}"):
        read_belief(path)


def test_packaged_files_load_and_record_their_provenance():
    assert REAL.kind == "real" and REAL.unit == "request_seconds"
    p = REAL.provenance
    assert (p.env, p.split, p.cluster, p.perf) == ("ArenaGym/Testbed64Real-v1", "train", "testbed-64", "estimator")
    assert len(p.traces) == 5 and all(t.startswith("data:") for t in p.traces) and p.jobs == sum(REAL.arrivals.weights)
    assert p.code_version and REAL.arrivals.windows > 0
    best = REAL.selection[0]
    assert (best.unit, best.levels, best.se) == (REAL.unit, REAL.levels, 0.0)
    assert best.loglik == max(c.loglik for c in REAL.selection) and len(REAL.selection) == 12
    assert REAL.groups[-1].jobs == p.jobs
    assert sum(g.jobs for g in REAL.groups if g.level == "configuration") <= p.jobs
    s = SYNTHETIC.provenance
    assert (s.env, s.split, SYNTHETIC.unit) == ("ArenaGym/Testbed64-v1", "train", "iterations")
    assert SYNTHETIC.groups[0].centres == (PHILLY_ITER_LOG_MEAN,)
    assert SYNTHETIC.groups[0].bandwidth == PHILLY_ITER_LOG_SIGMA
    for kind in ("real", "synthetic"):
        assert (DATA_DIR / f"belief-{kind}.json").stat().st_size < 300_000
    with pytest.raises(ValueError, match="unknown belief kind 'philly'; valid: real, synthetic"):
        default_belief("philly")


def _without_version(belief: WorkBelief) -> dict:
    data = belief_to_dict(belief)
    data["provenance"].pop("code_version")
    return data


def test_refitting_the_synthetic_belief_reproduces_the_packaged_file():
    assert _without_version(fit_synthetic()) == _without_version(SYNTHETIC)


def test_refitting_on_the_train_split_reproduces_the_packaged_file(shared_data):
    assert _without_version(fit_real(str(shared_data))) == _without_version(REAL)


def test_the_row_logsumexp_is_scipys_to_the_last_bit():
    rng = np.random.default_rng(5)
    for trial in range(300):
        rows, width = (int(n) for n in rng.integers(1, 40, size=2))
        a = rng.normal(size=(rows, width)) * rng.choice([0.1, 1.0, 30.0, 800.0])
        if trial % 3 == 0:
            a[:, : width // 2 + 1] = a[:, :1]  # ties at the maximum
        if trial % 5 == 0:
            a[0] = -np.inf  # an empty row
        if trial % 7 == 0:
            a[-1, 0] = np.inf
        if trial % 11 == 0:
            a[0, -1] = np.nan
        assert np.array_equal(logsumexp_rows(a), special.logsumexp(a, axis=1), equal_nan=True)
