"""Fuzz the arguments of ``train``, ``evaluate``, ``deploy`` and ``estimate profile`` in-process
(``arena_gym.harness.cli.main``), with the work itself replaced by a stub that records that it was reached.

A command line built only from valid values must reach the work (never refused); one with a nonsense value, a
missing required argument or an unknown flag must end with exit code 2 and exactly one ``arena-gym ...: error:``
line before any work starts. Never a traceback, never a hang, nothing written outside the output paths.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from arena_gym.harness.cli import main
from tests.arena_gym.harness.cli.test_fuzz_cli import check_error_output
from tests.estimator.test_profile import synthetic_profile
from tests.fuzzing import case_timeout, fuzz_budget

TIMEOUT_S = 60.0
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-cli-runs-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
ROOT = Path(_SCRATCH.name)
_OUTS = iter(range(10**9))
A_FILE = ROOT / "plain.txt"
A_FILE.write_text("keep me\n")
BAD_TESTBED = ROOT / "bed.json"
BAD_TESTBED.write_text('{"device_type": "tpu", "nodes": [{"devices": [0]}]}')
GOOD_TESTBED = ROOT / "bed-ok.json"
GOOD_TESTBED.write_text('{"device_type": "cpu", "nodes": [{"host": "localhost", "devices": [0]}]}')


class Reached(Exception):
    """The stubbed work was reached: every argument had been accepted."""


def fresh() -> str:
    return str(ROOT / f"out{next(_OUTS)}")


def bad_out() -> str:
    return str(ROOT) if next(_OUTS) % 2 else "/dev/null"


#: Per command: (required arguments, {option: (valid values, nonsense values)}); "OUT" is a fresh directory.
COMMANDS = {
    "train": (
        [],
        {
            "--env": (["ArenaGym/Tiny-v1"], ["", "ArenaGym/Nope-v9", "CartPole"]),
            "--algo": (["maskable_ppo", "ppo", "dqn"], ["", "sac", "x"]),
            "--steps": (["64", "1000"], ["0", "-5", "1.5", "x", "", "1e99"]),
            "--seed": (["0", "7"], ["-1", "x", "4294967296"]),
            "--lr": (["0.001", "3e-4"], ["0", "-1", "nan", "inf", "x"]),
            "--n-envs": (["1", "2"], ["0", "-1", "x"]),
            "--gamma": (["0.99", "1"], ["1.5", "-0.1", "nan", "x"]),
            "--batch-size": (["32", "64"], ["0", "x", "-2"]),
            "--eval-every": (["0", "500"], ["-1", "x"]),
            "--net-arch": (["64,64", "32"], ["", "x", "0", "-4", "64,,x"]),
            "--out": (["OUT"], ["BAD_OUT"]),
        },
    ),
    "evaluate": (
        ["--policies"],
        {
            # policy names are checked by the evaluation itself (stubbed here), before its first workload
            "--policies": (["fcfs", "fcfs,srtf", "a=fcfs,b=srtf"], []),
            "--suite": (["synthetic"], ["", "nope"]),
            "--seed": (["0", "3"], ["-1", "x", "1.5"]),
            "--resamples": (["100", "1000"], ["0", "-3", "x"]),
            "--limit": (["0", "2"], ["-1", "x"]),
            "--workers": (["1", "2"], ["0", "300", "x"]),
            "--loads": (["0.9", "0.5,1.2"], ["x", "-1", "0", "nan"]),
            "--window-jobs": (["50", "10", "0"], ["-5", "x"]),  # 0: the whole split
            "--out": (["OUT"], ["BAD_OUT"]),
        },
    ),
    "deploy": (
        [],
        {
            "--policy": (["fcfs", "arena"], ["", "nope", "sb3:/none.zip"]),
            "--testbed": (["cpu-1", "cpu-2", str(GOOD_TESTBED)], ["", "cpu-3", "gpu-8", str(BAD_TESTBED), str(A_FILE)]),
            "--trace": (["live:n_jobs=2,work=0.1", "live:n_jobs=1"], ["", "live:n_jobs=0", "nope:1", "live:work=-1"]),
            "--seed": (["0", "5"], ["-1", "x", "2.5"]),
            "--round": (["30", "300"], ["0", "-1", "nan", "inf", "x"]),
            "--horizon": (["600"], ["0", "-1", "x"]),
            "--checkpoint-every": (["10", "2"], ["0", "-1", "x"]),
            "--max-retries": (["0", "3"], ["-1", "101", "x"]),
            "--status-every": (["5"], ["0", "-1", "nan", "x"]),
            "--time-scale": (["1", "0.5"], ["0", "-1", "inf", "x"]),
            "--out": (["OUT"], ["BAD_OUT"]),
        },
    ),
    "profile": (
        ["--testbed", "--models", "--out"],
        {
            "--testbed": (["cpu-1", "cpu-2"], ["", "cpu-9", str(BAD_TESTBED)]),
            "--models": (["gpt__tiny", "gpt__tiny,gpt__mini"], ["", "gpt__9Z", "moe__1.3B", "gpt__6.7B", ","]),
            "--out": (["OUT/p.json"], ["/dev/null", str(ROOT), f"{A_FILE}/p.json"]),
            "--samples": (["1,2", "4"], ["x", "", "0", "-1"]),
            "--rounds": (["1", "3"], ["0", "-1", "x"]),
            "--tp": (["1", "1,2"], ["x", ""]),
            "--batch": (["16", "8"], ["0", "-4", "x"]),
            "--device": (["auto", "cpu"], ["tpu", ""]),
            "--neighbours": (["busy", "idle"], ["some", ""]),
        },
    ),
}


@st.composite
def command_lines(draw) -> tuple[str, list[str], str]:
    """(command, argv, kind): kind is "valid", "bad value", "missing" (a required argument) or "unknown flag"."""
    command = draw(st.sampled_from(sorted(COMMANDS)))
    required, options = COMMANDS[command]
    chosen = sorted(set(required) | set(draw(st.lists(st.sampled_from(sorted(options)), max_size=4, unique=True))))
    kind = draw(st.sampled_from(["valid", "valid", "bad value", "bad value", "missing", "unknown flag"]))
    if kind == "missing" and not required:
        kind = "valid"
    refusable = [o for o in chosen if options[o][1]]
    if kind == "bad value" and not refusable:
        refusable = [draw(st.sampled_from(sorted(o for o in options if options[o][1])))]
        chosen = sorted({*chosen, *refusable})
    bad = draw(st.sampled_from(refusable)) if kind == "bad value" else None
    dropped = draw(st.sampled_from(required)) if kind == "missing" else None
    argv = ["estimate", "profile"] if command == "profile" else [command]
    if command == "deploy" and "--testbed" not in chosen:
        argv += ["--testbed", "cpu-2"]
    if command == "deploy" and "--trace" not in chosen:
        argv += ["--trace", "live:n_jobs=2,work=0.1"]
    if command == "train" and "--env" not in chosen:
        argv += ["--env", "ArenaGym/Tiny-v1"]
    if command in ("train", "evaluate", "deploy") and "--out" not in chosen:
        argv += ["--out", "OUT"]
    for option in chosen:
        if option == dropped:
            continue
        good, nonsense = options[option]
        argv += [option, draw(st.sampled_from(nonsense if option == bad else good))]
    if kind == "unknown flag":
        argv.append(draw(st.sampled_from(["--bogus", "--resum", "-z", "--out"])))
    argv = [fresh() if a == "OUT" else f"{fresh()}/p.json" if a == "OUT/p.json" else a for a in argv]
    argv = [bad_out() if a == "BAD_OUT" else a for a in argv]
    return command, argv, kind


@pytest.fixture
def stubbed(monkeypatch):
    """The work of every command replaced: train/resume, evaluate, the live backend, the profiler."""
    from arena_gym.harness.cli import deploy as deploy_cli
    from real_runner.profiler import run

    def reached(*args, **kwargs):
        raise Reached

    train_mod = importlib.import_module("arena_gym.harness.trainers.sb3")
    evaluate_mod = importlib.import_module("arena_gym.harness.evaluate")  # the package exports a function of this name
    monkeypatch.setattr(train_mod, "train", reached)
    monkeypatch.setattr(train_mod, "resume", reached)
    monkeypatch.setattr(evaluate_mod, "evaluate", reached)
    monkeypatch.setattr(deploy_cli, "open_backend", reached)
    monkeypatch.setattr(run, "profile_testbed", lambda *a, **k: synthetic_profile())
    return SimpleNamespace()


@fuzz_budget(30)
@given(case=command_lines())
def test_generated_run_command_lines(stubbed, capsys, case) -> None:
    command, argv, kind = case
    with case_timeout(TIMEOUT_S):
        try:
            code = main(argv)
        except Reached:
            code = 0
    _, err = capsys.readouterr()
    event(f"{command} {kind} exit {code}")
    assert "Traceback" not in err, (argv, err)
    if kind == "valid":
        assert code == 0, (argv, err)
        if command == "profile":
            out = Path(argv[argv.index("--out") + 1])
            assert json.loads(out.read_text())["format"] == synthetic_profile().to_dict()["format"]
    else:
        assert code == 2, (argv, code, err)
        check_error_output(err)
    assert A_FILE.read_text() == "keep me\n"
    leftovers = [p.name for p in ROOT.iterdir() if p.name.endswith((".partial", ".tmp"))]
    assert not leftovers, leftovers
