"""Regressions: every bad input to the command line ends with one line on stderr and exit code 2,
leaves nothing half-written, and never silently changes what is simulated."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from arena_gym.harness.cli import main
from tests.helpers import default_sigint

TINY = "synthetic:n_jobs=4,rate_per_h=60,max_gpus=2"
CANON = "job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s\n"
REPO = Path(__file__).resolve().parents[4]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(capsys, *argv: str) -> str:
    """Run, expect exit 2 and exactly one stderr line; return it."""
    code, _, err = cli(capsys, *argv)
    assert code == 2, err
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("arena-gym"), err
    return lines[0]


def live_processes_in_group(pgid: int) -> list[int]:
    """Pids of the process group that are still running (zombies excluded)."""
    pids = []
    for stat_file in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat_file.parent.name))
    return pids


def no_leftovers(directory: Path) -> list[str]:
    """Temporary results directories or files left in ``directory``."""
    return [p.name for p in directory.iterdir() if p.name.endswith((".partial", ".tmp", ".old"))]


def trace_file(tmp_path: Path, rows: str, name: str = "t.csv") -> str:
    path = tmp_path / name
    path.write_text(CANON + rows)
    return str(path)


# -- output paths -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_out, message",
    [
        (lambda d: "/dev/null", "argument --out: /dev/null: exists and is not a directory"),
        (lambda d: str(d / "file.txt"), "file.txt: exists and is not a directory"),
        (lambda d: str(d / "file.txt" / "sub"), "file.txt is not a directory"),
        (lambda d: str(d / "foreign"), "a non-empty directory that is not an arena-gym results directory"),
        (lambda d: ".", "is the current directory or one of its parents"),
        (lambda d: "", "empty path"),
    ],
)
def test_bad_simulate_out(tmp_path, capsys, monkeypatch, make_out, message):
    (tmp_path / "file.txt").write_text("keep me")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.md").write_text("mine")
    monkeypatch.chdir(tmp_path)
    line = one_line_error(capsys, "simulate", "--trace", TINY, "--cluster", "tiny", "--out", make_out(tmp_path))
    assert message in line
    assert (tmp_path / "file.txt").read_text() == "keep me" and (
        tmp_path / "foreign" / "notes.md"
    ).read_text() == "mine"
    assert not no_leftovers(tmp_path)


def test_unwritable_out_is_one_line(capsys):
    # /proc refuses new entries even to root
    line = one_line_error(capsys, "simulate", "--trace", TINY, "--cluster", "tiny", "--out", "/proc/arena-gym-out")
    assert "--out /proc/arena-gym-out: cannot write to /proc" in line


@pytest.mark.parametrize(
    "out, message",
    [
        (".", "argument --out: .: is a directory; name a file"),
        ("/dev/null", "/dev/null: exists and is not a regular file"),
        ("dir/", "is a directory"),
        ("file.txt/x.csv", "file.txt is not a directory"),
    ],
)
def test_bad_trace_convert_out(tmp_path, capsys, monkeypatch, out, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("keep me")
    assert message in one_line_error(capsys, "trace", "convert", TINY, "--cluster", "tiny", "--out", out)
    assert (tmp_path / "file.txt").read_text() == "keep me"


def test_trace_convert_into_a_missing_directory_and_over_a_file(tmp_path, capsys):
    out = tmp_path / "new" / "deeper" / "t.csv"
    assert cli(capsys, "trace", "convert", TINY, "--cluster", "tiny", "--out", str(out))[0] == 0
    assert len(pd.read_csv(out)) == 4
    assert (
        cli(capsys, "trace", "convert", TINY.replace("n_jobs=4", "n_jobs=6"), "--cluster", "tiny", "--out", str(out))[0]
        == 0
    )
    assert len(pd.read_csv(out)) == 6 and not no_leftovers(out.parent)


def test_estimate_validate_out_into_a_missing_directory(tmp_path, capsys):
    measured = tmp_path / "m.csv"
    measured.write_text(
        "family,size,global_batch,gpu_type,num_nodes,gpus_per_node,num_gpus,iter_time_s,oom\n"
        "gpt,760M,128,a100,1,1,1,6.57527,0\n"
    )
    out = tmp_path / "missing" / "pred.csv"
    assert cli(capsys, "estimate", "validate", "--measured", str(measured), "--out", str(out))[0] == 0
    assert "predicted_iter_time_s" in pd.read_csv(out).columns
    line = one_line_error(capsys, "estimate", "validate", "--measured", str(measured), "--out", str(tmp_path))
    assert "is a directory; name a file" in line


# -- exit code 2 everywhere -----------------------------------------------------------------


@pytest.mark.parametrize(
    "argv, message",
    [
        (["estimate"], "arena-gym estimate: error: choose an action"),
        (["estimate", "query", "--model", "gpt__1.3B", "--batch", "1.5"], "argument --batch: not an integer: '1.5'"),
        (["estimate", "query", "--model", "gpt__1.3B", "--batch", "0"], "global_batch must be in 1..16777216, got 0"),
        (["estimate", "query", "--model", "gpt__9Z", "--batch", "8"], "unknown model 'gpt__9Z'"),
        (["estimate", "query", "--model", "gpt__1.3B", "--batch", "8", "--pareto", "a100:3x4:1"], "argument --pareto"),
        (["estimate", "validate", "--measured", "/nonexistent.csv"], "/nonexistent.csv"),
        (
            ["estimate", "calibrate", "--measured", "/nonexistent.csv", "--max-evals", "0"],
            "argument --max-evals: must be in 1..100000",
        ),
    ],
)
def test_estimate_exits_2_like_every_command(capsys, argv, message):
    assert message in one_line_error(capsys, *argv)


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--perf", "measured:"], "performance model spec 'measured:' needs an argument after 'measured:'"),
        (["--perf", "measured:/"], "/: Is a directory"),
        (["--belief", "noisy:1e9"], "noisy:SIGMA needs 0 <= SIGMA <= 10, got '1e9'"),
        (["--belief", "noisy:inf"], "noisy:SIGMA needs 0 <= SIGMA <= 10"),
        (["--round", "inf"], "argument --round: must be finite and > 0: 'inf'"),
        (["--round", "nan"], "argument --round: must be finite and > 0"),
        (["--round", "0"], "argument --round: must be finite and > 0"),
        (["--overhead-scale", "-1"], "argument --overhead-scale: must be finite and >= 0"),
        (["--overhead-scale", "nan"], "argument --overhead-scale: must be finite and >= 0"),
        (["--overhead-scale", "1e307"], "--overhead-scale 1e+307 makes the overheads overflow"),
        (["--seed", "-1"], "argument --seed: must be in 0..4294967295"),
        (["--seed", "2.5"], "argument --seed: not an integer"),
        (["--no-event-decisions"], "--no-event-decisions needs --round"),
        (["--bogus"], "unrecognized arguments: --bogus"),
    ],
)
def test_bad_run_arguments(tmp_path, capsys, extra, message):
    out = tmp_path / "o"
    line = one_line_error(capsys, "simulate", "--trace", TINY, "--cluster", "tiny", "--out", str(out), *extra)
    assert message in line and not out.exists() and not no_leftovers(tmp_path)


# -- traces: overflow, GPU types, size caps ---------------------------------------------------


@pytest.mark.parametrize("cell, column", [("1e20", "iterations"), ("9223372036854775807", "iterations")])
def test_trace_overflow_is_refused_with_file_line_column_and_range(tmp_path, capsys, cell, column):
    path = trace_file(tmp_path, f"a,0,gpt__1.3B,128,{cell},a40,2,\n")
    line = one_line_error(capsys, "simulate", "--trace", path, "--cluster", "tiny", "--out", str(tmp_path / "o"))
    assert line.endswith(f"{path}:2: column '{column}': {cell} is out of range (allowed 1..9007199254740991)")


@pytest.mark.parametrize("gpu_type", ["zz", "tpu"])
def test_gpu_type_outside_the_catalogue_is_an_error(tmp_path, capsys, gpu_type):
    path = trace_file(tmp_path, f"a,0,gpt__1.3B,128,10,a40,2,\nb,5,gpt__1.3B,128,10,{gpu_type},2,\n")
    for argv in (
        ["simulate", "--trace", path, "--cluster", "tiny", "--out", str(tmp_path / "o")],
        ["trace", "info", path, "--cluster", "tiny"],
    ):
        line = one_line_error(capsys, *argv)
        assert f"job 'b' requests GPU type '{gpu_type}', which is not in the hardware catalogue" in line


def test_non_ascii_gpu_type_names_the_line(tmp_path, capsys):
    path = trace_file(tmp_path, "a,0,gpt__1.3B,128,10,à40,2,\n")
    assert f"{path}:2: column 'gpu_type': 'à40' is not a GPU type name" in one_line_error(
        capsys, "trace", "info", path, "--cluster", "tiny"
    )


def test_gpu_type_the_cluster_lacks_warns_counts_and_fails_when_strict(tmp_path, capsys, caplog):
    path = trace_file(
        tmp_path, "a,0,gpt__1.3B,128,10,a40,2,\nb,5,gpt__1.3B,128,10,h100,2,\nc,6,gpt__1.3B,128,10,h100,1,\n"
    )
    out = tmp_path / "o"
    code, stdout, _ = cli(
        capsys, "simulate", "--policy", "fcfs", "--trace", path, "--cluster", "tiny", "--out", str(out), "--no-plots"
    )
    assert code == 0 and "2 job(s) request a GPU type the cluster lacks" in stdout
    assert "2 job(s) request GPU types that cluster 'tiny' lacks (h100: 2 (first 'b'))" in caplog.text
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["jobs_unplaceable_type"] == 2 and metrics["jobs_finished"] == 1
    strict = one_line_error(
        capsys, "simulate", "--trace", path, "--cluster", "tiny", "--out", str(tmp_path / "s"), "--strict"
    )
    assert "cluster 'tiny' lacks (h100: 2 (first 'b'))" in strict and not (tmp_path / "s").exists()


def test_synthetic_size_is_capped(capsys):
    start = time.perf_counter()
    line = one_line_error(capsys, "trace", "info", "synthetic:n_jobs=10000000", "--cluster", "tiny")
    assert "n_jobs must be in 1..1000000, got 10000000" in line
    assert time.perf_counter() - start < 30  # refused up front, not after generating


def test_cluster_file_nonsense_is_one_line_for_simulate_and_estimate(tmp_path, capsys):
    cluster = tmp_path / "c.json"
    cluster.write_text('{"gpu_types": {"a40": {"nodes": true, "gpus_per_node": 2}}}')
    expected = "gpu_types.a40.nodes: expected an integer in 1..100000, got true"
    assert expected in one_line_error(
        capsys, "simulate", "--trace", TINY, "--cluster", str(cluster), "--out", str(tmp_path / "o")
    )
    assert expected in one_line_error(
        capsys, "estimate", "query", "--model", "gpt__1.3B", "--batch", "8", "--cluster", str(cluster)
    )


# -- compare ------------------------------------------------------------------------------------


def test_compare_refuses_trace_and_traces_together(tmp_path, capsys):
    line = one_line_error(
        capsys,
        "compare",
        "--policies",
        "fcfs",
        "--trace",
        TINY,
        "--traces",
        TINY,
        "--cluster",
        "tiny",
        "--out",
        str(tmp_path / "c"),
    )
    assert "give either --trace or --traces, not both" in line


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--policies", "fcfs,fcfs"], "policies lists 'fcfs' twice"),
        (["--seeds", "0,0"], "seeds lists 0 twice"),
        (["--seeds", "0,-1"], "argument --seeds: must be in 0..4294967295"),
        (["--pad-jct", "srtf"], "--pad-jct: padding reference policy 'srtf' is not among fcfs (or 'max')"),
        (["--reference", "arena"], "--reference: reference policy 'arena' is not among fcfs"),
    ],
)
def test_compare_checks_its_lists_before_running(tmp_path, capsys, argv, message):
    base = ["compare", "--policies", "fcfs", "--trace", TINY, "--cluster", "tiny", "--out", str(tmp_path / "c")]
    assert message in one_line_error(capsys, *base, *argv)
    assert not (tmp_path / "c").exists()


def test_compare_lists_synthetic_specs_with_commas_and_same_stem_traces(tmp_path, capsys):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    rows = "a,0,gpt__1.3B,128,10,a40,2,\nb,5,gpt__1.3B,128,10,a10,1,\n"
    first, second = (
        trace_file(tmp_path / "a", rows, "x.csv"),
        trace_file(tmp_path / "b", rows + "c,9,gpt__1.3B,128,10,a40,1,\n", "x.csv"),
    )
    out = tmp_path / "c"

    def compare(synthetic: str):
        traces = ("--traces", synthetic, "--traces", f"{first},{second}")
        return cli(capsys, "compare", "--policies", "fcfs", "--cluster", "tiny", "--out", str(out), *traces)

    code, _, err = compare("synthetic:n_jobs=3,max_gpus=2,horizon_s=1")
    # horizon_s is no synthetic key: the comma-joined option stays with its spec and is refused
    assert code == 2 and "unknown key 'horizon_s'" in err
    code, _, _ = compare("synthetic:n_jobs=3,max_gpus=2")
    assert code == 0
    board = pd.read_csv(out / "leaderboard.csv")
    assert list(board.trace) == sorted(["synthetic:n_jobs=3,max_gpus=2", first, second])
    assert {"jobs_total", "jobs_submitted", "jobs_unplaceable_type"} <= set(board.columns)
    assert dict(zip(board.trace, board.jobs_total)) == {"synthetic:n_jobs=3,max_gpus=2": 3, first: 2, second: 3}
    run_dirs = sorted(p.parent.parent.name for p in out.glob("*/fcfs-seed0/metrics.json"))
    assert len(run_dirs) == 3 and len(set(run_dirs)) == 3  # x.csv twice: two directories
    names = json.loads((out / "config.json").read_text())["run_dirs"]["traces"]
    assert names[first] != names[second] and names[first].startswith("x-")


def test_leaderboard_shows_jobs_that_never_arrived(tmp_path, capsys):
    path = trace_file(
        tmp_path, "a,0,gpt__1.3B,128,10,a40,2,\nb,5,gpt__1.3B,128,10,a10,1,\nc,99999,gpt__1.3B,128,10,a40,1,\n"
    )
    out = tmp_path / "c"
    assert (
        cli(
            capsys,
            "compare",
            "--policies",
            "fcfs",
            "--trace",
            path,
            "--cluster",
            "tiny",
            "--horizon",
            "5000",
            "--out",
            str(out),
        )[0]
        == 0
    )
    row = pd.read_csv(out / "leaderboard.csv").iloc[0]
    assert (row.jobs_total, row.jobs_submitted) == (3, 2)


# -- results written complete or not at all -----------------------------------------------------


def test_failed_rerun_keeps_the_earlier_results(tmp_path, capsys):
    out = tmp_path / "o"
    assert cli(capsys, "simulate", "--trace", TINY, "--cluster", "tiny", "--out", str(out), "--no-plots")[0] == 0
    before = (out / "metrics.json").read_text()
    bad = trace_file(tmp_path, "a,0,gpt__1.3B,128,-4,a40,2,\n")
    one_line_error(capsys, "simulate", "--trace", bad, "--cluster", "tiny", "--out", str(out), "--replace")
    assert (out / "metrics.json").read_text() == before and not no_leftovers(tmp_path)
    # a successful rerun replaces the directory as a whole (no stale files from the old run)
    (out / "stale.txt").write_text("old")
    assert (
        cli(
            capsys,
            "simulate",
            "--trace",
            TINY,
            "--cluster",
            "tiny",
            "--out",
            str(out),
            "--no-plots",
            "--seed",
            "3",
            "--replace",
        )[0]
        == 0
    )
    assert not (out / "stale.txt").exists() and json.loads((out / "config.json").read_text())["seed"] == 3


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--policy", "fcfs", "--trace", "synthetic:n_jobs=200000,rate_per_h=5000"],
        ["compare", "--policies", "fcfs,srtf", "--workers", "2", "--trace", "synthetic:n_jobs=20000,rate_per_h=5000"],
    ],
    ids=["simulate", "compare-workers"],
)
def test_ctrl_c_leaves_no_partial_results(tmp_path, argv):
    """A real SIGINT to the whole process group: one line, exit 130, no results directory, no stray workers."""
    out = tmp_path / "o"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "arena_gym", *argv, "--cluster", "arena-1280", "--out", str(out)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(tmp_path.glob(".o.*.partial")):
            time.sleep(0.05)
        time.sleep(1.5)  # inside trace generation or the runs
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
        _, err = proc.communicate(timeout=60)
    except BaseException:  # a timeout or a failed wait: take the workers down with the command
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        raise
    assert proc.returncode == 130, err
    assert re.search(rf"^arena-gym {argv[0]}: interrupted$", err, re.M) and "Traceback" not in err
    assert not out.exists() and not no_leftovers(tmp_path)
    time.sleep(0.5)
    assert live_processes_in_group(proc.pid) == []
