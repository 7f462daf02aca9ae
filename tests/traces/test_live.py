"""The built-in live trace: a dozen small runner jobs over about a minute, seeded, validated, resolvable by name."""

from __future__ import annotations

import pytest

from arena_gym.perf import trace_hooks
from arena_gym.registry import make_perf
from real_runner.testbed import load_testbed
from traces import resolve_trace
from traces.live import MENU, LiveTraceConfig, live_trace


def test_default_trace_has_a_dozen_runner_jobs_over_about_a_minute() -> None:
    trace = resolve_trace("live")
    assert len(trace) == 12 and 45 <= trace.span_s <= 60 and trace.jobs[0].submit_time == 0.0
    assert {j.model.name for j in trace.jobs} == {"gpt__tiny", "gpt__mini"}
    assert len({j.global_batch for j in trace.jobs}) >= 3 and len({j.iterations for j in trace.jobs}) >= 6
    assert {j.requested_gpus for j in trace.jobs} == {1, 2, 4} and {j.requested_gpu_type for j in trace.jobs} == {"cpu"}
    assert trace.source == "live:seed=0"
    assert sorted((j.model.name, j.global_batch, j.iterations, j.requested_gpus) for j in trace.jobs) == sorted(MENU)


def test_seeds_jitter_the_arrivals_and_options_shape_the_jobs() -> None:
    a, b = resolve_trace("live", seed=1), resolve_trace("live:seed=1")
    assert a.jobs == b.jobs and a.jobs != resolve_trace("live").jobs
    assert [j.job_id for j in a.jobs][:2] == ["live-00", "live-01"]
    small = resolve_trace("live:n_jobs=30,span_s=10,work=0.25,max_gpus=2,gpu_type=A100")
    assert len(small) == 30 and max(j.requested_gpus for j in small.jobs) == 2
    assert 20 <= small.span_s <= 30 and {j.requested_gpu_type for j in small.jobs} == {"a100"}
    assert min(j.iterations for j in small.jobs) == 4  # 16 x 0.25


def test_requests_are_halved_until_they_fit_the_testbed() -> None:
    cluster = load_testbed("cpu-2").cluster()
    feasible, _ = trace_hooks(make_perf("estimator", cluster), cluster)
    trace = resolve_trace("live", feasible=feasible)
    assert max(j.requested_gpus for j in trace.jobs) == 2
    with pytest.raises(ValueError, match="live trace: job live-00 .* fits on no cpu device count"):
        live_trace(feasible=lambda *args: False)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("live:n_jobs=0", "n_jobs must be in 1..1000"),
        ("live:work=0", "work must be in"),
        ("live:max_gpus=3", "max_gpus must be a power of two"),
        ("live:span_s=-1", "span_s must be in"),
        ("live:gpu_type=", "gpu_type must be a non-empty"),
        ("live:seed=-2", "seed must be >= 0"),
        ("live:colour=red", "unknown key 'colour'"),
        ("live:n_jobs=two", "bad value 'two' for 'n_jobs'"),
    ],
)
def test_bad_options_fail_with_one_line_naming_them(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        resolve_trace(spec)
    assert "\n" not in str(info.value)


def test_config_round_trips_through_its_spec() -> None:
    cfg = LiveTraceConfig(n_jobs=5, seed=3, work=0.5)
    assert live_trace(cfg).source == "live:n_jobs=5,seed=3,work=0.5"
    assert resolve_trace(live_trace(cfg).source).jobs == live_trace(cfg).jobs
