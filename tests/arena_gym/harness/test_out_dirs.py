"""Output paths: refused before any work, results directories complete or absent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arena_gym.harness.out_dirs import check_out_dir, check_out_file, is_results_dir, machine, shown_path, staged_dir


def results_dir(path):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"code_version": "x"}))
    (path / "metrics.json").write_text("{}")
    return path


def test_check_out_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    assert check_out_dir("new/deeper") == tmp_path / "new" / "deeper"
    assert check_out_dir("empty") == tmp_path / "empty"
    assert check_out_dir(results_dir(tmp_path / "old")) == tmp_path / "old" and is_results_dir(tmp_path / "old")
    for path, message in (
        ("f", "--out f: exists and is not a directory"),
        ("f/sub", f"{tmp_path / 'f'} is not a directory"),
        ("other", "not an arena-gym results directory"),
        (".", "current directory"),
        ("..", "current directory"),
        ("", "--out: empty path"),
        ("a\0b", "NUL byte"),
    ):
        with pytest.raises(ValueError, match=message):
            check_out_dir(path)


def test_check_out_file(tmp_path):
    (tmp_path / "f").write_text("x")
    assert check_out_file(tmp_path / "f") == tmp_path / "f"
    assert check_out_file(tmp_path / "new" / "x.csv") == tmp_path / "new" / "x.csv"
    for path, message in (
        (tmp_path, "is a directory"),
        (f"{tmp_path}/x/", "is a directory"),
        ("/dev/null", "exists and is not a regular file"),
        (tmp_path / "f" / "x", "is not a directory"),
    ):
        with pytest.raises(ValueError, match=message):
            check_out_file(path, "--out")


def test_staged_dir_is_complete_or_absent(tmp_path):
    out = tmp_path / "a" / "b" / "run"
    with pytest.raises(KeyboardInterrupt):
        with staged_dir(out) as staging:
            (staging / "metrics.json").write_text("{}")
            raise KeyboardInterrupt
    assert not (tmp_path / "a").exists()
    with staged_dir(out) as staging:
        assert not out.exists() and staging.parent == out.parent and staging.name.endswith(".partial")
        (staging / "config.json").write_text(json.dumps({"code_version": "1"}))
    assert sorted(p.name for p in out.parent.iterdir()) == ["run"] and is_results_dir(out)


def test_staged_dir_replaces_an_earlier_results_dir_only_when_done(tmp_path):
    out = results_dir(tmp_path / "run")
    with pytest.raises(ValueError):
        with staged_dir(out) as staging:
            (staging / "config.json").write_text(json.dumps({"code_version": "2"}))
            raise ValueError("bad trace")
    assert json.loads((out / "config.json").read_text())["code_version"] == "x" and (out / "metrics.json").exists()
    with staged_dir(out) as staging:
        (staging / "config.json").write_text(json.dumps({"code_version": "2"}))
    assert json.loads((out / "config.json").read_text())["code_version"] == "2" and not (out / "metrics.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_staged_dir_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x")
    with pytest.raises(ValueError, match="not an arena-gym results directory"):
        with staged_dir(tmp_path / "mine"):
            pass
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "x"


def test_machine_describes_the_cpus_and_both_load_averages():
    info = machine((1.0, 2.0, 3.0))
    assert info["cpus"] == os.cpu_count() and info["affinity"] == sorted(os.sched_getaffinity(0))
    assert info["loadavg_before"] == (1.0, 2.0, 3.0) and len(info["loadavg_after"]) == 3
    assert info["python"].count(".") == 2 and info["platform"]


def test_shown_path_names_a_path_inside_the_root_relative_to_it(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "results").mkdir(parents=True)
    monkeypatch.chdir(root)
    assert shown_path(root / "results" / "a.json", root) == "results/a.json"
    assert shown_path(root / "results" / ".." / "b.json", root) == "b.json"  # resolved first
    assert shown_path(Path("results/c.json"), root) == "results/c.json"  # relative to the working directory
    assert shown_path(tmp_path / "elsewhere.json", root) == str(tmp_path / "elsewhere.json")
