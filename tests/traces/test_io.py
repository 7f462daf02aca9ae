"""load_trace (format detection), save_trace (canonical, atomic), resolve_trace (specs)."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

import traces
from traces import SyntheticConfig, Trace, load_trace, resolve_trace, save_trace, synthetic
from traces.formats import CANONICAL_COLUMNS, DEADLINE_SOURCE_COLUMN, FORMATS, resolve
from traces.io import Transforms

CANON = ",".join(CANONICAL_COLUMNS) + "\n"
REAL = {
    "arena/traces/philly.csv": ("arena", 1938),
    "arena/traces/pai.csv": ("arena", 125),
    "arena/traces/testbed.csv": ("arena", 244),
    "itp/cluster10.csv": ("itp", 260),
    "itp/cluster08.csv": ("itp", 13047),
}


def test_public_api():
    assert set(traces.__all__) == {"Trace", "SyntheticConfig", "synthetic", "load_trace", "save_trace", "resolve_trace"}


def test_registry_loaders_resolve():
    for fmt in FORMATS.values():
        assert callable(resolve(fmt.loader))


@pytest.mark.parametrize("rel", sorted(REAL))
def test_load_trace_detects_every_real_file(rel, shared_data):
    fmt, count = REAL[rel]
    trace = load_trace(shared_data / rel)
    assert len(trace) == count
    assert trace.source.startswith(f"{fmt}-csv:")
    assert trace.jobs[0].submit_time == 0.0


def test_load_trace_passes_options(shared_data):
    trace = load_trace(shared_data / "arena/traces/testbed.csv", iteration_divisor=1)
    assert max(j.iterations for j in trace) == 500
    with pytest.raises(
        ValueError,
        match=r"unknown option\(s\) mix for the arena format; valid: iteration_divisor, deadline_scale, name",
    ):
        load_trace(shared_data / "arena/traces/testbed.csv", mix="philly")
    with pytest.raises(ValueError, match="unknown trace format 'json'; valid: canonical, arena, itp"):
        load_trace(shared_data / "arena/traces/testbed.csv", format="json")


def test_canonical_round_trip(tmp_path, shared_data):
    for trace in (
        synthetic(n_jobs=150, seed=3, arrival="bursty", deadline_factor=2.0),
        load_trace(shared_data / "arena/traces/pai.csv").window(3600, 20 * 3600).shift_to_zero(),
    ):
        path = save_trace(trace, tmp_path / "sub" / f"{trace.name}.csv")
        assert path.read_text().splitlines()[0] == ",".join((*CANONICAL_COLUMNS, DEADLINE_SOURCE_COLUMN))
        again = load_trace(path)
        assert again.jobs == trace.jobs and again.deadline_sources == "derived"
        assert again.source == f"canonical:{path}"


def test_canonical_optional_cells_and_rebase(write_csv):
    path = write_csv(CANON + "x,30,gpt__1.3B,128,10,,,\ny,130.5,bert__760M,256,20,A10,4,200.25\n")
    trace = load_trace(path)
    x, y = trace.jobs
    assert (x.requested_gpu_type, x.requested_gpus, x.deadline) == (None, None, None)
    assert (y.model.family, y.requested_gpu_type, y.requested_gpus) == ("gpt", "a10", 4)
    assert (y.submit_time, y.deadline, trace.time_offset_s) == (100.5, 170.25, 30)


def test_save_never_clobbers_on_error(tmp_path, monkeypatch):
    target = tmp_path / "keep.csv"
    target.write_text("precious\n")
    trace = synthetic(n_jobs=20)

    class Boom:
        def __init__(self, *args, **kwargs):
            self.rows = 0

        def writerow(self, row):
            self.rows += 1
            if self.rows > 3:
                raise OSError("disk full")

    monkeypatch.setattr(csv, "writer", Boom)
    with pytest.raises(OSError, match="disk full"):
        save_trace(trace, target)
    assert target.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.csv"]


BAD_CANONICAL = {
    "missing column": (
        ",".join(CANONICAL_COLUMNS[:-1]) + "\nx,1,gpt__1.3B,128,10,a40,4\n",
        r"^{f}: missing column\(s\) deadline_s \(the canonical format needs .*\)$",
    ),
    "negative time": (
        CANON + "x,-1,gpt__1.3B,128,10,a40,4,\n",
        r"^{f}:2: negative time in column 'submit_time_s': -1$",
    ),
    "unknown family": (
        CANON + "x,1,resnet__50,128,10,a40,4,\n",
        r"^{f}:2: column 'model': unknown model family 'resnet' ",
    ),
    "non-power-of-two": (
        CANON + "x,1,gpt__1.3B,128,10,a40,6,\n",
        r"^{f}:2: column 'num_gpus': GPU count 6 is not a power of two$",
    ),
    "duplicate id": (
        CANON + "x,1,gpt__1.3B,128,10,a40,4,\nx,2,gpt__1.3B,128,10,a40,4,\n",
        r"^{f}:3: duplicate job id 'x' \(first on line 2\)$",
    ),
    "garbage": (
        CANON + "x,soon,gpt__1.3B,128,10,a40,4,\n",
        r"^{f}:2: column 'submit_time_s': 'soon' is not a finite time$",
    ),
    "time beyond 2**40 s": (
        CANON + "x,1e18,gpt__1.3B,128,10,a40,4,\n",
        r"^{f}:2: column 'submit_time_s': 1e18 is beyond 1099511627776 s \(2\*\*40\), where seconds lose precision$",
    ),
    "negative deadline": (
        CANON + "x,1,gpt__1.3B,128,10,a40,4,-5\n",
        r"^{f}:2: negative time in column 'deadline_s': -5$",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CANONICAL))
def test_bad_canonical_inputs(case, fails_with):
    fails_with(load_trace, *BAD_CANONICAL[case])


def test_detection_errors(write_csv):
    path = write_csv("job_id,submission_time,num_iteration,model_name,batch_size,num_gpu,gpu_type\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}: missing column(s) deadline (the arena format needs")):
        load_trace(path)
    other = write_csv("user,when\nbob,3\n", "other.csv")
    with pytest.raises(
        ValueError, match=re.escape(f"{other}: unrecognised header (user, when); known formats: canonical: ")
    ):
        load_trace(other)
    empty = write_csv("", "empty.csv")
    with pytest.raises(ValueError, match=re.escape(f"{empty}: empty file (no header row)")):
        load_trace(empty)


def test_resolve_synthetic_specs():
    assert resolve_trace("synthetic") == synthetic()
    spec = "synthetic:n_jobs=200,arrival=bursty,rate_per_h=20,gpu_types=a40+a10,max_gpus=8"
    trace = resolve_trace(spec, seed=4)
    assert trace == synthetic(
        n_jobs=200, arrival="bursty", rate_per_h=20.0, gpu_types=("a40", "a10"), max_gpus=8, seed=4
    )
    assert resolve_trace(trace.source) == trace  # the source is a spec that regenerates the trace
    assert resolve_trace("synthetic:seed=9", seed=4) == synthetic(seed=9)
    assert resolve_trace(" synthetic:deadline_factor=none ") == synthetic(config=SyntheticConfig(deadline_factor=None))


def test_resolve_file_specs_and_transforms(shared_data):
    philly = str(shared_data / "arena/traces/philly.csv")
    full = resolve_trace(philly)
    assert len(full) == 1938
    sub = resolve_trace(f"{philly}?start_s=3600,end_s=7200,iteration_divisor=1")
    expected = full.window(3600, 7200).shift_to_zero()
    assert [j.job_id for j in sub] == [j.job_id for j in expected]
    assert sub.jobs[0].submit_time == 0
    assert -(-sub.jobs[0].iterations // 5) == expected.jobs[0].iterations  # divisor 1 vs the default 5
    fast = resolve_trace(f"{philly}?head=100,load=2")
    assert len(fast) == 100 and fast.span_s == pytest.approx(full.head(100).span_s / 2)
    itp = str(shared_data / "itp/cluster10.csv")
    assert resolve_trace(f"{itp}?mix=testbed", seed=3) == load_trace(itp, seed=3, mix="testbed")
    assert resolve_trace(f"{itp}?seed=5", seed=3) == load_trace(itp, seed=5)
    assert len(resolve_trace(f"{itp}?format=itp,head=3")) == 3


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            "synthetic:size=3",
            r"^trace spec 'synthetic:size=3': unknown key 'size'; valid keys: n_jobs, arrival, .*, name, start_s, end_s, head, load$",
        ),
        (
            "synthetic:n_jobs=many",
            r"^trace spec 'synthetic:n_jobs=many': bad value 'many' for 'n_jobs': expected an integer$",
        ),
        ("synthetic:n_jobs", r"option 'n_jobs' is not key=value"),
        (
            "synthetic:arrival=flat",
            r"^trace spec 'synthetic:arrival=flat': bad value 'flat' for 'arrival': expected one of poisson, bursty$",
        ),
        ("synthetic:head=0", r"head must be >= 1"),
        (
            "synthetic:head=none",
            r"^trace spec 'synthetic:head=none': bad value 'none' for 'head': expected an integer$",
        ),
        ("synthetic:start_s=", r"^trace spec 'synthetic:start_s=': bad value '' for 'start_s': expected a number$"),
        (
            "synthetic:end_s=5,start_s=9,load=inf",
            r"^trace spec 'synthetic:end_s=5,start_s=9,load=inf': need start_s < end_s, got 9, 5; load must be > 0, got inf$",
        ),
        ("synthetic:load=-2", r"load must be > 0"),
        ("synthetic:start_s=1e12", r"no jobs left"),
        (
            "nosuch.csv",
            r"^trace spec 'nosuch.csv': no such file; a TRACE is a file path \(canonical, arena, itp formats\) or a generator: synthetic\[:key=value,...\], live\[:key=value,...\]$",
        ),
    ],
)
def test_resolve_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        resolve_trace(spec)


def test_transforms_are_checked_on_construction():
    assert Transforms(start_s=10, head=3).window == (10.0, math.inf)
    with pytest.raises(ValueError, match=r"^Transforms.head must be None or an integer, got 1.5$"):
        Transforms(head=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^head must be >= 1, got 0; load must be > 0, got nan$"):
        Transforms(head=0, load=math.nan)


def test_resolve_bad_file_options(shared_data):
    itp = shared_data / "itp/cluster10.csv"
    with pytest.raises(
        ValueError,
        match=r"unknown key 'iteration_divisor'; valid keys: seed, mix, .*, format, start_s, end_s, head, load$",
    ):
        resolve_trace(f"{itp}?iteration_divisor=1")
    with pytest.raises(ValueError, match=r"bad value 'x' for 'max_gpus': expected an integer"):
        resolve_trace(f"{itp}?max_gpus=x")
    with pytest.raises(ValueError, match="unknown trace format 'xml'"):
        resolve_trace(f"{itp}?format=xml")


def test_file_named_like_a_generator_is_a_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    save_trace(synthetic(n_jobs=5), Path("synthetic"))
    trace = resolve_trace("synthetic")
    assert isinstance(trace, Trace) and trace.source == "canonical:synthetic"
