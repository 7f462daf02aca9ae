"""Where deadlines come from: every loader records ``JobSpec.deadline_source``, the canonical CSV
keeps it, transforms keep it, and ``Trace.deadline_sources`` summarises it."""

from __future__ import annotations

import dataclasses

import pytest

from arena_gym.types import DeadlineSource, GpuType, JobId, JobSpec, ModelRef
from traces import Trace, load_trace, resolve_trace, save_trace, synthetic
from traces.formats import CANONICAL_COLUMNS

DECLARED, DERIVED = DeadlineSource.DECLARED, DeadlineSource.DERIVED
CANON = ",".join(CANONICAL_COLUMNS)
ARENA = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"
ITP = "job_id,submission_time,duration,num_gpu\n"


def sources(trace: Trace) -> dict[str, tuple[float | None, DeadlineSource]]:
    return {j.job_id: (j.deadline, j.deadline_source) for j in trace}


def job(job_id: str, t: float, deadline: float | None, source: DeadlineSource = DECLARED) -> JobSpec:
    return JobSpec(JobId(job_id), ModelRef("gpt", "1.3B"), 128, 50, t, GpuType("a40"), 2, deadline, source)


# -- loaders -------------------------------------------------------------------------------


def test_itp_deadlines_are_derived(write_csv):
    path = write_csv(ITP + "a,100,3600,1\nb,160,7200,2\n")
    trace = load_trace(path, iter_time=lambda m, b, t, n: 2.0)
    assert sources(trace) == {"a": (5400.0, DERIVED), "b": (60 + 10800.0, DERIVED)}
    assert trace.deadline_sources == "derived"
    bare = load_trace(path, deadline_factor=None)
    assert sources(bare) == {"a": (None, DECLARED), "b": (None, DECLARED)}
    assert bare.deadline_sources == "none"


def test_synthetic_deadlines_are_derived():
    trace = synthetic(n_jobs=20, seed=4, deadline_factor=1.5)
    assert {j.deadline_source for j in trace} == {DERIVED} and all(j.deadline is not None for j in trace)
    assert trace.deadline_sources == "derived"
    plain = synthetic(n_jobs=20, seed=4)
    assert {(j.deadline, j.deadline_source) for j in plain} == {(None, DECLARED)}
    assert plain.deadline_sources == "none"


def test_arena_csv_deadlines_are_derived_even_loosened(write_csv):
    path = write_csv(ARENA + "a,100,10,moe__1.3B,400,256,4,a40\nb,50,10,gpt__1.3B,,128,1,a10\n")
    plain = load_trace(path)
    assert sources(plain) == {"a": (350.0, DERIVED), "b": (None, DECLARED)}
    loose = load_trace(path, deadline_scale=5.0)
    assert sources(loose) == {"a": (50 + 5 * 300.0, DERIVED), "b": (None, DECLARED)}
    assert plain.deadline_sources == loose.deadline_sources == "derived"


def test_canonical_without_the_column_is_declared(write_csv):
    path = write_csv(CANON + "\na,0,gpt__1.3B,128,10,a40,2,500\nb,10,gpt__1.3B,128,10,a40,2,\n")
    trace = load_trace(path)
    assert sources(trace) == {"a": (500.0, DECLARED), "b": (None, DECLARED)}
    assert trace.deadline_sources == "declared"


def test_canonical_column_sets_each_source(write_csv):
    path = write_csv(
        CANON + ",deadline_source\n"
        "a,0,gpt__1.3B,128,10,a40,2,500,derived\n"
        "b,10,gpt__1.3B,128,10,a40,2,900,declared\n"
        "c,20,gpt__1.3B,128,10,a40,2,,\n"
        "d,30,gpt__1.3B,128,10,a40,2,90,DERIVED\n"
    )
    trace = load_trace(path)
    assert sources(trace) == {
        "a": (500.0, DERIVED),
        "b": (900.0, DECLARED),
        "c": (None, DECLARED),
        "d": (90.0, DERIVED),
    }
    assert trace.deadline_sources == "mixed"


BAD_SOURCES = {
    "unknown value": (
        "a,0,gpt__1.3B,128,10,a40,2,500,declared\nb,1,gpt__1.3B,128,10,a40,2,500,guessed\n",
        r"^{f}:3: column 'deadline_source': 'guessed' is not a deadline source \(valid: declared, derived\)$",
    ),
    "empty beside a deadline": (
        "a,0,gpt__1.3B,128,10,a40,2,500,\n",
        r"^{f}:2: column 'deadline_source' is empty but the job has a deadline \(valid: declared, derived\)$",
    ),
    "value without a deadline": (
        "a,0,gpt__1.3B,128,10,a40,2,,derived\n",
        r"^{f}:2: column 'deadline_source': 'derived' given for a job without a deadline \(leave it empty\)$",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_SOURCES))
def test_bad_deadline_source_fails_with_one_line(case, fails_with):
    rows, pattern = BAD_SOURCES[case]
    fails_with(load_trace, CANON + ",deadline_source\n" + rows, pattern)


def test_a_bad_deadline_is_reported_before_its_source(fails_with):
    fails_with(
        load_trace,
        CANON + ",deadline_source\na,0,gpt__1.3B,128,10,a40,2,soon,derived\n",
        r"^{f}:2: column 'deadline_s': 'soon' is not a finite time$",
    )


def test_shipped_traces(shared_data):
    for rel in ("arena/traces/philly.csv", "arena/traces/pai.csv", "arena/traces/testbed.csv"):
        trace = load_trace(shared_data / rel)
        assert {j.deadline_source for j in trace} == {DERIVED}, rel
        assert trace.summary()["deadline_sources"] == "derived"
        assert trace.summary()["with_deadline"] == len(trace)
    itp = load_trace(shared_data / "itp/cluster10.csv", seed=2)
    assert {j.deadline_source for j in itp} == {DERIVED} and len(itp) == 260
    assert itp.deadline_sources == "derived"


# -- canonical round trip and transforms ---------------------------------------------------


def test_canonical_round_trip_keeps_sources(tmp_path, write_csv):
    itp = load_trace(write_csv(ITP + "a,100,3600,1\nb,160,7200,2\nc,400,60,1\n"), seed=1)
    mixed = Trace.from_jobs(
        "mixed", [job("x", 0, 100, DERIVED), job("y", 5, 50), job("z", 9, None), job("w", 12, 20, DERIVED)], "test"
    )
    for trace in (itp, mixed):
        path = save_trace(trace, tmp_path / f"{trace.name}.csv")
        lines = path.read_text().splitlines()
        assert lines[0] == CANON + ",deadline_source"
        again = load_trace(path)
        assert again.jobs == trace.jobs
        assert again.deadline_sources == trace.deadline_sources
    assert [line.rsplit(",", 1)[1] for line in lines[1:]] == ["derived", "declared", "", "derived"]


def test_transforms_keep_sources():
    trace = Trace.from_jobs(
        "t", [job("a", 10, 200, DERIVED), job("b", 20, 90), job("c", 40, None), job("d", 70, 300, DERIVED)], "test"
    )
    expected = {"a": DERIVED, "b": DECLARED, "c": DECLARED, "d": DERIVED}
    for sub in (
        trace.scale_load(2.0),
        trace.shift_to_zero(),
        trace.window(15, 80).shift_to_zero(),
        trace.head(3),
        dataclasses.replace(trace, name="renamed"),
    ):
        assert {j.job_id: j.deadline_source for j in sub} == {k: expected[k] for k in (j.job_id for j in sub)}
    assert trace.window(15, 30).deadline_sources == "declared"
    assert trace.window(60, 80).deadline_sources == "derived"
    assert trace.window(30, 50).deadline_sources == "none"
    assert trace.deadline_sources == "mixed" and trace.head(0).deadline_sources == "none"


def test_spec_transforms_keep_sources(write_csv):
    path = write_csv(ITP + "".join(f"j{i},{100 * i},3600,1\n" for i in range(10)))
    trace = resolve_trace(f"{path}?seed=3,start_s=200,end_s=800,head=4,load=2")
    assert len(trace) == 4 and {j.deadline_source for j in trace} == {DERIVED}
    assert trace.summary()["deadline_sources"] == "derived"
    assert resolve_trace("synthetic:n_jobs=12,deadline_factor=2,head=5,load=3").deadline_sources == "derived"
