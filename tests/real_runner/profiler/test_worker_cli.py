"""The profiling rank's command line: bad input ends with one ``error:`` line on stderr and exit code 2."""

import os
import subprocess
import sys
from pathlib import Path

from real_runner.profiler.settings import ProfileJob, ProfilerSettings

REPO = Path(__file__).resolve().parents[3]


def _run(module, args, env=None):
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path):
    module = "real_runner.profiler.worker"
    out = tmp_path / "out"
    out.mkdir()
    job = ProfileJob(("gpt__tiny",), ProfilerSettings.quick(), "cpu-2", 1, 2, (0, 1), str(out)).save(
        tmp_path / "j.json"
    )
    (tmp_path / "bad.json").write_text("{}")
    cases = {
        "the following arguments are required: --spec": ([], {}),
        "not a profiler job file": (["--spec", str(tmp_path / "bad.json")], {}),
        "rank 0 of 1 does not match the job's 2 devices": (["--spec", str(job)], {"WORLD_SIZE": "1"}),
        "rank 2 of 2 does not match": (["--spec", str(job)], {"RANK": "2", "WORLD_SIZE": "2"}),
        "invalid literal for int()": (["--spec", str(job)], {"RANK": "zero", "WORLD_SIZE": "2"}),
    }
    for message, (args, env) in cases.items():
        proc = _run(module, args, env)
        assert proc.returncode == 2, (message, proc.stderr)
        assert proc.stderr.startswith("error: ") and message in proc.stderr, (message, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not proc.stdout
    assert list(out.iterdir()) == []
