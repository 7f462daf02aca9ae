"""Output paths: refused before any work, results directories complete or absent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from arena_gym.harness.out_dirs import (
    KINDS,
    check_out_dir,
    check_out_file,
    filled_dir,
    is_results_dir,
    machine,
    results_kind,
    shown_path,
    staged_dir,
)


def results_dir(path, kind=None):
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"code_version": "x", **({"kind": kind} if kind else {})}))
    (path / "metrics.json").write_text("{}")
    return path


def contents(path):
    return sorted((p.relative_to(path).as_posix(), p.read_bytes()) for p in path.rglob("*") if p.is_file())


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
        with staged_dir(out, kind="simulate") as staging:
            (staging / "metrics.json").write_text("{}")
            raise KeyboardInterrupt
    assert not (tmp_path / "a").exists()
    with staged_dir(out, kind="simulate") as staging:
        assert not out.exists() and staging.parent == out.parent and staging.name.endswith(".partial")
        (staging / "config.json").write_text(json.dumps({"code_version": "1"}))
    assert sorted(p.name for p in out.parent.iterdir()) == ["run"] and is_results_dir(out)


def test_staged_dir_replaces_an_earlier_results_dir_only_when_done(tmp_path):
    out = results_dir(tmp_path / "run", "simulate")
    with pytest.raises(ValueError, match="bad trace"):
        with staged_dir(out, kind="simulate", replace=True) as staging:
            (staging / "config.json").write_text(json.dumps({"code_version": "2"}))
            raise ValueError("bad trace")
    assert json.loads((out / "config.json").read_text())["code_version"] == "x" and (out / "metrics.json").exists()
    with staged_dir(out, kind="simulate", replace=True) as staging:
        (staging / "config.json").write_text(json.dumps({"code_version": "2"}))
    assert json.loads((out / "config.json").read_text())["code_version"] == "2" and not (out / "metrics.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_staged_dir_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x")
    with pytest.raises(ValueError, match="not an arena-gym results directory"):
        with staged_dir(tmp_path / "mine", kind="simulate", replace=True):
            pass
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "x"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_refuses_another_commands_results_in_one_line(tmp_path, kind):
    other = next(k for k in sorted(KINDS) if k != kind)
    out = results_dir(tmp_path / "theirs", other)
    before = contents(out)
    for replace in (False, True):
        with pytest.raises(ValueError) as err:
            check_out_dir(out, kind=kind, replace=replace, resume=True)
        assert str(err.value) == f"--out {out}: holds {other} results, not {KINDS[kind]}; name a new directory"
        with pytest.raises(ValueError, match="name a new directory"):
            with staged_dir(out, kind=kind, replace=replace):
                pytest.fail("the block runs only when the directory may be written")
    assert contents(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["theirs"]


def test_own_finished_results_need_replace_and_are_replaced_when_complete(tmp_path):
    out = results_dir(tmp_path / "mine", "compare")
    with pytest.raises(ValueError) as err:
        check_out_dir(out, kind="compare")
    assert str(err.value) == (
        f"--out {out}: holds a comparison already; pass --replace to replace it, or name a new directory"
    )
    assert check_out_dir(out, kind="compare", replace=True) == out
    assert check_out_dir(out, kind="compare", resume=True) == out  # a writer that continues its own run
    with staged_dir(out, kind="compare", replace=True) as staging:
        assert (out / "metrics.json").exists()  # the earlier results stay until the new ones are complete
        (staging / "config.json").write_text(json.dumps({"code_version": "2", "kind": "compare"}))
    assert results_kind(out) == "compare" and not (out / "metrics.json").exists()


def test_results_that_record_no_kind_are_any_writers_only_with_replace(tmp_path):
    out = results_dir(tmp_path / "old")
    assert results_kind(out) is None
    for kind in KINDS:
        with pytest.raises(
            ValueError, match=f"holds results that record no kind; pass --replace if they are {KINDS[kind]}"
        ):
            check_out_dir(out, kind=kind, resume=True)
        assert check_out_dir(out, kind=kind, replace=True) == out
    assert check_out_dir(out) == out  # no kind given: any earlier results directory (an argparse type's check)
    with pytest.raises(ValueError, match="unknown results kind 'nope'"):
        check_out_dir(out, kind="nope")


def test_filled_dir_writes_in_place_when_new_and_aside_when_replacing(tmp_path):
    new = tmp_path / "new"
    with pytest.raises(KeyboardInterrupt):
        with filled_dir(new) as work:
            assert work == new and new.is_dir()
            (work / "checkpoint").write_text("1")
            raise KeyboardInterrupt
    assert (new / "checkpoint").read_text() == "1"  # an interrupted new run stays, to be resumed
    old = results_dir(tmp_path / "old", "train:es")
    with pytest.raises(KeyboardInterrupt):
        with filled_dir(old) as work:
            assert work != old and work.parent == tmp_path
            (work / "config.json").write_text(json.dumps({"code_version": "2", "kind": "train:es"}))
            raise KeyboardInterrupt
    assert json.loads((old / "config.json").read_text())["code_version"] == "x"  # an interrupted replacement: kept
    with filled_dir(old) as work:
        (work / "config.json").write_text(json.dumps({"code_version": "2", "kind": "train:es"}))
    assert json.loads((old / "config.json").read_text())["code_version"] == "2" and not (old / "metrics.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old"]


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


def test_a_replaced_results_dir_keeps_its_gitignore_unless_the_writer_wrote_one(tmp_path):
    out = results_dir(tmp_path / "run", "simulate")
    (out / ".gitignore").write_text("jobs.csv\n")
    with staged_dir(out, kind="simulate", replace=True) as staging:
        (staging / "config.json").write_text(json.dumps({"code_version": "2"}))
    assert (out / ".gitignore").read_text() == "jobs.csv\n" and not (out / "metrics.json").exists()
    with staged_dir(out, kind="simulate", replace=True) as staging:
        (staging / ".gitignore").write_text("timeline.csv\n")
    assert (out / ".gitignore").read_text() == "timeline.csv\n"
