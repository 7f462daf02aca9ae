"""The performance-table cache of the command line: where it lives, --cache-dir, --no-cache."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from arena_gym.harness.cli import main
from arena_gym.harness.cli.common import TABLES_SUBDIR, add_cache_arguments, cache_dir, default_cache_dir

SIM = ["simulate", "--policy", "fcfs", "--trace", "synthetic:n_jobs=12", "--cluster", "tiny", "--no-plots"]


def _metrics(out: Path) -> dict:
    metrics = json.loads((out / "metrics.json").read_text())
    metrics.pop("sched_ms_per_decision")
    return metrics


def test_default_is_xdg_cache_home_else_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "arena-gym"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "arena-gym"


def test_flags_resolve_to_the_tables_folder_or_none(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    parser = argparse.ArgumentParser()
    add_cache_arguments(parser)
    assert cache_dir(parser.parse_args([])) == tmp_path / "arena-gym" / TABLES_SUBDIR
    assert cache_dir(parser.parse_args(["--cache-dir", "elsewhere"])) == Path("elsewhere") / TABLES_SUBDIR
    assert cache_dir(parser.parse_args(["--no-cache"])) is None


def test_simulate_fills_the_default_cache_then_reuses_it(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    tables = tmp_path / "xdg" / "arena-gym" / TABLES_SUBDIR
    assert main([*SIM, "--out", str(tmp_path / "a")]) == 0
    files = {p: p.stat().st_mtime_ns for p in tables.glob("*.npy")}
    assert files  # one table per (model, batch, GPU type) the run touched
    assert main([*SIM, "--out", str(tmp_path / "b")]) == 0
    assert {p: p.stat().st_mtime_ns for p in tables.glob("*.npy")} == files  # read, not rewritten
    assert _metrics(tmp_path / "a") == _metrics(tmp_path / "b")


def test_cache_dir_and_no_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main([*SIM, "--cache-dir", str(tmp_path / "mine"), "--out", str(tmp_path / "a")]) == 0
    assert list((tmp_path / "mine" / TABLES_SUBDIR).glob("*.npy"))
    assert main([*SIM, "--no-cache", "--out", str(tmp_path / "b")]) == 0
    assert not (tmp_path / "xdg").exists()
    assert _metrics(tmp_path / "a") == _metrics(tmp_path / "b")


def test_cache_dir_and_no_cache_together_is_one_line_error(tmp_path, capsys):
    assert main([*SIM, "--no-cache", "--cache-dir", str(tmp_path), "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not allowed with argument" in err
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(
    "command",
    [["trace", "info", "synthetic:n_jobs=5"], ["compare", "--policies", "fcfs", "--trace", "synthetic:n_jobs=5"]],
)
def test_other_commands_take_the_cache_flags(command, tmp_path):
    out = [] if command[0] == "trace" else ["--cluster", "tiny", "--no-plots", "--out", str(tmp_path / "c")]
    assert main([*command, *out, "--cache-dir", str(tmp_path / "mine")]) == 0
    assert list((tmp_path / "mine" / TABLES_SUBDIR).glob("*.npy"))
