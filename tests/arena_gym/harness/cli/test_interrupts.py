"""Ctrl-C (SIGINT) and SIGTERM at random points of a command: one line, exit 130 or 143, nothing left behind
that a later run trips on, nothing earlier lost; the same command then runs to the end."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from arena_gym.harness import cli
from arena_gym.harness.cli import Terminated, guarded
from tests.arena_gym.harness.quadratic_target import SPEC
from tests.helpers import default_sigint

REPO = Path(__file__).resolve().parents[4]
#: A simulate under Arena long enough (several seconds) to be stopped at any point of it.
LONG_TRACE = "synthetic:mix=testbed,n_jobs=3000,rate_per_h=42"
#: Signal -> the exit code the command line reports.
CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
#: Random points (seconds after the start) at which a signal is sent; the seed makes them the same every run.
POINTS = [round(random.Random(47 + i).uniform(0.3, 3.5), 2) for i in range(4)]


def _stopped(argv: list[str], cwd: Path, signum: int, after_s: float) -> tuple[int, str]:
    """Run ``arena-gym ARGV``, send ``signum`` to its process group after ``after_s``; (exit code, stderr)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    run = subprocess.Popen(
        [sys.executable, "-m", "arena_gym", *argv], cwd=cwd, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        run.wait(timeout=after_s)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signum)
    _, err = run.communicate(timeout=90)
    return run.returncode, err


def _check_stopped(code: int, err: str, signum: int) -> None:
    assert "Traceback" not in err, err
    if code != 0:  # it may have finished before the signal
        assert code == CODES[signum], err
        [line] = [x for x in err.splitlines() if x.startswith("arena-gym ")]
        assert line.endswith(("interrupted", "terminated")), err


@pytest.mark.timeout(600)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_simulate_stopped_at_random_points_leaves_nothing_and_keeps_the_earlier_run(tmp_path, signum) -> None:
    argv = ["simulate", "--policy", "arena", "--trace", LONG_TRACE, "--cluster", "testbed-64", "--no-plots"]
    argv += ["--out", "run", "--replace"]
    assert _stopped(argv, tmp_path, signum, 300.0)[0] == 0  # a finished run to keep
    for after_s in POINTS:
        before = json.loads((tmp_path / "run" / "metrics.json").read_text())
        code, err = _stopped(argv, tmp_path, signum, after_s)
        _check_stopped(code, err, signum)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no .run.*.partial, no .run.lock
        if code != 0:  # stopped: the earlier run is untouched (a run that finished first replaced it whole)
            assert json.loads((tmp_path / "run" / "metrics.json").read_text()) == before


def _running_trials(out: Path) -> list[int]:
    """The trials a study in ``out`` still holds as running (none where it has no storage yet)."""
    import optuna

    if not (out / "study.db").is_file():
        return []
    storage = f"sqlite:///{out / 'study.db'}"
    running = (optuna.trial.TrialState.RUNNING,)
    studies = [optuna.load_study(study_name=name, storage=storage) for name in optuna.get_all_study_names(storage)]
    return [t.number for study in studies for t in study.get_trials(deepcopy=False, states=running)]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_tune_stopped_at_random_points_fails_its_running_trials_and_reaches_its_trials_when_rerun(
    tmp_path, signum
) -> None:
    argv = ["tune", "--target", SPEC, "--trials", "5", "--workers", "2", "--startup-trials", "2", "--no-progress"]
    argv += ["--trial-set", "steps=4", "--trial-set", "pause_s=0.4", "--out", "study"]
    for after_s in POINTS[:2]:
        code, err = _stopped(argv, tmp_path, signum, after_s + 2.0)  # past the workers' start
        _check_stopped(code, err, signum)
        assert not list(tmp_path.glob(".study*"))
        assert _running_trials(tmp_path / "study") == []  # failed or recorded, so a rerun takes them up at once
    code, err = _stopped(argv, tmp_path, signum, 300.0)
    assert code == 0, err  # it ran to the end within the 300 s
    states = pd.read_csv(tmp_path / "study" / "trials.csv")["state"]
    assert states.isin(["COMPLETE", "PRUNED"]).sum() >= 5 and "RUNNING" not in set(states)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_evaluate_stopped_at_random_points_leaves_nothing_and_keeps_the_earlier_run(tmp_path, signum) -> None:
    argv = ["evaluate", "--policies", "arena,fcfs", "--suite", "custom", "--trace", LONG_TRACE.replace("3000", "600")]
    argv += ["--cluster", "testbed-64", "--window-jobs", "100", "--limit", "6", "--resamples", "100", "--no-bounds"]
    argv += ["--no-progress", "--out", "run", "--replace"]
    assert _stopped(argv, tmp_path, signum, 120.0)[0] == 0  # a finished evaluation to keep
    before = (tmp_path / "run" / "per_workload.csv").read_bytes()
    for after_s in POINTS[:2]:
        code, err = _stopped(argv, tmp_path, signum, after_s)
        _check_stopped(code, err, signum)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no .run.*.partial, no .run.lock
        assert (tmp_path / "run" / "per_workload.csv").read_bytes() == before  # kept, or replaced by the same


@pytest.mark.timeout(300)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_train_es_stopped_at_random_points_leaves_nothing_a_rerun_trips_on(shared_data, tmp_path, signum) -> None:
    sets = ["iterations=2", "pairs=1", "windows=1", "validation_limit=1", "workers=1", f"data_dir={shared_data}"]
    argv = ["train", "--method", "es", *[a for s in sets for a in ("--set", s)], "--out", "run"]
    for after_s in POINTS[:2]:
        code, err = _stopped(argv, tmp_path, signum, after_s + 1.0)  # past the imports, into the iterations
        _check_stopped(code, err, signum)
        assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no .run.lock, no .partial
    code, err = _stopped(argv, tmp_path, signum, 240.0)
    assert code == 0, err  # the rerun is not refused and runs to the end
    assert (tmp_path / "run" / "residual.json").is_file()


#: A policy module whose import is stopped by Ctrl-C inside code CPython runs for an extension (``PyRun_String``),
#: as torch's import does: under ``python -m`` that used to end the process by SIGINT (exit -2), not with 130.
STOPPED_IN_AN_EXTENSION = """import ctypes
run = ctypes.pythonapi.PyRun_String
run.restype = ctypes.py_object
run.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.py_object, ctypes.py_object]
run(b"raise KeyboardInterrupt", 257, {}, {})  # 257: Py_file_input
"""


@pytest.mark.timeout(120)
def test_ctrl_c_inside_an_extensions_code_still_exits_130_under_python_m(tmp_path) -> None:
    (tmp_path / "stopped_policy.py").write_text(STOPPED_IN_AN_EXTENSION)
    argv = ["simulate", "--policy", "stopped_policy:P", "--trace", "synthetic:n_jobs=4", "--cluster", "tiny"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    done = subprocess.run(
        [sys.executable, "-m", "arena_gym", *argv, "--out", "run", "--no-plots"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    _check_stopped(done.returncode, done.stderr, signal.SIGINT)
    assert done.returncode == 130 and not (tmp_path / "run").exists(), done.stderr


#: What code a signal interrupts may report instead: pybind11 when it stops a module's initialisation, CPython when
#: it stops a class being created (matplotlib's on import); a ValueError raised while cleaning up after it.
REPORTED_AS = [
    ImportError("initialization failed"),
    RuntimeError("Error calling __set_name__ on '_axis_method_wrapper' instance 'get_xgridlines' in '_AxesBase'"),
    ValueError("I/O operation on closed file"),
]


@pytest.mark.parametrize("reported", REPORTED_AS, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize(
    "interrupt, code, word", [(KeyboardInterrupt(), 130, "interrupted"), (Terminated(), 143, "terminated")]
)
def test_an_error_the_signal_caused_is_the_signal_not_a_traceback(capsys, reported, interrupt, code, word) -> None:
    def stopped() -> None:
        raise reported from interrupt

    assert guarded("prog", stopped) == code
    assert capsys.readouterr().err == f"prog: {word}\n"

    def cleaning_up() -> None:  # raised while the interrupt was being handled: its context
        try:
            raise interrupt
        except KeyboardInterrupt:
            raise reported  # noqa: B904

    assert guarded("prog", cleaning_up) == code


def test_an_import_error_of_its_own_is_not_taken_for_an_interrupt() -> None:
    def broken() -> None:
        raise ImportError("initialization failed") from RuntimeError("a real fault")

    with pytest.raises(ImportError, match="initialization failed"):
        guarded("prog", broken)


@pytest.mark.parametrize("interrupt, code", [(KeyboardInterrupt(), 130), (ImportError("initialization failed"), 130)])
def test_ctrl_c_while_the_command_line_is_parsed_is_one_line(capsys, monkeypatch, interrupt, code) -> None:
    def stopped(argv: object) -> None:
        if isinstance(interrupt, ImportError):
            raise interrupt from KeyboardInterrupt()
        raise interrupt

    monkeypatch.setattr(cli, "build_parser", stopped)
    assert cli.main(["simulate", "--policy", "arena"]) == code
    assert capsys.readouterr().err == "arena-gym: interrupted\n"
