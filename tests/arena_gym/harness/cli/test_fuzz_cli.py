"""Fuzz the command line in-process (``arena_gym.harness.cli.main``): generated argument vectors for
simulate, compare, trace and estimate, mixing valid and nonsense values, files that are good,
malformed or missing, and output paths that can or cannot be written.

Every case ends with exit code 0 and complete outputs, or exit code 2 and exactly one error line
on stderr (progress bars aside); never a traceback, never a hang, never a partial output left
behind; a converted trace holds exactly the jobs of its source.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import tempfile
from pathlib import Path

import pandas as pd
from hypothesis import event, given
from hypothesis import strategies as st

from arena_gym.harness.cli import main
from tests.fuzzing import case_timeout, fuzz
from traces import load_trace, resolve_trace

TIMEOUT_S = 60.0
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-cli-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
ROOT = Path(_SCRATCH.name)
_OUTS = itertools.count()
CANON = "job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s\n"


def _file(name: str, text: str) -> str:
    path = ROOT / name
    path.write_text(text, encoding="utf-8")
    return str(path)


GOOD_TRACE = _file(
    "good.csv", CANON + "a,0,gpt__1.3B,128,20,a40,2,\nb,30,moe__1.3B,256,10,a10,1,900\nc,31,gpt__350M,64,5,,,\n"
)
HUGE_ITERS = _file("huge.csv", CANON + "a,0,gpt__1.3B,128,1e20,a40,2,\n")
ZZ_TYPE = _file("zz.csv", CANON + "a,0,gpt__1.3B,128,20,zz,2,\n")
H100_TYPE = _file("h100.csv", CANON + "a,0,gpt__1.3B,128,20,h100,2,\nb,3,gpt__1.3B,128,20,a40,1,\n")
BAD_ROW = _file("badrow.csv", CANON + "a,0,gpt__1.3B,128,20,a40,2,\nb,-4,gpt__1.3B,x,20,a40,3,\n")
ARENA = _file(
    "arena.csv",
    "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"
    "1,100,50,bert__1.3B,,128,2,a40\n2,160,25,moe__1.3B,4000,256,1,a10\n",
)
ITP = _file("itp.csv", "job_id,submission_time,duration,num_gpu\nx,5,600,1\ny,9,60,32\n")
JUNK = _file("junk.csv", "\x00\x01garbage,\n,,\n")
GOOD_CLUSTER = _file(
    "c.json",
    json.dumps(
        {
            "gpu_types": {
                "a40": {"nodes": 2, "gpus_per_node": 2, "inter_node_gbps": 12.5},
                "a10": {"nodes": 1, "gpus_per_node": 4},
            }
        }
    ),
)
TOML_CLUSTER = _file(
    "c.toml", "[gpu_types.a40]\nnodes = 2\ngpus_per_node = 2\n[gpu_types.a10]\nnodes = 2\ngpus_per_node = 2\n"
)
BAD_CLUSTERS = [
    _file("b1.json", '{"gpu_types": {"a40": {"nodes": true, "gpus_per_node": 2}}}'),
    _file("b2.json", '{"gpu_types": {"a40": {"nodes": 2, "gpus_per_node": 2, "intra_node_gbps": -1}}}'),
    _file("b3.json", "[" * 5000),
    _file("b4.toml", "gpu_types = 3\n"),
]
MEASURED = _file(
    "m.csv",
    "family,size,global_batch,gpu_type,num_nodes,gpus_per_node,num_gpus,iter_time_s,oom\n"
    "gpt,1.3B,128,a40,1,2,2,3.5,0\ngpt,1.3B,128,a40,1,1,1,6.6,0\nmoe,1.3B,256,a10,1,1,1,4.4,0\n",
)
BAD_MEASURED = _file("bm.csv", "family,size\ngpt,1.3B\n")
A_FILE = _file("plain.txt", "keep me\n")

#: Valid and nonsense values per part of a command line; a case draws most parts valid.
GOOD = {
    "trace": [
        GOOD_TRACE,
        f"{GOOD_TRACE}?head=2",
        ARENA,
        H100_TYPE,
        f"{ARENA}?iteration_divisor=1,load=2",
        "synthetic:n_jobs=2,max_gpus=1",
    ],
    "--cluster": ["tiny", GOOD_CLUSTER, TOML_CLUSTER],
    "--perf": ["estimator", f"measured:{MEASURED}", f"measured:{MEASURED}"],  # the table is the fast one
    "--belief": ["noisy:0.2", "noisy:0"],
    "--horizon": ["600", "1e6"],
    "--round": ["300", "60"],
    "--overhead-scale": ["1", "0", "2.5"],
    "--seed": ["0", "7"],
    "--policy": ["fcfs", "fcfs-r", "srtf"],
    "flag": ["--no-plots", "--strict"],
}
BAD = {
    "trace": [
        HUGE_ITERS,
        ZZ_TYPE,
        BAD_ROW,
        JUNK,
        str(ROOT / "missing.csv"),
        "synthetic:n_jobs=0",
        "synthetic:bogus=1",
        "synthetic:n_jobs=10000000",
        "synthetic:n_jobs=3,rate_per_h=nan",
        "",
        "synthetic:",
        f"{GOOD_TRACE}?head=0",
        f"{GOOD_TRACE}?load=-1",
        f"{GOOD_TRACE}?start_s=5,end_s=1",
        "synthetic:n_jobs=3,gpu_types=t4",
    ],
    "--cluster": ["mars", "", *BAD_CLUSTERS],
    "--perf": ["measured:", f"measured:{ROOT}", f"measured:{BAD_MEASURED}", "noisy:0.1", "magic", ""],
    "--belief": ["noisy:1e9", "noisy:nan", "noisy:", "noisy:x", f"measured:{ROOT / 'nope.csv'}"],
    "--horizon": ["0", "-1", "nan", "x", ""],
    "--round": ["0", "inf", "nan", "-5", "0.01", "x"],
    "--overhead-scale": ["-1", "nan", "inf", "1e307", "x"],
    "--seed": ["-1", "2.5", "x", "4294967296", "1" * 5000],
    "--policy": ["nope", "", "sb3:", f"sb3:{ROOT / 'none.zip'}"],
    "flag": ["--bogus", "-q", "--", "extra", "--no-event-decisions", "--out"],
}
OPTIONS = ("--belief", "--horizon", "--round", "--overhead-scale", "--seed", "--policy")


def out_dir(kind: int) -> str:
    """A fresh results directory (kind 0), or one of the paths that must be refused."""
    return [str(ROOT / f"out{next(_OUTS)}"), "/dev/null", A_FILE, f"{A_FILE}/sub", "/proc/arena-fuzz", "", str(ROOT)][
        kind
    ]


def out_file(kind: int) -> str:
    """A fresh file in a missing directory (kind 0), paths that must be refused (1-4), an existing file (5: replaced)."""
    return [
        str(ROOT / f"new{next(_OUTS)}" / "t.csv"),
        ".",
        "/dev/null",
        f"{A_FILE}/x.csv",
        str(ROOT) + "/",
        str(ROOT / "replaced.csv"),
    ][kind]


def one_in(n: int) -> st.SearchStrategy:
    """True about once in ``n`` draws (plain integer draws lean towards 0)."""
    return st.sampled_from([True] + [False] * (n - 1))


ONE_IN_2, ONE_IN_4, ONE_IN_40 = one_in(2), one_in(4), one_in(40)


def pick(draw, part: str, bad: set[str]) -> str:
    return draw(st.sampled_from(BAD[part] if part in bad else GOOD[part]))


@st.composite
def run_argv(draw, command: str) -> list[str]:
    parts = ["trace", "--cluster", "out", "--perf", "option", "flag"] + (["lists"] if command == "compare" else [])
    bad = set(draw(st.lists(st.sampled_from(parts), min_size=1, max_size=2, unique=True))) if draw(ONE_IN_2) else set()
    argv = [command]
    if command == "simulate":
        argv += ["--trace", pick(draw, "trace", bad)]
    else:
        traces = [pick(draw, "trace", bad if i == 0 else set()) for i in range(draw(st.integers(1, 2)))]
        argv += draw(
            st.sampled_from(
                [["--trace", traces[0]], ["--traces", ",".join(traces)], [x for t in traces for x in ("--traces", t)]]
            )
        )
        if "lists" in bad:
            argv += draw(
                st.sampled_from(
                    [
                        ["--trace", traces[0], "--traces", traces[-1]],
                        ["--policies", ""],
                        ["--policies", "fcfs,fcfs"],
                        ["--policies", "fcfs,nope"],
                        ["--seeds", "1,1"],
                        ["--seeds", "-1"],
                        ["--workers", "0"],
                        ["--workers", "300"],
                        ["--pad-jct", "srtf"],
                    ]
                )
            )
        argv += ["--policies", draw(st.sampled_from(["fcfs", "fcfs", "fcfs,srtf"]))] if "--policies" not in argv else []
        argv += ["--seeds", draw(st.sampled_from(["0", "0", "0,1"]))] if "--seeds" not in argv else []
    argv += [
        "--cluster",
        pick(draw, "--cluster", bad),
        "--out",
        out_dir(draw(st.integers(1, 6)) if "out" in bad else 0),
        "--perf",
        pick(draw, "--perf", bad),
    ]
    options = draw(st.lists(st.sampled_from(OPTIONS), max_size=3, unique=True))
    bad_option = draw(st.sampled_from(options)) if "option" in bad and options else None
    for option in options:
        argv += [option, pick(draw, option, {option} if option == bad_option else set())]
    if "flag" in bad:
        argv.append(pick(draw, "flag", bad))
    if not draw(ONE_IN_40):
        argv.append("--no-plots")  # plots are slow (and tested elsewhere): keep them for one case in forty
    if draw(ONE_IN_4):
        argv.append("--strict")
    return argv


@st.composite
def trace_argv(draw) -> list[str]:
    action = draw(st.sampled_from(["info", "convert"]))
    bad = draw(st.sampled_from([set(), set(), {"trace"}, {"--cluster"}]))
    trace = (
        draw(st.sampled_from([ITP, f"{ITP}?mix=testbed,iter_max=50"])) if draw(ONE_IN_4) else pick(draw, "trace", bad)
    )
    argv = ["trace", action, trace, "--cluster", pick(draw, "--cluster", bad)]
    if action == "convert" and not draw(ONE_IN_40):
        argv += ["--out", out_file(draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4, 5])))]
    argv += draw(st.sampled_from([[], [], ["--seed", "3"], ["--seed", "-2"], ["--perf", "magic"], ["--bogus"]]))
    return argv


@st.composite
def estimate_argv(draw) -> list[str]:
    action = draw(st.sampled_from(["query", "query", "validate", "calibrate", "nothing"]))
    if action == "nothing":
        return ["estimate"]
    if action == "query":
        argv = [
            "estimate",
            "query",
            "--model",
            draw(st.sampled_from(["gpt__1.3B", "moe__1.3B", "gpt__9Z", "gpt", ""])),
            "--batch",
            draw(st.sampled_from(["128", "64", "0", "-3", "1.5", "x", "99999999999"])),
            "--gpu-type",
            draw(st.sampled_from(["a40", "a10", "zz"])),
            "--cluster",
            draw(st.sampled_from(["tiny", GOOD_CLUSTER, *BAD_CLUSTERS[:2]])),
        ]
        argv += draw(
            st.sampled_from(
                [
                    [],
                    [],
                    ["--pareto", "a40:1x2:2"],
                    ["--pareto", "a40:3x2:1"],
                    ["--pareto", "zz:1x1:1"],
                    ["--pareto", "a40:1x2"],
                    ["--pareto", "a40:1024x1024:1"],
                ]
            )
        )
        return argv
    measured = draw(st.sampled_from([MEASURED, MEASURED, BAD_MEASURED, JUNK, str(ROOT / "nope.csv")]))
    argv = ["estimate", action, "--measured", measured]
    if action == "calibrate":
        argv += ["--max-evals", draw(st.sampled_from(["1", "0", "x"]))]
    if draw(st.booleans()):
        argv += ["--out", out_file(draw(st.sampled_from([0, 0, 0, 1, 2, 3, 4, 5])))]
    return argv


#: Argument vectors that are no command (a bare ``simulate`` or ``compare`` would run the long defaults).
JUNK_ARGV = st.one_of(
    st.lists(st.sampled_from(["trace", "estimate", "--help", "-v", "x", "--out", "", "--bogus", "-h"]), max_size=3),
    st.sampled_from(
        [
            ["simulate", "--bogus"],
            ["compare", "--policies"],
            ["simulate", "-v", "--seed"],
            ["compare", "x"],
            ["simulate", "--help"],
            ["-v", "compare", "--out"],
        ]
    ),
)
ARGV = st.sampled_from(["simulate", "simulate", "simulate", "compare", "trace", "trace", "estimate", "junk"]).flatmap(
    lambda kind: {
        "simulate": run_argv("simulate"),
        "compare": run_argv("compare"),
        "trace": trace_argv(),
        "estimate": estimate_argv(),
        "junk": JUNK_ARGV,
    }[kind]
)


def check_error_output(err: str) -> None:
    """Exactly one ``arena-gym ...: error: ...`` line, last; progress-bar output may come before it."""
    assert "Traceback" not in err, err
    lines = [line for line in re.split(r"[\r\n]+", err) if line.strip()]
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 1 and lines[-1] == errors[0] and errors[0].startswith("arena-gym"), err


def check_success(argv: list[str]) -> None:
    if not argv or {"--help", "-h"} & set(argv) or argv[0] not in ("simulate", "compare", "trace", "estimate"):
        return
    command = argv[0]
    out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else None
    if command == "simulate" and out is not None:
        assert {"config.json", "metrics.json", "jobs.csv", "timeline.csv"} <= {p.name for p in out.iterdir()}
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["jobs_finished"] <= metrics["jobs_submitted"] <= metrics["jobs_total"]
    if command == "compare" and out is not None:
        board = pd.read_csv(out / "leaderboard.csv")
        assert len(board) >= 1 and {"jobs_total", "jobs_submitted", "jobs_unplaceable_type"} <= set(board.columns)
    if argv[:2] == ["trace", "convert"]:
        seed = int(argv[argv.index("--seed") + 1]) if "--seed" in argv else 0
        assert out is not None
        # what was written is exactly what the source means (ITP sampling with the same seed and cluster)
        source = argv[2]
        if not source.startswith("synthetic") and "itp" not in source:
            assert load_trace(out).jobs == resolve_trace(source, seed=seed).shift_to_zero().jobs


@fuzz(1000)
@given(argv=ARGV)
def test_generated_command_lines(argv, capsys):
    with case_timeout(TIMEOUT_S):
        code = main(argv)
    out, err = capsys.readouterr()
    event(f"{argv[0] if argv else '(none)'} exit {code}")
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        check_error_output(err)
    else:
        assert "Traceback" not in err
        check_success(argv)
    leftovers = [p.name for p in ROOT.iterdir() if p.name.endswith((".partial", ".tmp", ".old"))]
    assert not leftovers, leftovers
    assert Path(A_FILE).read_text() == "keep me\n"
