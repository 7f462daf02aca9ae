"""One rule for every command that writes a results directory (:mod:`arena_gym.harness.out_dirs`): new, empty,
its own kind of finished results only with --replace, never another command's (one line, exit 2, nothing touched)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from arena_gym.harness.cli import main
from arena_gym.harness.out_dirs import KINDS, results_kind
from arena_gym.harness.trainers import METHODS
from tests.arena_gym.harness.quadratic_target import SPEC

TRACE = "synthetic:n_jobs=3"
#: A command line per command that writes a results directory (OUT: the directory), and the kind it writes.
COMMANDS: dict[str, tuple[list[str], str]] = {
    "simulate": (["simulate", "--trace", TRACE, "--cluster", "tiny", "--no-plots", "--out", "OUT"], "simulate"),
    "compare": (
        ["compare", "--policies", "fcfs", "--trace", TRACE, "--cluster", "tiny", "--no-plots", "--out", "OUT"],
        "compare",
    ),
    "evaluate": (
        [
            "evaluate",
            "--policies",
            "arena,fcfs",
            "--suite",
            "synthetic",
            "--limit",
            "1",
            "--no-progress",
            "--out",
            "OUT",
        ],
        "evaluate",
    ),
    "train": (["train", "--steps", "64", "--no-progress", "--out", "OUT"], "train:sb3"),
    "train --method es": (["train", "--method", "es", "--set", "iterations=1", "--out", "OUT"], "train:es"),
    "train --method residual-ppo": (["train", "--method", "residual-ppo", "--out", "OUT"], "train:residual-ppo"),
    "deploy": (["deploy", "--testbed", "cpu-1", "--trace", "live:n_jobs=1", "--out", "OUT"], "deploy"),
    "tune": (["tune", "--target", SPEC, "--trials", "1", "--no-progress", "--out", "OUT"], "tune"),
}


def _argv(command: str, out: Path, *extra: str) -> list[str]:
    return [a.replace("OUT", str(out)) for a in COMMANDS[command][0]] + list(extra)


def _results(path: Path, kind: str | None) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"code_version": "x", **({"kind": kind} if kind else {})}))
    (path / "leaderboard.csv").write_text("policy\nfcfs\n")
    return path


def _contents(path: Path) -> list[tuple[str, bytes]]:
    return sorted((p.relative_to(path).as_posix(), p.read_bytes()) for p in path.rglob("*") if p.is_file())


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_another_commands_results_are_refused_in_one_line_and_kept(tmp_path: Path, capsys, command: str) -> None:
    kind = COMMANDS[command][1]
    other = "simulate" if kind == "compare" else "compare"
    theirs = _results(tmp_path / "theirs", other)
    before = _contents(theirs)
    for extra in ((), ("--replace",)):
        assert main(_argv(command, theirs, *extra)) == 2
        err = _one_line(capsys)  # deploy refuses it as it parses --out: "argument --out: holds ..."
        assert "--out" in err and f": holds {other} results, not {KINDS[kind]}; name a new directory" in err
    assert _contents(theirs) == before and sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]


@pytest.mark.parametrize("command", ["simulate", "compare", "evaluate", "train"])
def test_a_commands_own_results_are_replaced_only_with_replace(tmp_path: Path, capsys, command: str) -> None:
    out = tmp_path / "run"
    assert main(_argv(command, out)) == 0
    capsys.readouterr()
    kind = COMMANDS[command][1]
    assert results_kind(out) == kind
    (out / "mine.txt").write_text("kept")
    before = _contents(out)
    assert main(_argv(command, out)) == 2
    assert _one_line(capsys).endswith(
        f"holds {KINDS[kind]} already; pass --replace to replace it, or name a new directory"
    )
    assert _contents(out) == before
    assert main(_argv(command, out, "--replace")) == 0
    assert results_kind(out) == kind and not (out / "mine.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staged or lock file left beside it


@pytest.mark.parametrize("command", ["simulate", "compare", "evaluate", "train", "deploy", "train --method es"])
def test_results_that_record_no_kind_need_replace(tmp_path: Path, capsys, command: str) -> None:
    old = _results(tmp_path / "old", None)
    before = _contents(old)
    assert main(_argv(command, old)) == 2
    kind = COMMANDS[command][1]
    assert _one_line(capsys).endswith(f"holds results that record no kind; pass --replace if they are {KINDS[kind]}")
    assert _contents(old) == before


def test_a_study_continues_in_its_own_directory_and_takes_an_older_one_only_with_replace(
    tmp_path: Path, capsys
) -> None:
    study = tmp_path / "study"
    assert main(_argv("tune", study)) == 0
    assert results_kind(study) == "tune"
    assert main([*_argv("tune", study), "--trials", "3"]) == 0  # the same study, continued
    assert len(pd.read_csv(study / "trials.csv")) >= 3
    old = _results(tmp_path / "old", None)
    assert main(_argv("tune", old)) == 2
    assert _one_line(capsys).endswith("holds results that record no kind; pass --replace if they are a tuning study")
    assert main(_argv("tune", old, "--replace")) == 0 and results_kind(old) == "tune"


@dataclasses.dataclass(frozen=True)
class FakeConfig:
    """The config of :class:`FakeMethod`."""

    fail: bool = False


class FakeMethod:
    """A trainer that writes its run directory at once (``fail``: stops half-way, as on Ctrl-C)."""

    config_type = FakeConfig

    def objective(self, config: FakeConfig, out: Path, report: Any, progress: bool = False) -> float:
        (out / "config.json").write_text(json.dumps({"kind": "train:es", "code_version": "new"}))
        if config.fail:
            raise KeyboardInterrupt
        (out / "residual.json").write_text("{}")
        return 1.0


FAKE = FakeMethod()


def test_a_trainer_replaces_its_own_run_only_once_the_new_one_is_complete(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setitem(METHODS, "es", f"{__name__}:FAKE")
    out = _results(tmp_path / "es", "train:es")
    before = _contents(out)
    argv = ["train", "--method", "es", "--out", str(out)]
    assert main(argv) == 2
    assert _one_line(capsys).endswith(
        "holds an es training run already; pass --replace to replace it, or name a new directory"
    )
    assert main([*argv, "--replace", "--set", "fail=true"]) == 130
    assert _contents(out) == before  # the interrupted replacement left the earlier run as it was
    assert main([*argv, "--replace"]) == 0
    assert json.loads((out / "config.json").read_text())["code_version"] == "new" and (out / "residual.json").exists()
    assert not (out / "leaderboard.csv").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["es"]


class _Deployment:
    """What the deploy handler needs of a prepared deployment, run by the fakes below."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.jobs: tuple[()] = ()
        self.policy = None


def _fake_deploy(monkeypatch: pytest.MonkeyPatch, outcome: str) -> None:
    """The deploy handler around fakes: ``outcome`` ``ok`` writes the results, ``interrupt`` and ``error`` stop."""
    import arena_gym.harness.cli.deploy as cli
    from real_runner.live.backend import LiveError

    class Backend:
        def __init__(self, out: Path) -> None:
            (out / "journal.sqlite").write_text("new")

        def stop_all(self) -> None:
            pass

        def close(self) -> None:
            pass

    def episode(backend: Backend, policy: Any, jobs: Any) -> None:
        if outcome == "interrupt":
            raise KeyboardInterrupt
        if outcome == "error":
            raise LiveError("a job failed")

    def write_results(out: Path, dep: Any, result: Any) -> None:
        (out / "config.json").write_text(json.dumps({"kind": "deploy", "code_version": "new"}))

    monkeypatch.setattr(cli, "prepare", lambda config, env: _Deployment(outcome))
    monkeypatch.setattr(cli, "_header", lambda dep, out, resumed: None)
    monkeypatch.setattr(cli, "open_backend", lambda dep, out, env, **kwargs: Backend(out))
    monkeypatch.setattr(cli, "run_episode", episode)
    monkeypatch.setattr(cli, "finish", lambda dep, backend, record: None)
    monkeypatch.setattr(cli, "write_results", write_results)
    monkeypatch.setattr(cli, "_report", lambda dep, result, out: print(f"results: {out}"))


def test_deploy_replaces_a_finished_deployment_only_once_the_new_one_is_complete(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    out = _results(tmp_path / "deploy", "deploy")
    before = _contents(out)
    argv = _argv("deploy", out)
    _fake_deploy(monkeypatch, "ok")
    assert main(argv) == 2
    assert _one_line(capsys).endswith(
        "holds a deployment already; pass --replace to replace it, or name a new directory"
    )
    for outcome, code in (("interrupt", 130), ("error", 1)):
        _fake_deploy(monkeypatch, outcome)
        assert main([*argv, "--replace"]) == code
        assert f"; {out} is kept" in capsys.readouterr().out
        assert _contents(out) == before
    _fake_deploy(monkeypatch, "ok")
    assert main([*argv, "--replace"]) == 0
    assert results_kind(out) == "deploy" and (out / "journal.sqlite").read_text() == "new"
    assert not (out / "leaderboard.csv").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["deploy"]
