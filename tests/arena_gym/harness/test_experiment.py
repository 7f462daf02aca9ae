"""One run from a RunConfig, as `arena-gym simulate` does it."""

from __future__ import annotations

import pytest

from arena_gym.cluster import load_cluster
from arena_gym.harness.experiment import RunConfig, load_jobs, run
from arena_gym.harness.scoring import Evaluator
from arena_gym.metrics import timeline
from arena_gym.registry import make_perf, make_policy
from envs import EnvConfig, Workload


def test_metrics_span_ends_at_the_last_job():
    # `arena-gym simulate --policy arena --trace synthetic --cluster testbed-64`. When found, the
    # last job finished 9.24e6 s after the first submission while outdated completions of
    # superseded allocations moved the clock on to 2.6e7 s: gpu_util read 0.306 instead of
    # 0.868 and the throughput plot had a long zero tail. Every span must end at the last job.
    result = run(RunConfig(policy="arena", trace="synthetic", cluster="testbed-64"))
    m, record = result.metrics, result.record
    assert m["jobs_finished"] == m["jobs_total"] == 200
    last_finish = max(e.time for e in record.events if e.kind.value == "finish")
    assert record.end_time == last_finish == max(e.time for e in record.events)
    assert m["end_time_s"] == m["makespan_s"] == pytest.approx(last_finish - record.start_time)
    tl = timeline(record)
    assert tl.end == record.end_time and tl.throughput[-1] == 0.0 and tl.throughput[-2] > 0.0
    busy = tl.integral(tl.running_gpus)
    assert m["gpu_util"] == pytest.approx(busy / (m["makespan_s"] * record.cluster.total_gpus))
    assert m["gpu_util"] > 0.75  # Arena keeps this overloaded testbed busy until the queue drains


def test_compare_and_evaluate_score_an_episode_alike():
    """A compare/simulate run and the evaluation protocol run one episode runner: same jobs, same policy, same metrics."""
    config = RunConfig(policy="arena", trace="synthetic:n_jobs=30,rate_per_h=8", cluster="testbed-64", seed=3)
    result = run(config)
    cluster = load_cluster("testbed-64")
    jobs = load_jobs(config.trace, cluster, make_perf("estimator", cluster), config.seed)
    workload = Workload("w", config.trace, "all", 3, 1.0, "factor", 1.0, "testbed-64", jobs)
    row = Evaluator(EnvConfig(cluster="testbed-64"), [workload]).run(make_policy("arena")).iloc[0]
    assert result.metrics["jobs_finished"] == row["jobs_finished"] == 30
    for key in ("avg_jct_s", "p95_jct_s", "makespan_s", "reconfigurations", "preemptions", "gpu_util"):
        assert result.metrics[key] == row[key], key
