"""Benchmark: the command line as a user runs it, in CPU seconds of whole processes.

Each command runs as its own process (``python -m arena_gym ...``); its cost is the user + system
CPU seconds of that process and everything it waited for (``os.wait4``), the median of
``--runs`` runs (at least 5). The estimator's performance-table cache sits where the CLI puts
it by default (``$XDG_CACHE_HOME/arena-gym``, here a temporary ``XDG_CACHE_HOME``); an untimed
first run fills it (its cost is printed as the cold run), so every timed run is warm. Warm
includes Python's bytecode cache, as after any install: the commands run with
``PYTHONDONTWRITEBYTECODE`` unset and ``PYTHONPYCACHEPREFIX`` in the temporary folder (the
source tree is not written to), so the cold run compiles and the timed runs load bytecode;
``--no-bytecode-cache`` times them compiling every module of the project each run instead.

Goals:

* ``arena-gym --help``: under 0.3 s;
* ``simulate --policy fcfs`` on the full Philly trace (1,938 jobs) and ``arena-1280``, writing
  ``metrics.json`` and the CSVs (``--no-plots``): under 1.0 s;
* the same with the three PNG plots: under 1.5 s.

Usage::

    python benchmarks/bench_cli.py [--runs 5] [--data ../shared/data]

Needs the shared data folder (the Philly trace). CPU seconds are noisy on a loaded machine:
the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
PHILLY = "arena/traces/philly.csv"


@dataclass(frozen=True)
class Case:
    """One command line, its CPU goal (seconds) and the files it must write into ``--out``."""

    name: str
    args: tuple[str, ...]
    goal_s: float
    writes: tuple[str, ...] = ()


def cases(trace: Path) -> list[Case]:
    """The benchmarked commands."""
    sim = ("simulate", "--policy", "fcfs", "--trace", str(trace), "--cluster", "arena-1280")
    outputs = ("config.json", "metrics.json", "jobs.csv", "timeline.csv")
    return [
        Case("--help", ("--help",), 0.3),
        Case("simulate fcfs philly, --no-plots", (*sim, "--no-plots"), 1.0, outputs),
        Case("simulate fcfs philly, plots", sim, 1.5, (*outputs, "jct_cdf.png", "throughput.png", "queue.png")),
    ]


def run_process(args: list[str], env: dict[str, str], timeout_s: float = 600.0) -> tuple[float, float]:
    """Run ``args`` to completion; (user + system CPU seconds of it and its waited-for children, wall seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = t0 + timeout_s
    while True:  # wait4 gives this child's own rusage; poll so that a hung command cannot hang the benchmark
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            proc.kill()
            raise SystemExit(f"{' '.join(args)}: no result after {timeout_s:.0f} s")
        time.sleep(0.005)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}): {err.strip()[-500:]}")
    return usage.ru_utime + usage.ru_stime, wall


def measure(case: Case, runs: int, env: dict[str, str], scratch: Path) -> tuple[float, list[float], list[float]]:
    """(cold CPU s, warm CPU s per run, warm wall s per run) of one case."""
    cpu, wall = [], []
    cold = 0.0
    for i in range(runs + 1):
        args = [sys.executable, "-m", "arena_gym", *case.args]
        out = scratch / f"{case.name.split()[0].strip('-')}-{len(case.args)}-{i}"
        if case.writes:
            args += ["--out", str(out)]
        c, w = run_process(args, env)
        missing = [f for f in case.writes if not (out / f).is_file()]
        if missing:
            raise SystemExit(f"{case.name}: {', '.join(missing)} not written")
        if i == 0:
            cold = c  # fills the performance-table cache
        else:
            cpu.append(c)
            wall.append(w)
    return cold, cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (at least 5)")
    parser.add_argument("--data", type=Path, default=DATA, help="the shared data folder")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="compile the project's modules in every run (PYTHONDONTWRITEBYTECODE=1), as a checkout without __pycache__",
    )
    args = parser.parse_args()
    if args.runs < 5:
        parser.error("--runs must be at least 5")
    trace = args.data / PHILLY
    if not trace.is_file():
        raise SystemExit(f"needs the Philly trace {trace} (the shared data folder)")
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        scratch = Path(tmp)
        env = {
            **os.environ,
            "XDG_CACHE_HOME": str(scratch / "cache"),
            "OMP_NUM_THREADS": "1",
            "WANDB_MODE": "disabled",
            "MPLBACKEND": "Agg",
        }
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("PYTHONPYCACHEPREFIX", None)
        if args.no_bytecode_cache:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        else:
            env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
        load = os.getloadavg()[0]
        print(
            f"CPU seconds (user + sys) of whole processes, median of {args.runs} warm runs "
            f"({'without' if args.no_bytecode_cache else 'with'} a bytecode cache); "
            f"load average {load:.2f} on {os.cpu_count()} CPUs"
        )
        print(f"{'command':36s} {'median':>7s} {'min':>6s} {'max':>6s} {'wall':>6s} {'cold':>6s} {'goal':>6s}  verdict")
        failed = 0
        for case in cases(trace):
            cold, cpu, wall = measure(case, args.runs, env, scratch)
            med = statistics.median(cpu)
            ok = med < case.goal_s
            failed += not ok
            print(
                f"{case.name:36s} {med:7.2f} {min(cpu):6.2f} {max(cpu):6.2f} {statistics.median(wall):6.2f} "
                f"{cold:6.2f} {case.goal_s:6.2f}  {'met' if ok else 'MISSED'} ({med / case.goal_s:.2f}x goal)"
            )
        print(f"{len(cases(trace)) - failed} of {len(cases(trace))} goals met")


if __name__ == "__main__":
    main()
