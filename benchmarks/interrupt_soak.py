"""Interrupt soak: stop ``python -m arena_gym train --method es`` at seeded random points while it loads its libraries.

Protocol: ``--stops`` planned stops, each a signal (SIGINT or SIGTERM, a seeded random choice) and a seeded random
point in ``--window`` seconds after the start: the span where it imports its libraries (highspy, matplotlib; torch
and SB3 where the ES method imports them). Each planned stop is run once per ``--checkout`` (default: this one),
their order alternating from one stop to the next: a
two-iteration ES training (one pair, one window, one validation window, one worker) of that checkout (on
``PYTHONPATH``), in a fresh folder, sent the signal to its process group at the point. Each stop is classed by the
command line's contract:

* ``kept``: exit 130 (SIGINT) or 143 (SIGTERM), one line ``arena-gym ...: interrupted|terminated``, no traceback,
  nothing left beside ``--out``;
* ``finished``: exit 0, the signal came after the end;
* ``broken``: anything else (death by the signal itself, a traceback, a stray file, a ``.git/index.lock`` left in
  the checkout: the soak removes such a lock, which was absent before the stop, so that the next stop can run).

Per checkout it prints the outcomes per signal and how long the command took to exit after the signal (median,
p95 and max over the stops it reached), and writes ``interrupts.json`` (config, seed, code version, machine load,
every stop with its checkout's commit) into ``--out``. Exit code 0 when no stop of the last checkout was
``broken``, 1 otherwise. Needs ../shared/data (the windows).

Command (``git worktree add ../before COMMIT`` makes an older checkout to set beside this one)::

    OMP_NUM_THREADS=1 python benchmarks/interrupt_soak.py --stops 160 --seed 0 [--checkout ../before --checkout .]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
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


def index_lock(checkout: Path) -> Path | None:
    """Where git would leave ``checkout``'s index lock (None outside a git checkout)."""
    try:
        where = subprocess.run(
            ["git", "rev-parse", "--git-path", "index.lock"], cwd=checkout, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return checkout / where


def _default_sigint() -> None:
    """In the child: Ctrl-C's default action, which a shell's background job would otherwise pass on as ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def stop_once(checkout: Path, lock: Path | None, data: Path, signame: str, after_s: float) -> dict[str, Any]:
    """Run ``checkout``'s training in a fresh folder, send ``signame`` to its group after ``after_s``; the stop's row
    (``lock``: where a git command would leave the checkout's index lock)."""
    sets = [*SETS, f"data_dir={data}"]
    argv = [sys.executable, "-m", "arena_gym", "train", "--method", "es", *[a for s in sets for a in ("--set", s)]]
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    with tempfile.TemporaryDirectory(prefix="interrupt-soak-") as folder:
        run = subprocess.Popen(
            [*argv, "--out", "run"], cwd=folder, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint,
        )  # fmt: skip
        sent: float | None = None
        try:
            run.wait(timeout=after_s)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, getattr(signal, signame))
            sent = time.perf_counter()
        _, err = run.communicate(timeout=120)
        to_exit = None if sent is None else time.perf_counter() - sent
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
    row["signal_to_exit_s"] = to_exit
    return row | ({"stderr_tail": scrubbed(err[-4000:], checkout)} if outcome == "broken" else {})


def scrubbed(text: str, checkout: Path) -> str:
    """``text`` with this machine's folders named by role: the checkout, the environment, Python, the home folder."""
    for folder, name in ((checkout, "<checkout>"), (sys.prefix, "<env>"), (sys.base_prefix, "<python>")):
        text = text.replace(str(folder), name)
    return text.replace(str(Path.home()), "~")


def main(argv: list[str] | None = None) -> int:
    """Run the stops, print the counts, write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stops", type=int, default=160, help="how many runs to stop")
    p.add_argument("--window", type=float, nargs=2, default=(0.5, 1.8), metavar=("FROM", "TO"), help="seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", type=Path, default=DATA, help="the shared data folder (the training's windows)")
    p.add_argument("--out", type=Path, default=OUT, help="folder for interrupts.json")
    p.add_argument("--checkout", type=Path, action="append", help="a checkout to stop (repeatable; default: this one)")
    args = p.parse_args(argv)
    if args.stops < 1 or not 0 < args.window[0] < args.window[1]:
        p.error(f"--stops must be >= 1 and --window 0 < FROM < TO, got {args.stops} and {args.window}")
    if not (args.data_dir / "itp").is_dir():
        p.error(f"--data-dir {args.data_dir} has no itp/ folder of traces")
    checkouts = [c.resolve() for c in args.checkout or [REPO]]
    locks = [index_lock(c) for c in checkouts]
    for checkout, lock in zip(checkouts, locks):
        if not (checkout / "arena_gym" / "__main__.py").is_file():
            p.error(f"--checkout {checkout} is not a checkout of this project (no arena_gym/__main__.py)")
        if lock is not None and lock.exists():
            p.error(f"{lock} exists: a git command is running in {checkout}, or one was killed; end it or remove it")
    rng = random.Random(args.seed)
    plan = [(rng.choice(sorted(CODES)), round(rng.uniform(*args.window), 3)) for _ in range(args.stops)]
    started, load_before = time.perf_counter(), os.getloadavg()
    commits = [git_commit(c) for c in checkouts]
    rows: list[dict[str, Any]] = []
    for i, (signame, after_s) in enumerate(tqdm(plan, desc="stops", unit="stop")):
        for k in range(len(checkouts)) if i % 2 == 0 else reversed(range(len(checkouts))):
            row = stop_once(checkouts[k], locks[k], args.data_dir, signame, after_s)
            rows.append({"checkout": k, "commit": commits[k], **row})
    summaries = [summary(str(c), commits[k], [r for r in rows if r["checkout"] == k]) for k, c in enumerate(checkouts)]
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
            "machine": machine(load_before),
            "wall_s": time.perf_counter() - started,
            "checkouts": summaries,
            "stops": rows,
        },
    )
    print(f"wrote {shown_path(out, REPO)}")
    return 1 if summaries[-1]["broken"] else 0


def summary(label: str, commit: str | None, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One checkout's outcomes per signal, its broken stops' exit codes and its signal-to-exit times; printed."""
    counts = Counter((r["signal"], r["outcome"]) for r in rows)
    waits = sorted(r["signal_to_exit_s"] for r in rows if r["signal_to_exit_s"] is not None)
    exits = Counter(r["exit"] for r in rows if r["outcome"] == "broken")
    print(f"{label} (commit {commit}):")
    for (signame, outcome), n in sorted(counts.items()):
        print(f"  {signame}: {outcome} {n}")
    latency = None
    if waits:  # none when every run finished before its signal
        latency = {"median": statistics.median(waits), "p95": waits[int(0.95 * (len(waits) - 1))], "max": waits[-1]}
        print("  signal to exit: median {median:.2f} s, p95 {p95:.2f} s, max {max:.2f} s".format(**latency))
    print(f"  broken: {sum(exits.values())} of {len(rows)} stops; their exit codes: {dict(exits)}")
    return {
        "commit": commit,
        "counts": [{"signal": s, "outcome": o, "stops": n} for (s, o), n in sorted(counts.items())],
        "broken": sum(exits.values()),
        "broken_exit_codes": {str(k): v for k, v in exits.items()},
        "signal_to_exit_s": latency,
    }


if __name__ == "__main__":
    sys.exit(main())
