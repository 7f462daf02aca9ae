"""Chaos soak of the live runner: ``arena-gym deploy`` on ``cpu-2`` under random faults, then a step audit.

Protocol
--------
1. A trace of small live jobs (``live:n_jobs=N,work=W,span_s=S,max_gpus=2``: W is ``--work``, default 1; N = 4 a
   minute, arriving over all of ``--minutes`` (S is that over N / 12: the trace repeats its menu of 12 in consecutive
   spans), more work than the two devices do meanwhile, so they stay busy and the faults run their whole schedule) is
   deployed with
   ``python -m arena_gym deploy --policy arena --testbed cpu-2 --no-sim --no-plots --checkpoint-every 5
   --stale-timeout 15 --max-retries 100`` (the retries are the soak's to spend: every fault costs one).
2. A seeded fault schedule (:func:`real_runner.live.chaos.fault_schedule`: the first fault after 20 s, then one every
   15-35 s, kinds in shuffled rounds of four) injects, until ``--minutes`` have passed:

   * ``rank_kill``: ``kill -9`` of a random rank process (of any job);
   * ``controller_kill``: ``kill -9`` of the controller, then ``deploy --resume DIR`` (its workers run on meanwhile);
   * ``rank_stop``: ``SIGSTOP`` of a random rank for 3-30 s, then ``SIGCONT`` (beyond the 15 s stale timeout the
     controller takes it for hung and relaunches the job);
   * ``disk_full``: the checkpoint folder of every job with a rank running is full for 5-20 s, then freed.

   The full disk is real: the soak runs in a private mount namespace (it re-executes itself under
   ``unshare --user --map-root-user --mount``, which needs no root where user namespaces are enabled), and mounts a
   512 MiB tmpfs on each job's checkpoint folder ``DIR/run/jobs/JOB/ckpt`` as soon as the job's folder appears
   (before its first checkpoint; unmounted once the job is done); the controller, the resumes and every rank live in
   that namespace. The fault
   fills the tmpfs with a file until ``write`` fails with ENOSPC, so the ranks' DCP saves and manifest writes get
   ``OSError: [Errno 28] No space left on device``; the file is removed after the hold. The journal, the progress
   channels and the logs stay on the real disk. Where ``unshare`` is unavailable the soak runs without
   ``disk_full`` and says so.
3. After ``--minutes`` no more faults come; the deployment runs to its end (a controller that exits without
   finishing, e.g. a crash, is resumed again and reported as a finding).
4. The audit (:func:`real_runner.live.audit.audit_deployment`) reads the journal and every job's progress channel:
   every job finished, every loss trajectory continued across each recovery, the kept steps of every job are exactly
   1..target (strictly increasing, no gap, no repeat), every checkpoint reported is journaled, every FAIL names the
   step its relaunch resumed from, the journal's progress of a job goes back only at a FAIL, and every record was
   applied; it counts steps lost and counted twice (steps re-run after a rollback are discarded, not counted).

It prints the faults injected per kind, the recoveries (relaunches journaled as FAIL, controller resumes), the jobs
finished, trajectories continued and steps lost / counted twice, and writes ``chaos_soak_seedS_Mmin.json`` (config,
seed, code version, machine load, schedule, figures, per-job audit) into ``--out`` (default
``benchmarks/results/reliability/``); the deployment itself goes to ``--out/chaos_soak_seedS_Mmin/``. Exit code 0
when every check passed, 1 otherwise.

Commands::

    OMP_NUM_THREADS=1 python benchmarks/chaos_soak.py --minutes 30 --seed 0   # the full soak
    OMP_NUM_THREADS=1 python benchmarks/chaos_soak.py --minutes 3 --seed 0 --work 2   # the slow test's version
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from this checkout, not whichever one is installed
    sys.path.insert(0, str(REPO))

from arena_gym.core.oplog import Fail  # noqa: E402
from arena_gym.harness.out_dirs import machine  # noqa: E402
from arena_gym.outputs import code_version, write_json  # noqa: E402
from real_runner.launchers.local import find_processes  # noqa: E402
from real_runner.live.audit import StepAudit, audit_deployment, summary  # noqa: E402
from real_runner.live.chaos import KINDS, ChaosConfig, Fault, fault_schedule, pick  # noqa: E402
from real_runner.live.journal import Journal  # noqa: E402

IN_NAMESPACE = "ARENA_SOAK_NAMESPACE"
TMPFS_SIZE = "512m"
FILLER = ".soak-disk-full"


def trace_spec(minutes: float, seed: int, work: float = 1.0) -> str:
    """The live trace for a run of ``minutes``: four jobs a minute arriving over all of it, each iteration count
    scaled by ``work``. It must hold more work than the two devices do in that time under the faults, or faults find
    nothing to hit: with 90 % of it and ``work=0.8``, a 30-minute run ran out of work at 26.9 minutes (7.7 steps/s);
    with ``work=1`` a 3-minute run on an idle host found no rank running at 112, 128 and 149 s and skipped those 3 of
    its 7 faults (a short run's trace has gaps between its arrivals; ``work=2`` fills them)."""
    n_jobs = max(6, round(minutes * 4))
    span_s = minutes * 60 * 12 / n_jobs  # the trace repeats its menu of 12 jobs in consecutive spans
    return f"live:n_jobs={n_jobs},work={work:g},span_s={span_s:.4g},max_gpus=2,seed={seed}"


class Soak:
    """One soak run: the controller, the faults, the checkpoint filesystems."""

    def __init__(self, out: Path, minutes: float, seed: int, disk: bool) -> None:
        self.out, self.minutes, self.seed, self.disk = out, minutes, seed, disk
        self.jobs_dir = out / "run" / "jobs"
        self.controller: subprocess.Popen | None = None
        self.controllers = 0
        self.injected: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()
        self.crashes: list[str] = []
        self.resumes = 0
        self.mounted: set[Path] = set()
        self.released: set[Path] = set()  # unmounted after the job finished
        self.unmounted: set[str] = set()
        self.stopped: set[int] = set()
        self._stop = threading.Event()
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}

    # ---------------------------------------------------------------- controller
    def start(self, *args: str) -> None:
        self.controllers += 1
        log = open(self.out.parent / f"{self.out.name}.controller{self.controllers}.log", "w")
        self.controller = subprocess.Popen(
            [sys.executable, "-m", "arena_gym", "deploy", *args],
            cwd=REPO,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        log.close()

    def first(self, trace: str) -> None:
        self.start(
            "--policy", "arena", "--testbed", "cpu-2", "--trace", trace, "--out", str(self.out), "--seed",
            str(self.seed), "--no-plots", "--no-sim", "--checkpoint-every", "5", "--stale-timeout", "15",
            "--max-retries", "100", "--status-every", "30",
        )  # fmt: skip

    def resume(self) -> None:
        self.resumes += 1
        self.start("--resume", str(self.out), "--status-every", "30")

    def controller_log_tail(self) -> str:
        path = self.out.parent / f"{self.out.name}.controller{self.controllers}.log"
        lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        return " | ".join(lines[-3:])

    def check_controller(self) -> bool:
        """True while the controller runs; a controller that ended unfinished is a finding, and is resumed."""
        assert self.controller is not None
        code = self.controller.poll()
        if code is None:
            return True
        if self.finished():
            return False
        if code == 2 or len(self.crashes) >= 10:  # refused its input, or keeps crashing: nothing to resume
            raise SystemExit(f"controller {self.controllers} exited {code}: {self.controller_log_tail()}")
        self.crashes.append(f"controller {self.controllers} exited {code} unfinished: {self.controller_log_tail()}")
        print(f"  finding: {self.crashes[-1]}", flush=True)
        self.resume()
        return True

    def finished(self) -> bool:
        if not (self.out / Journal.FILENAME).is_file():
            return False
        journal = Journal(self.out / Journal.FILENAME)
        try:
            return bool(journal.meta("status") == "finished")
        finally:
            journal.close()

    # ---------------------------------------------------------------- checkpoint filesystems
    def watch_folders(self) -> None:
        """Mount a tmpfs on each job's checkpoint folder as soon as the job's folder appears; unmount it once the job
        is done and none of its ranks runs (nothing reads a finished job's checkpoints; the memory goes back)."""
        last_sweep = time.monotonic()
        while not self._stop.is_set():
            if time.monotonic() - last_sweep > 5.0:
                last_sweep = time.monotonic()
                running = self.running_jobs()
                for ckpt in sorted(self.mounted - self.released):
                    progress = ckpt.parent / "progress.jsonl"
                    if (
                        ckpt.parent.name not in running
                        and progress.is_file()
                        and b'"event":"done"' in progress.read_bytes()
                    ):
                        if subprocess.run(["umount", "--lazy", str(ckpt)], capture_output=True).returncode == 0:
                            self.released.add(ckpt)
            if self.jobs_dir.is_dir():
                for job_dir in sorted(self.jobs_dir.iterdir()):
                    ckpt = job_dir / "ckpt"
                    if ckpt in self.mounted or job_dir.name in self.unmounted or not job_dir.is_dir():
                        continue
                    ckpt.mkdir(exist_ok=True)
                    if any(ckpt.iterdir()):  # a checkpoint came first: leave it on the real disk
                        self.unmounted.add(job_dir.name)
                        continue
                    done = subprocess.run(
                        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "soak-ckpt", str(ckpt)],
                        capture_output=True,
                        text=True,
                    )
                    if done.returncode == 0:
                        self.mounted.add(ckpt)
                    else:
                        self.unmounted.add(job_dir.name)
            self._stop.wait(0.1)

    # ---------------------------------------------------------------- faults
    def ranks(self) -> list[int]:
        return sorted(find_processes(str(self.jobs_dir)))

    def running_jobs(self) -> set[str]:
        jobs = set()
        for pid in self.ranks():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            rest = cmd.split(str(self.jobs_dir) + "/", 1)
            if len(rest) == 2:
                jobs.add(rest[1].split("/", 1)[0])
        return jobs

    def inject(self, fault: Fault) -> str:
        """Inject one fault; a phrase saying what was done."""
        if fault.kind == "controller_kill":
            assert self.controller is not None
            self.controller.kill()
            self.controller.wait(timeout=60)
            self.resume()
            return f"controller {self.controllers - 1} killed; resumed"
        if fault.kind == "disk_full":
            if not self.disk:
                return "skipped (no private mount namespace)"
            full = [c for c in sorted(self.mounted - self.released) if c.parent.name in self.running_jobs()]
            if not full:
                return "skipped (no job running on a checkpoint tmpfs)"
            for ckpt in full:
                fill(ckpt / FILLER)
            time.sleep(fault.hold_s)
            for ckpt in full:
                (ckpt / FILLER).unlink(missing_ok=True)
            return f"checkpoint folders of {', '.join(c.parent.name for c in full)} full for {fault.hold_s:.0f} s"
        pid = pick(self.ranks(), fault.pick)
        if pid is None:
            return "skipped (no rank running)"
        try:
            if fault.kind == "rank_kill":
                os.kill(pid, signal.SIGKILL)
                return f"rank pid {pid} killed"
            os.kill(pid, signal.SIGSTOP)
            self.stopped.add(pid)
            time.sleep(fault.hold_s)
            os.kill(pid, signal.SIGCONT)
            self.stopped.discard(pid)
            return f"rank pid {pid} stopped for {fault.hold_s:.0f} s"
        except ProcessLookupError:
            return f"skipped (rank pid {pid} gone)"

    def cleanup(self) -> None:
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        for ckpt in self.mounted - self.released:
            (ckpt / FILLER).unlink(missing_ok=True)

    # ---------------------------------------------------------------- the run
    def run(self, faults: list[Fault], trace: str, drain_s: float) -> None:
        if self.disk:  # only inside the private mount namespace: never mount on the real system
            threading.Thread(target=self.watch_folders, daemon=True).start()
        t_start = time.monotonic()
        self.first(trace)
        try:
            for fault in faults:
                while time.monotonic() - t_start < fault.t:
                    if not self.check_controller():
                        break
                    time.sleep(0.5)
                if not self.check_controller():
                    print(f"[{time.monotonic() - t_start:6.0f} s] the deployment finished; no more faults", flush=True)
                    break
                what = self.inject(fault)
                (self.skipped if what.startswith("skipped") else self.injected)[fault.kind] += 1
                print(f"[{time.monotonic() - t_start:6.0f} s] {fault.kind}: {what}", flush=True)
            deadline = time.monotonic() + drain_s
            while self.check_controller():
                if time.monotonic() > deadline:
                    raise SystemExit(f"the deployment did not finish within {drain_s:.0f} s after the faults ended")
                time.sleep(1.0)
        finally:
            self.cleanup()
            self._stop.set()
            if self.controller is not None and self.controller.poll() is None:
                self.controller.send_signal(signal.SIGINT)
                self.controller.wait(timeout=120)


def fill(path: Path) -> None:
    """Write ``path`` until its filesystem is full (ENOSPC)."""
    chunk = b"\0" * (1 << 20)
    with open(path, "wb", buffering=0) as fh:
        for size in (1 << 20, 4096, 1):
            while True:
                try:
                    fh.write(chunk[:size])
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
                    break


def relaunches(out: Path) -> int:
    """FAIL operations in the journal: relaunches after a failure."""
    journal = Journal(out / Journal.FILENAME)
    try:
        return sum(isinstance(op, Fail) for op in journal.ops())
    finally:
        journal.close()


def reexec_in_namespace(argv: list[str]) -> None:
    """Re-execute under a private mount namespace when one can be made (else return)."""
    if os.environ.get(IN_NAMESPACE) or shutil.which("unshare") is None:
        return
    probe = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]
    if subprocess.run([*probe, "true"], capture_output=True).returncode != 0:
        return
    os.environ[IN_NAMESPACE] = "1"
    os.execvp("unshare", [*probe, sys.executable, str(Path(__file__).resolve()), *argv])


def main(argv: list[str] | None = None) -> int:
    """Run the soak; 0 when every check passed."""
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="how long faults are injected (default 30)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault schedule and the deployment")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "reliability")
    parser.add_argument("--drain-minutes", type=float, default=None, help="how long the jobs may take to finish "
                        "after the faults end (default: 10 + the run's minutes)")  # fmt: skip
    parser.add_argument("--work", type=float, default=1.0, help="scale of every job's iterations (default 1)")
    args = parser.parse_args(argv)
    if not 0 < args.work <= 100:
        parser.error(f"--work must be in (0, 100], got {args.work}")
    reexec_in_namespace(argv)
    disk = bool(os.environ.get(IN_NAMESPACE))
    load_before = os.getloadavg()
    name = f"chaos_soak_seed{args.seed}_{args.minutes:g}min"
    out = (args.out / name).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    config = ChaosConfig(
        duration_s=args.minutes * 60, kinds=KINDS if disk else tuple(k for k in KINDS if k != "disk_full")
    )
    faults = fault_schedule(config, args.seed)
    trace = trace_spec(args.minutes, args.seed, args.work)
    print(f"chaos soak: {args.minutes:g} min of faults on cpu-2, seed {args.seed}, trace {trace}, {len(faults)} faults "
          f"scheduled; full disk {'on tmpfs checkpoint folders' if disk else 'unavailable (no unshare)'}; in {out}",
          flush=True)  # fmt: skip
    soak = Soak(out, args.minutes, args.seed, disk)
    t0 = time.monotonic()
    soak.run(faults, trace, 60 * (args.drain_minutes if args.drain_minutes is not None else 10 + args.minutes))
    wall = time.monotonic() - t0
    audits = audit_deployment(out)
    totals = dict(summary(audits))
    fails = relaunches(out)
    ok = (
        totals["jobs"] > 0
        and totals["finished"] == totals["jobs"]
        and totals["trajectories_ok"] == totals["jobs"]
        and totals["accounted_ok"] == totals["jobs"]
        and totals["steps_lost"] == 0
        and totals["steps_doubled"] == 0
    )
    print(f"faults injected: {sum(soak.injected.values())} ("
          + ", ".join(f"{k} {soak.injected[k]}" for k in KINDS)
          + f"); skipped (nothing to hit): {sum(soak.skipped.values())}", flush=True)  # fmt: skip
    print(f"recoveries: {fails} relaunches after a failure (FAIL in the journal), {soak.resumes} controller resumes "
          f"({len(soak.crashes)} after an unplanned controller exit)")  # fmt: skip
    print(f"jobs finished: {totals['finished']}/{totals['jobs']}; trajectories continued: "
          f"{totals['trajectories_ok']}/{totals['jobs']}; steps accounted exactly once: {totals['accounted_ok']}/"
          f"{totals['jobs']} jobs, {totals['steps_kept']}/{totals['steps_target']} steps kept, "
          f"{totals['steps_lost']} lost, {totals['steps_doubled']} counted twice "
          f"({totals['steps_rerun']} re-run after a rollback, discarded as they should be)")  # fmt: skip
    for crash in soak.crashes:
        print(f"  finding: {crash}")
    for audit in audits:
        if not audit.ok:
            print(f"  job {audit.job_id}: {'; '.join(audit.problems)}")
    print(f"wall time {wall / 60:.1f} min; {'PASS' if ok else 'FAIL'}")
    result: dict[str, Any] = {
        "benchmark": "chaos_soak",
        "config": {
            "minutes": args.minutes,
            "trace": trace,
            "testbed": "cpu-2",
            "policy": "arena",
            "chaos": {**config.__dict__},
            "tmpfs_size": TMPFS_SIZE if disk else None,
        },  # fmt: skip
        "seed": args.seed,
        "code_version": code_version(),
        "machine": machine(load_before),
        "wall_s": wall,
        "schedule": [f.__dict__ for f in faults],
        "faults_injected": dict(soak.injected),
        "faults_skipped": dict(soak.skipped),
        "recoveries": {"relaunches": fails, "resumes": soak.resumes, "unplanned_controller_exits": soak.crashes},
        "checkpoint_tmpfs": {
            "mounted": len(soak.mounted),
            "unmounted_when_done": len(soak.released),
            "not_mounted": sorted(soak.unmounted),
        },
        "totals": totals,
        "ok": ok,
        "jobs": [_audit_dict(a) for a in audits],
        "deployment": out.name,  # beside this file, in --out
    }
    path = write_json(args.out / f"{name}.json", result)
    print(f"results: {path}")
    return 0 if ok else 1


def _audit_dict(audit: StepAudit) -> dict[str, Any]:
    return {**audit.__dict__, "problems": list(audit.problems)}


if __name__ == "__main__":
    sys.exit(main())
