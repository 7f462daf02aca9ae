"""ITP/ElasticFlow loader: real files, seeded sampling with the Arena recipe, iterations, bad inputs."""

from __future__ import annotations

import re
from collections import Counter

import pandas as pd
import pytest

from arena_gym.types import GPU_COUNTS
from traces.itp import load_itp_csv
from traces.recipe import family_sizes, nominal_iter_time

HEADER = "job_id,submission_time,duration,num_gpu\n"


def test_cluster10_real_file(shared_data):
    path = shared_data / "itp/cluster10.csv"
    trace = load_itp_csv(path, seed=0)
    raw = pd.read_csv(path)
    assert len(trace) == 260
    assert trace.time_offset_s == raw.submission_time.min()
    by_id = {j.job_id: j for j in trace}
    for row in raw.head(20).itertuples():
        assert by_id[row.job_id].submit_time == row.submission_time - trace.time_offset_s
    for job in trace:
        assert job.model.size in family_sizes()[job.model.family]
        assert job.requested_gpus in GPU_COUNTS
        assert job.requested_gpu_type in {"a100", "v100", "a40", "a10"}
        assert job.iterations >= 1 and job.deadline is not None and job.deadline > job.submit_time


def test_cluster08_real_file_and_philly_subset(shared_data):
    trace = load_itp_csv(shared_data / "itp/cluster08.csv", seed=1)
    assert len(trace) == 13047
    assert max(j.requested_gpus for j in trace) <= 16  # the file's 32-GPU jobs are re-sampled
    philly = pd.read_csv(shared_data / "arena/traces/philly.csv")
    submit = {j.job_id: j.submit_time + trace.time_offset_s for j in trace}
    assert all(submit[r.job_id] == r.submission_time for r in philly.itertuples())
    kept = load_itp_csv(shared_data / "itp/cluster08.csv", skip_before_s=1_945_572)
    assert len(kept) == 5816 and kept.time_offset_s >= 1_945_572 and kept.jobs[0].submit_time == 0


def test_seeded_determinism(shared_data):
    path = shared_data / "itp/cluster10.csv"
    a, b = load_itp_csv(path, seed=7), load_itp_csv(path, seed=7)
    assert a == b
    c = load_itp_csv(path, seed=8)
    assert [j.job_id for j in a] == [j.job_id for j in c]
    assert [(j.model, j.requested_gpus, j.requested_gpu_type) for j in a] != [
        (j.model, j.requested_gpus, j.requested_gpu_type) for j in c
    ]


def test_row_order_does_not_matter(write_csv):
    rows = [f"j{i},{1000 + 37 * i},{3600 + i},1\n" for i in range(40)]
    a = load_itp_csv(write_csv(HEADER + "".join(rows), "a.csv"), seed=3)
    b = load_itp_csv(write_csv(HEADER + "".join(reversed(rows)), "b.csv"), seed=3)
    assert a.jobs == b.jobs


def _rows(n: int, duration: int = 36_000) -> str:
    return HEADER + "".join(f"j{i:03d},{10 * i},{duration},{2 ** (i % 6)}\n" for i in range(n))


def test_feasible_and_iter_time_callables(write_csv):
    path = write_csv(_rows(200))
    only_a40_small = lambda m, b, t, n: t == "a40" and n <= 4  # noqa: E731
    trace = load_itp_csv(path, feasible=only_a40_small, iter_time=lambda m, b, t, n: 10.0)
    assert {j.requested_gpu_type for j in trace} == {"a40"}
    assert max(j.requested_gpus for j in trace) <= 4
    assert {j.iterations for j in trace} == {3600}
    assert all(j.deadline == pytest.approx(j.submit_time + 1.5 * 36_000) for j in trace)


def test_nominal_iter_time_and_clamp(write_csv):
    path = write_csv(_rows(50, duration=600))
    trace = load_itp_csv(path, seed=2, deadline_factor=None)
    for job in trace:
        it = nominal_iter_time(job.model, job.global_batch, job.requested_gpu_type, job.requested_gpus)
        assert job.iterations == max(1, int(600 // it))
        assert job.deadline is None
    clamped = load_itp_csv(path, seed=2, iter_min=200, iter_max=300)
    assert all(200 <= j.iterations <= 300 for j in clamped)


def test_redraw_out_of_range_like_the_artifact(write_csv):
    path = write_csv(_rows(100, duration=10))  # every job far too short
    trace = load_itp_csv(path, seed=4, iter_min=1000, iter_max=5000, out_of_range="redraw")
    iters = [j.iterations for j in trace]
    assert all(1000 <= n <= 5000 for n in iters) and len(set(iters)) > 50
    with pytest.raises(ValueError, match="needs iter_max"):
        load_itp_csv(path, out_of_range="redraw")


def test_gpu_type_and_count_limits(write_csv):
    trace = load_itp_csv(write_csv(_rows(300)), gpu_types=("a40", "a10"), max_gpus=4)
    assert {j.requested_gpu_type for j in trace} == {"a40", "a10"}
    assert Counter(j.requested_gpus for j in trace).keys() <= {1, 2, 4}


def test_never_feasible_names_file_and_row(write_csv):
    path = write_csv(_rows(3))
    with pytest.raises(ValueError) as info:
        load_itp_csv(path, feasible=lambda m, b, t, n: False, max_tries=5)
    assert re.fullmatch(
        re.escape(str(path)) + r":2: no feasible \(model, batch, GPU type, GPU count\) exists in the mix; .*",
        str(info.value),
    )


def test_rarely_feasible_runs_out_of_tries(write_csv):
    path = write_csv(_rows(3))
    with pytest.raises(ValueError, match=r":2: no feasible .* drawn in 1 tries"):
        load_itp_csv(path, feasible=lambda m, b, t, n: (t, n) == ("a10", 16) and m.family == "moe", max_tries=1)


def test_an_impossible_mix_fails_at_once_whatever_max_tries(write_csv):
    # every draw infeasible: one pass over the mix decides it, not max_tries x jobs draws
    with pytest.raises(ValueError, match="exists in the mix"):
        load_itp_csv(write_csv(_rows(300)), feasible=lambda m, b, t, n: False, max_tries=100_000)


def test_infinite_iter_time_is_an_error(write_csv):
    path = write_csv(_rows(2))
    with pytest.raises(ValueError, match=r":2: iter_time is inf for "):
        load_itp_csv(path, iter_time=lambda m, b, t, n: float("inf"))


BAD_CASES = {
    "missing column": (
        "job_id,submission_time,num_gpu\nj,1,1\n",
        r"^{f}: missing column\(s\) duration \(the itp format needs .*\)$",
    ),
    "negative time": (HEADER + "a,1,60,1\nb,-3,60,1\n", r"^{f}:3: negative time in column 'submission_time': -3$"),
    "zero duration": (HEADER + "a,1,0,1\n", r"^{f}:2: column 'duration': 0 is not > 0$"),
    "garbage duration": (HEADER + "a,1,1h,1\n", r"^{f}:2: column 'duration': '1h' is not a finite duration$"),
    "garbage count": (HEADER + "a,1,60,two\n", r"^{f}:2: column 'num_gpu': 'two' is not a finite integer$"),
    "duplicate id": (HEADER + "a,1,60,1\na,2,60,1\n", r"^{f}:3: duplicate job id 'a' \(first on line 2\)$"),
    "empty id": (HEADER + "a,1,60,1\n,2,60,1\n", r"^{f}:3: column 'job_id' is empty$"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_inputs_fail_with_one_line(case, fails_with):
    fails_with(load_itp_csv, *BAD_CASES[case])


def test_bad_settings(write_csv):
    path = write_csv(_rows(2))
    with pytest.raises(ValueError, match="unknown mix 'nope'; valid: philly, testbed"):
        load_itp_csv(path, mix="nope")
    with pytest.raises(ValueError, match="iter_min"):
        load_itp_csv(path, iter_min=10, iter_max=5)
    with pytest.raises(ValueError, match="no jobs submitted at or after"):
        load_itp_csv(path, skip_before_s=1e9)


def test_a_job_shorter_than_one_iteration_gets_iter_min(write_csv):
    # duration 1 s < one 2 s iteration: floor gives 0; without iter_max it must still be clamped up
    trace = load_itp_csv(
        write_csv("job_id,submission_time,duration,num_gpu\na,0,1,1\n"), iter_time=lambda m, b, t, n: 2.0
    )
    assert trace.jobs[0].iterations == 1
