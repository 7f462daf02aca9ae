"""scripts/train_agent.py follows the results-directory rule before any training, and holds the run's lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arena_gym.harness.runlock import lock_path
from tests.helpers import load_script

SCRIPT = load_script("train_agent")


def _results(path: Path, kind: str) -> Path:
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"code_version": "x", "kind": kind, "train": {}}))
    (path / "leaderboard.csv").write_text("policy\narena\n")
    return path


@pytest.fixture
def no_training(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replaces the training and test with a record of the lock held while they would run."""
    reached: list[str] = []

    def held(args, config, test_config) -> int:
        lock = lock_path(config.out_dir)
        assert lock.exists() and json.loads(lock.read_text())["command"] == "train_agent"
        reached.append(lock.name)
        return 0

    monkeypatch.setattr(SCRIPT, "_train_and_test", held)
    return reached


def _run(out: Path, *extra: str) -> int:
    return SCRIPT.main(["--env", "ArenaGym/Tiny-v1", "--out", str(out), "--no-progress", *extra])


def test_another_commands_results_are_refused_and_kept(tmp_path, capsys, no_training):
    other = _results(tmp_path / "board", "compare")
    for extra in ((), ("--replace",)):
        assert _run(other, *extra) == 2
        err = capsys.readouterr().err.strip()
        assert (
            err
            == f"train_agent: error: --out {other}: holds compare results, not an sb3 training run; name a new directory"
        )
    assert (other / "leaderboard.csv").read_text() == "policy\narena\n" and not no_training


def test_a_finished_run_needs_replace(tmp_path, capsys, no_training):
    done = _results(tmp_path / "done", "train:sb3")
    assert _run(done) == 2
    assert "--replace" in capsys.readouterr().err and not no_training
    assert _run(done, "--replace") == 0 and len(no_training) == 1
    assert (done / "leaderboard.csv").exists()  # replaced only by a complete new run


def test_a_new_directory_is_trained_under_its_lock(tmp_path, no_training):
    assert _run(tmp_path / "new") == 0 and len(no_training) == 1
    assert not (tmp_path / ".new.lock").exists()  # released
