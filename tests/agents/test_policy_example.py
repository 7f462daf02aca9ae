"""The "Writing a policy" example of docs/policies.md: its code and commands, taken from the page, run as written."""

from __future__ import annotations

import importlib
import json
import shlex
import sys
from pathlib import Path

import pytest

from arena_gym.harness.cli import main
from arena_gym.records import EventKind
from arena_gym.types import HiddenInformation
from tests.agents.baseline_cases import SMALL, run_checked
from tests.helpers import job, uniform_model

DOC = Path(__file__).resolve().parents[2] / "docs" / "policies.md"


def documented(marker: str) -> str:
    """The body of the first fenced block after ``<!-- example: MARKER -->`` in docs/policies.md."""
    text = DOC.read_text()
    fence = text.index("```", text.index(f"<!-- example: {marker} -->"))
    body = text.index("\n", fence) + 1
    return text[body : text.index("```", body)]


@pytest.fixture
def example(tmp_path, monkeypatch):
    """The example saved as ``my_policies.py`` in a fresh folder that is the working directory and on the path."""
    (tmp_path / "my_policies.py").write_text(documented("my_policies.py"))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield importlib.import_module("my_policies")
    sys.modules.pop("my_policies", None)


def test_the_example_is_complete_and_at_most_25_lines():
    code = documented("my_policies.py")
    assert len(code.splitlines()) <= 25
    compile(code, "my_policies.py", "exec")


def test_the_example_starts_least_work_first(example):
    # three 4-GPU jobs arrive together and only one fits at a time: least iterations first, FCFS would take P first
    jobs = [job("P", 0, 100, "a40", 4), job("Q", 0, 10, "a40", 4), job("R", 0, 50, "a40", 4)]
    record = run_checked(example.SmallestFirst(), jobs, perf=uniform_model(), config=SMALL)
    assert [e.job_id for e in record.events if e.kind is EventKind.ALLOCATE] == ["Q", "R", "P"]
    assert not any(e.kind is EventKind.PREEMPT for e in record.events)


def test_without_the_declaration_reading_the_true_length_is_refused(example):
    class Undeclared(example.SmallestFirst):
        clairvoyant = False

    jobs = [job("P", 0, 100, "a40", 4), job("Q", 0, 10, "a40", 4)]
    with pytest.raises(HiddenInformation, match="policy 'smallest-first' is not clairvoyant: JobSpec.iterations"):
        run_checked(Undeclared(), jobs, perf=uniform_model(), config=SMALL)


def test_the_documented_commands_run_the_example(example, tmp_path, capsys):
    simulate, compare = (shlex.split(line) for line in documented("command").strip().splitlines())
    assert simulate[:3] == compare[:3] == ["python", "-m", "arena_gym"]
    assert main(simulate[3:]) == 0
    metrics = json.loads((tmp_path / "results" / "smallest" / "metrics.json").read_text())
    assert metrics["jobs_finished"] == metrics["jobs_submitted"] == 40
    assert capsys.readouterr().out.startswith(
        "my_policies:SmallestFirst (clairvoyant: saw the true job lengths): 40/40"
    )
    assert json.loads((tmp_path / "results" / "smallest" / "config.json").read_text())["clairvoyant"] is True
    assert main(compare[3:]) == 0
    board = (tmp_path / "results" / "cmp" / "leaderboard.csv").read_text()
    assert "my_policies:SmallestFirst,True" in board and "fcfs,False" in board  # the clairvoyant column
