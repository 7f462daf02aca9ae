"""Run the README's five-minute tour as written, in a fresh copy of the repository, and time it.

Usage: ``python scripts/run_tour.py [--keep DIR]`` (DIR new or empty). The tour's bash block (the first one under
"## A five-minute tour") is split into commands (backslash continuations joined, comments and
``source``/``export`` lines left to this script: it runs every command with this interpreter's
``arena-gym``, ``python -m arena_gym``, and ``OMP_NUM_THREADS=1``). The copy holds the files git
tracks or would track (a fresh clone's, plus uncommitted work), so nothing of this checkout's
``results/`` or caches helps. Prints each command before it starts and its exit code and seconds
when it ends; the command's own output and progress bars stream to stderr as it runs. Exits 1 on
the first failure. ``tests/scripts/test_run_tour.py`` (slow) runs it.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TextIO

from arena_gym.harness.cli import OneLineParser, guarded

REPO = Path(__file__).resolve().parents[1]
PROG = "run_tour"


def tour_commands(readme: str) -> list[str]:
    """The commands of the README's tour block, one string each."""
    section = readme.split("## A five-minute tour", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in joined.splitlines():
        line = line.split("  #", 1)[0].strip()
        if not line or line.startswith(("#", "source ", "export ")):
            continue
        out.append(line.split("; export", 1)[0].strip())
    return out


def fresh_copy(dest: Path) -> Path:
    """The files of a clone (tracked, and untracked ones git does not ignore) copied to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        src = REPO / name
        if src.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    return dest


def stream(argv: list[str], cwd: Path, env: dict[str, str], sink: TextIO) -> int:
    """Run ``argv``, copying its stdout and stderr to ``sink`` as they come (bars included); its exit code."""
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as child:
        assert child.stdout is not None
        while chunk := os.read(child.stdout.fileno(), 4096):
            sink.write(chunk.decode(errors="replace"))
            sink.flush()
        return child.wait()


def run_tour(where: Path) -> int:
    """Run every tour command in ``where``; 0 when all exit 0."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "PYTHONPATH": ""}
    total = 0.0
    for command in tour_commands((where / "README.md").read_text()):
        argv = shlex.split(command)
        if argv[0] == "arena-gym":
            argv = [sys.executable, "-m", "arena_gym", *argv[1:]]
        print(f"starting: {command}", flush=True)
        start = time.perf_counter()
        code = stream(argv, where, env, sys.stderr)
        seconds = time.perf_counter() - start
        total += seconds
        print(f"{code:3d} {seconds:7.1f} s  {command}", flush=True)
        if code != 0:
            return 1
    print(f"tour: every command exited 0, {total:.0f} s in all")
    return 0


def keep_dir(text: str) -> Path:
    """argparse type of ``--keep``: a new or empty folder (the copy must not mix with other files)."""
    path = Path(text)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise argparse.ArgumentTypeError(f"{text}: exists and is not an empty folder; name a new one")
    return path


def main(argv: list[str] | None = None) -> int:
    """Copy, run, report; bad input -> one line and exit code 2, Ctrl-C -> 130."""
    parser = OneLineParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=keep_dir, default=None, help="run in this new (or empty) folder and keep it")
    args = parser.parse_args(argv)
    return guarded(PROG, lambda: tour(args.keep))


def tour(keep: Path | None) -> int:
    """The tour in a fresh copy: in ``keep`` (kept), else in a temporary folder."""
    if keep is not None:
        return run_tour(fresh_copy(keep))
    with tempfile.TemporaryDirectory() as tmp:
        return run_tour(fresh_copy(Path(tmp) / "arena-gym"))


if __name__ == "__main__":
    sys.exit(main())
