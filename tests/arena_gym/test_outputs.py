"""Result files: written atomically, as pandas writes them."""

from __future__ import annotations

import math

import pytest

from arena_gym.outputs import atomic_write, write_rows


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
