"""One run from a RunConfig, as `arena-gym simulate` does it."""

from __future__ import annotations

import pytest

from arena_gym.harness.experiment import RunConfig, run
from arena_gym.metrics import timeline


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
