"""Interrupt soak: stop ``python -m arena_gym train --method es`` at seeded random points while it loads its libraries.

Protocol: ``--stops`` runs of a two-iteration ES training (one pair, one window, one validation window, one
worker), each in a fresh folder, each sent SIGINT or SIGTERM (seeded, in turn at random) to its process group at a
seeded random point in ``--window`` seconds after its start: the span where torch, SB3 and highspy are imported.
Each stop is classed by the command line's contract:

* ``kept``: exit 130 (SIGINT) or 143 (SIGTERM), one line ``arena-gym ...: interrupted|terminated``, no traceback,
  nothing left beside ``--out``;
* ``finished``: exit 0, the signal came after the end;
* ``broken``: anything else (death by the signal itself, a traceback, a stray file, a ``.git/index.lock`` left in
  this checkout: the soak removes such a lock, which was absent before the stop, so that the next stop can run).

It prints the counts per signal and writes ``interrupts.json`` (config, seed, code version, machine load, every
stop, and the commit of the checkout whose command was stopped) into ``--out``. Exit code 0 when no stop was
``broken``, 1 otherwise. Needs ../shared/data (the windows). The command stopped is the one of the checkout this
file lies in (``PYTHONPATH``): a copy of it in an older checkout's ``benchmarks/`` measures that checkout.

Command::

    OMP_NUM_THREADS=1 python benchmarks/interrupt_soak.py --stops 160 --seed 0
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from arena_gym.harness.out_dirs import machine, shown_path
from arena_gym.outputs import code_version, git_commit, write_json

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
OUT = REPO / "benchmarks" / "results" / "reliability"
SETS = ("iterations=2", "pairs=1", "windows=1", "validation_limit=1", "workers=1")
CODES = {"SIGINT": 130, "SIGTERM": 143}


def index_lock() -> Path | None:
    """Where git would leave this checkout's index lock (None outside a git checkout)."""
    try:
        where = subprocess.run(
            ["git", "rev-parse", "--git-path", "index.lock"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return REPO / where


def _default_sigint() -> None:
    """In the child: Ctrl-C's default action, which a shell's background job would otherwise pass on as ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop_once(data: Path, signame: str, after_s: float, lock: Path | None) -> dict[str, Any]:
    """Run the training in a fresh folder, send ``signame`` to its group after ``after_s``; the stop's row."""
    sets = [*SETS, f"data_dir={data}"]
    argv = [sys.executable, "-m", "arena_gym", "train", "--method", "es", *[a for s in sets for a in ("--set", s)]]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    with tempfile.TemporaryDirectory(prefix="interrupt-soak-") as folder:
        run = subprocess.Popen(
            [*argv, "--out", "run"], cwd=folder, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint,
        )  # fmt: skip
        try:
            run.wait(timeout=after_s)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, getattr(signal, signame))
        _, err = run.communicate(timeout=120)
        stray = sorted(p.name for p in Path(folder).iterdir() if p.name != "run")
    if lock is not None and lock.exists():
        stray.append(".git/index.lock")
        lock.unlink()
    lines = [x for x in err.splitlines() if x.startswith("arena-gym ")]
    kept = (
        run.returncode == CODES[signame]
        and len(lines) == 1
        and lines[0].endswith(("interrupted", "terminated"))
        and "Traceback" not in err
        and not stray
    )
    outcome = "finished" if run.returncode == 0 and not stray else "kept" if kept else "broken"
    row = {"signal": signame, "after_s": after_s, "exit": run.returncode, "outcome": outcome, "stray": stray}
    return row | ({"stderr_tail": err[-4000:]} if outcome == "broken" else {})


def main(argv: list[str] | None = None) -> int:
    """Run the stops, print the counts, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stops", type=int, default=160, help="how many runs to stop")
    p.add_argument("--window", type=float, nargs=2, default=(0.5, 1.8), metavar=("FROM", "TO"), help="seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", type=Path, default=DATA, help="the shared data folder (the training's windows)")
    p.add_argument("--out", type=Path, default=OUT, help="folder for interrupts.json")
    args = p.parse_args(argv)
    if args.stops < 1 or not 0 < args.window[0] < args.window[1]:
        p.error(f"--stops must be >= 1 and --window 0 < FROM < TO, got {args.stops} and {args.window}")
    if not (args.data_dir / "itp").is_dir():
        p.error(f"--data-dir {args.data_dir} has no itp/ folder of traces")
    lock = index_lock()
    if lock is not None and lock.exists():
        p.error(f"{lock} exists: another git command is running here, or one was killed; end it or remove the file")
    rng = random.Random(args.seed)
    plan = [(rng.choice(sorted(CODES)), round(rng.uniform(*args.window), 3)) for _ in range(args.stops)]
    started, load_before = time.perf_counter(), os.getloadavg()
    rows = [stop_once(args.data_dir, s, t, lock) for s, t in tqdm(plan, desc="stops", unit="stop")]
    counts = Counter((r["signal"], r["outcome"]) for r in rows)
    for (signame, outcome), n in sorted(counts.items()):
        print(f"{signame}: {outcome} {n}")
    exits = Counter(r["exit"] for r in rows if r["outcome"] == "broken")
    print(f"broken: {sum(exits.values())} of {len(rows)} stops; their exit codes: {dict(exits)}")
    out = write_json(
        args.out / "interrupts.json",
        {
            "benchmark": "interrupt_soak",
            "config": {
                "stops": args.stops,
                "window_s": list(args.window),
                "command": ["train", "--method", "es", *SETS],
            },
            "seed": args.seed,
            "code_version": code_version(),
            "measured_commit": git_commit(REPO),  # the checkout whose command was stopped (PYTHONPATH)
            "machine": machine(load_before),
            "wall_s": time.perf_counter() - started,
            "counts": [{"signal": s, "outcome": o, "stops": n} for (s, o), n in sorted(counts.items())],
            "stops": rows,
        },
    )
    print(f"wrote {shown_path(out, REPO)}")
    return 1 if exits else 0


if __name__ == "__main__":
    sys.exit(main())
