"""Result files: written atomically, as pandas writes them."""

from __future__ import annotations

import math
import shutil
import subprocess

import pytest

from arena_gym.outputs import atomic_write, git_commit, write_rows


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "sub" / "x.txt"
    atomic_write(target, lambda tmp: tmp.write_text("one"))
    assert target.read_text() == "one" and oct(target.stat().st_mode & 0o777) == "0o644"

    def broken(tmp):
        tmp.write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, broken)
    assert target.read_text() == "one" and sorted(p.name for p in target.parent.iterdir()) == ["x.txt"]
    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "made" / "y.txt", lambda tmp: (_ for _ in ()).throw(RuntimeError("boom")))
    assert not (tmp_path / "made").exists()  # the parent it created is removed again


def test_write_rows_writes_what_pandas_writes(tmp_path):
    pd = pytest.importorskip("pandas")
    columns = ["id", "x", "maybe", "flag", "n"]
    rows = [
        ["a", 1.5, None, True, 3],
        ["b,c", math.nan, 0.1 + 0.2, False, 0],
        ['q"d', 1e300, -0.0, None, -7],
    ]
    write_rows(tmp_path / "ours.csv", columns, rows)
    pd.DataFrame(rows, columns=columns).to_csv(tmp_path / "pandas.csv", index=False)
    assert (tmp_path / "ours.csv").read_bytes() == (tmp_path / "pandas.csv").read_bytes()
    assert (tmp_path / "ours.csv").read_text().splitlines()[2] == '"b,c",,0.30000000000000004,False,0'


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_commit_names_the_commit_and_changes_and_writes_nothing(tmp_path):
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    assert git_commit(tmp_path) is None  # no commit yet
    (tmp_path / "a.txt").write_text("one")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "one")
    head = git("rev-parse", "HEAD")[:7]
    (tmp_path / "untracked.txt").write_text("not part of the commit")
    assert git_commit(tmp_path) == head
    index = tmp_path / ".git" / "index"
    before = index.stat().st_mtime_ns
    (tmp_path / "a.txt").write_text("two")
    assert git_commit(tmp_path) == f"{head}.dirty"
    (tmp_path / "a.txt").write_text("one")  # the same content again, with a new time stamp
    assert git_commit(tmp_path) == head
    assert index.stat().st_mtime_ns == before  # the index was not refreshed: no index.lock to leave behind
    assert git_commit(tmp_path.parent / "no-such-folder") is None
