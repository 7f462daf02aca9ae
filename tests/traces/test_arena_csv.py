"""Arena-artifact CSV loader: the real traces, aliases, rebasing, the divisor, bad inputs."""

from __future__ import annotations

from collections import Counter

import pytest

from arena_gym.types import ModelRef
from traces.arena_csv import load_arena_csv

HEADER = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"


def test_philly_counts_and_mix(shared_data):
    trace = load_arena_csv(shared_data / "arena/traces/philly.csv")
    assert len(trace) == 1938
    assert trace.name == "philly"
    assert Counter(j.model.family for j in trace) == {"moe": 1231, "gpt": 450, "wide_resnet": 257}
    assert Counter(j.requested_gpus for j in trace) == {4: 717, 8: 644, 2: 286, 16: 191, 1: 100}
    assert Counter(j.requested_gpu_type for j in trace) == {"a40": 784, "a10": 473, "a100": 352, "v100": 329}
    assert sum(j.requested_gpus for j in trace.head(986)) == 5816  # docs/arena.md 8.3
    assert trace.span_s / 3600 == pytest.approx(476.3, abs=0.1)


def test_philly_rebased_and_divided(shared_data):
    trace = load_arena_csv(shared_data / "arena/traces/philly.csv")
    first = trace.jobs[0]
    # file row: f043f272-...,1945645,119965,gpt__2.6B,1956739,256,4,a40
    assert first.job_id == "f043f272-f7a0-6861-353c-30479e8fffc1"
    assert trace.time_offset_s == 1945645
    assert first.submit_time == 0.0
    assert first.deadline == 1956739 - 1945645
    assert first.iterations == 23993  # ceil(119965 / 5)
    assert first.model == ModelRef("gpt", "2.6B") and first.global_batch == 256
    assert first.requested_gpus == 4 and first.requested_gpu_type == "a40"
    raw = load_arena_csv(shared_data / "arena/traces/philly.csv", iteration_divisor=1)
    assert raw.jobs[0].iterations == 119965
    assert sorted(j.iterations for j in raw)[len(raw) // 2] == pytest.approx(61_800, rel=0.01)


def test_pai_sorted_with_float_deadlines(shared_data):
    trace = load_arena_csv(shared_data / "arena/traces/pai.csv")
    assert len(trace) == 125
    times = [j.submit_time for j in trace]
    assert times == sorted(times) and times[0] == 0.0  # the file itself is not sorted
    assert trace.span_s / 3600 == pytest.approx(27.2, abs=0.1)
    first = trace.jobs[0]
    assert first.job_id == "f91030b64f9fa92dcc0f5506"
    assert first.deadline == pytest.approx(1798867.565 - 1750472)
    assert all(j.deadline is not None and j.deadline > j.submit_time for j in trace)


def test_testbed_types_and_runtime_iterations(shared_data):
    trace = load_arena_csv(shared_data / "arena/traces/testbed.csv", iteration_divisor=1)
    assert len(trace) == 244
    assert {j.requested_gpu_type for j in trace} == {"a40", "a10"}
    assert max(j.iterations for j in trace) == 500  # the runtime's cap
    assert trace.span_s / 3600 == pytest.approx(5.7, abs=0.1)


def test_bert_alias_and_rounding_up(write_csv):
    path = write_csv(HEADER + "a,100,7,bert__1.3B,500,128,2,A40\nb,50,3,BERT__760M,,128,1,v100\n")
    trace = load_arena_csv(path)
    assert [j.job_id for j in trace] == ["b", "a"]
    b, a = trace.jobs
    assert a.model == ModelRef("gpt", "1.3B") and b.model == ModelRef("gpt", "760M")
    assert (b.iterations, a.iterations) == (1, 2)  # ceil(3/5), ceil(7/5)
    assert a.submit_time == 50 and a.deadline == 450 and b.deadline is None
    assert a.requested_gpu_type == "a40"
    assert trace.time_offset_s == 50


GOOD = "j1,10,50,moe__1.3B,100,256,4,a40\n"
BAD_CASES = {
    "missing column": (
        "job_id,submission_time,num_iteration,deadline,batch_size,num_gpu,gpu_type\nj,1,5,9,256,4,a40\n",
        r"^{f}: missing column\(s\) model_name \(the arena format needs job_id, submission_time, .*\)$",
    ),
    "negative time": (
        HEADER + GOOD + "j2,-5,50,moe__1.3B,,256,4,a40\n",
        r"^{f}:3: negative time in column 'submission_time': -5$",
    ),
    "unknown family": (
        HEADER + GOOD + "j2,5,50,llama__7B,,256,4,a40\n",
        r"^{f}:3: column 'model_name': unknown model family 'llama' in 'llama__7B' "
        r"\(valid: gpt, moe, wide_resnet; aliases .*bert->gpt.*\)$",
    ),
    "not family__size": (
        HEADER + "j2,5,50,gpt,,256,4,a40\n",
        r"^{f}:2: column 'model_name': model name 'gpt' is not of the form family__size",
    ),
    "non-power-of-two GPUs": (
        HEADER + GOOD + GOOD.replace("j1", "j2").replace(",4,", ",3,"),
        r"^{f}:3: column 'num_gpu': GPU count 3 is not a power of two$",
    ),
    "duplicate id": (HEADER + GOOD + GOOD, r"^{f}:3: duplicate job id 'j1' \(first on line 2\)$"),
    "garbage number": (
        HEADER + GOOD + "j2,5,lots,moe__1.3B,,256,4,a40\n",
        r"^{f}:3: column 'num_iteration': 'lots' is not a finite integer$",
    ),
    "fractional batch": (
        HEADER + "j2,5,50,moe__1.3B,,25.5,4,a40\n",
        r"^{f}:2: column 'batch_size': '25.5' is not an integer$",
    ),
    "zero batch": (HEADER + "j2,5,50,moe__1.3B,,0,4,a40\n", r"^{f}:2: column 'batch_size': 0 is below 1$"),
    "zero iterations": (HEADER + "j2,5,0,moe__1.3B,,256,4,a40\n", r"^{f}:2: column 'num_iteration': 0 is below 1$"),
    "infinite time": (
        HEADER + "j2,inf,50,moe__1.3B,,256,4,a40\n",
        r"^{f}:2: column 'submission_time': 'inf' is not a finite time$",
    ),
    "empty gpu type": (HEADER + "j2,5,50,moe__1.3B,,256,4,\n", r"^{f}:2: column 'gpu_type' is empty$"),
    "deadline before submit": (
        HEADER + "j2,50,50,moe__1.3B,40,256,4,a40\n",
        r"^{f}:2: column 'deadline': deadline 40 is before the submission time 50$",
    ),
    "extra field": (HEADER + GOOD + "j2,5,50,moe__1.3B,,256,4,a40,extra\n", r"^{f}:3: expected 8 fields, saw 9$"),
    "empty file": ("", r"^{f}: empty file \(no header row\)$"),
    "header only": (HEADER, r"^{f}: no job rows \(header only\)$"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_inputs_fail_with_one_line(case, fails_with):
    fails_with(load_arena_csv, *BAD_CASES[case])


def test_earliest_problem_reported_and_blank_lines_keep_numbering(write_csv):
    text = HEADER + GOOD + "\n" + "j2,5,50,moe__1.3B,,256,3,a40\n" + "j3,-1,50,moe__1.3B,,256,4,a40\n"
    path = write_csv(text)
    with pytest.raises(ValueError, match=r":4: column 'num_gpu'"):
        load_arena_csv(path)


def test_bad_divisor(write_csv):
    with pytest.raises(ValueError, match="iteration_divisor must be >= 1"):
        load_arena_csv(write_csv(HEADER + GOOD), iteration_divisor=0)


def test_deadline_scale_loosens_deadlines_like_the_artifact(shared_data):
    from traces import load_trace

    path = shared_data / "arena" / "traces" / "pai.csv"
    plain = load_trace(path)
    loose = load_trace(path, deadline_scale=5.0)
    for a, b in zip(plain.jobs[:20], loose.jobs[:20]):
        assert b.deadline - b.submit_time == pytest.approx(5.0 * (a.deadline - a.submit_time))
    with pytest.raises(ValueError, match="deadline_scale must be > 0"):
        load_trace(path, deadline_scale=0.0)
