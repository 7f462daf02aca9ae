"""A directory given where a file is expected (a trace, ``sb3:DIR``, ``residual:DIR``) is reported as a directory in
one line, exit 2, not as a missing file."""

from __future__ import annotations

import pytest

from arena_gym.harness.cli import main


@pytest.mark.parametrize(
    ("policy", "trace", "message"),
    [
        ("fcfs", "DIR", "trace spec 'DIR': is a directory; a TRACE is a file (canonical, arena, itp formats)"),
        ("fcfs", "DIR?head=2", "trace spec 'DIR?head=2': is a directory; a TRACE is a file"),
        (
            "sb3:DIR",
            "synthetic:n_jobs=3",
            "model file DIR is a directory; name its model zip (e.g. DIR/best_model.zip)",
        ),
        ("residual:DIR", "synthetic:n_jobs=3", "residual weights DIR: is a directory; name the weights file"),
    ],
)
def test_a_directory_is_reported_as_one(tmp_path, capsys, policy: str, trace: str, message: str) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "best_model.zip").write_bytes(b"")
    argv = ["simulate", "--policy", policy, "--trace", trace, "--cluster", "tiny", "--out", str(tmp_path / "out")]
    code = main([a.replace("DIR", str(folder)) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"arena-gym simulate: error: {message.replace('DIR', str(folder))}")
    assert "\n" not in err and "no such file" not in err
    assert not (tmp_path / "out").exists()
