"""Fuzz the arguments of ``tune`` in-process (``arena_gym.harness.cli.main``), with the study itself
(``Tuner.run``) replaced by a stub that records the settings it was given.

A command line of valid values must reach the study with exactly those settings (a storage URL, target, ``--set``
and ``--trial-set`` checked and kept); one with a nonsense value (a storage URL that is no database, names a missing
driver, an in-memory database, a file that is not SQLite; a target that is not one; a field the target lacks or a
value of the wrong type; counts out of range), or an unknown flag, must end with exit code 2 and exactly one
``arena-gym tune: error:`` line before the study starts. Never a traceback, never a hang, nothing left behind.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from arena_gym.fields import from_text
from arena_gym.harness import tune
from arena_gym.harness.cli import main
from tests.arena_gym.harness.cli.test_fuzz_cli import check_error_output
from tests.arena_gym.harness.quadratic_target import SPEC
from tests.fuzzing import case_timeout, fuzz_budget

TIMEOUT_S = 30.0
_SCRATCH = tempfile.TemporaryDirectory(prefix="fuzz-tune-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
ROOT = Path(_SCRATCH.name)
_OUTS = iter(range(10**9))
A_FILE = ROOT / "plain.txt"
A_FILE.write_text("keep me\n")

#: Options -> (valid values, nonsense values); "DB" is a fresh SQLite file in a folder that exists.
OPTIONS = {
    "--target": ([SPEC, "sb3", "ppo"], ["", "nope", "os:path", "os:", "a:b:c", "arena_gym:nope", "expert-iteration"]),
    "--storage": (
        ["DB"],
        [
            "",
            "notaurl",
            "postgresql://u@h/db",
            "mysql://u@h/db",
            "nosuchdialect://h/db",
            "sqlite://",
            "sqlite:///:memory:",
            "sqlite:////nonexistent/dir/x.db",
            f"sqlite:///{A_FILE}",
            f"sqlite:///{ROOT}",
            "sqlite:////dev/null",
            "sqlite:///%00",
        ],
    ),
    "--trials": (["1", "20", "100000", "1e3"], ["0", "-1", "x", "1.5", "", "100001"]),  # fields.from_text's integers
    "--workers": (["1", "2", "256"], ["0", "-1", "257", "x", ""]),
    "--seed": (["0", "4294967295"], ["-1", "4294967296", "x", "99999999999999999999"]),
    "--startup-trials": (["0", "5"], ["-1", "x"]),
    "--warmup-steps": (["0", "3"], ["-2", "x"]),
    "--study": (["", "s1", "a b"], []),
    "--set": (["label=a", "x=0.5", "steps=2"], ["nokey", "=1", "bogus=1", "steps=x", "steps=1.5", "steps=", "y=lots"]),
    "--trial-set": (["steps=1", "pause_s=0"], ["x", "zz=1", "steps=nan", "pause_s=fast"]),
    "--out": (["OUT"], ["/dev/null", str(A_FILE), f"{A_FILE}/s", "", "."]),
}
#: Options whose values are fields of the quadratic target: with them the target is that one.
QUAD_FIELDS = ("--set", "--trial-set")


class Reached(Exception):
    """The stubbed study was reached: every argument had been accepted."""


@st.composite
def command_lines(draw) -> tuple[list[str], str, dict[str, str]]:
    """(argv, kind, the valid values given): kind is "valid", "bad value" or "unknown flag"."""
    chosen = draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=5, unique=True))
    kind = draw(st.sampled_from(["valid", "valid", "bad value", "bad value", "bad value", "unknown flag"]))
    refusable = [o for o in chosen if OPTIONS[o][1]]
    if kind == "bad value" and not refusable:
        refusable = [draw(st.sampled_from(sorted(o for o in OPTIONS if OPTIONS[o][1])))]
        chosen = [*chosen, *refusable]
    bad = draw(st.sampled_from(refusable)) if kind == "bad value" else None
    given_values: dict[str, str] = {}
    argv = ["tune", "--no-progress"]
    if "--out" not in chosen:
        argv += ["--out", str(ROOT / f"out{next(_OUTS)}")]
    if "--target" not in chosen or (set(QUAD_FIELDS) & set(chosen) and bad != "--target"):
        argv += ["--target", SPEC]
        chosen = [o for o in chosen if o != "--target"]
    for option in chosen:
        good, nonsense = OPTIONS[option]
        value = draw(st.sampled_from(nonsense if option == bad else good))
        value = {"DB": f"sqlite:///{ROOT}/db{next(_OUTS)}.db", "OUT": str(ROOT / f"out{next(_OUTS)}")}.get(value, value)
        if option != bad:
            given_values[option] = value
        argv += [option, value]
    if kind == "unknown flag":
        argv.append(draw(st.sampled_from(["--bogus", "--trial", "-z", "--storage"])))
    return argv, kind, given_values


@pytest.fixture
def stubbed(monkeypatch):
    """``Tuner.run`` records its settings and stops: no study runs."""
    reached: list[tune.TuneSettings] = []

    def run(self: tune.Tuner, progress: bool = True) -> dict:
        reached.append(self.settings)
        raise Reached

    monkeypatch.setattr(tune.Tuner, "run", run)
    return reached


def _check_settings(settings: tune.TuneSettings, given_values: dict[str, str]) -> None:
    """The study was given exactly the values of the command line."""
    for option, value in given_values.items():
        if option in ("--trials", "--workers", "--seed", "--startup-trials", "--warmup-steps"):
            assert getattr(settings, option[2:].replace("-", "_")) == from_text(value, int), (option, settings)
        elif option == "--storage":
            assert settings.storage == value
        elif option in QUAD_FIELDS:
            key, text = value.split("=", 1)
            recorded = settings.base if option == "--set" else settings.trial_set
            assert str(recorded[key]) in (text, str(float(text)) if key != "label" else text), (value, recorded)
        elif option in ("--target", "--study", "--out"):
            assert getattr(settings, option[2:]) == value


@fuzz_budget(40)
@given(case=command_lines())
def test_generated_tune_command_lines(stubbed, capsys, case) -> None:
    argv, kind, given_values = case
    stubbed.clear()
    with case_timeout(TIMEOUT_S):
        try:
            code = main(argv)
        except Reached:
            code = 0
    _, err = capsys.readouterr()
    event(f"tune {kind} exit {code}")
    assert "Traceback" not in err, (argv, err)
    if kind == "valid":
        assert code == 0 and len(stubbed) == 1, (argv, err)
        _check_settings(stubbed[0], given_values)
    else:
        assert code == 2 and not stubbed, (argv, code, err)
        check_error_output(err)
    assert A_FILE.read_text() == "keep me\n"
    leftovers = [p.name for p in ROOT.iterdir() if p.name.endswith((".partial", ".tmp", ".lock"))]
    assert not leftovers, leftovers
