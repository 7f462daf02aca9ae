"""``arena-gym estimate profile``: profile a testbed's devices into ``PROFILE.json`` (CLI code: it prints).

Bad input (an unknown testbed or model, an unwritable output, a bad setting) ends with one line and
exit code 2 before anything runs; a failing profiling rank ends with one line and exit code 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from arena_gym.harness.cli.common import text_type
from arena_gym.harness.out_dirs import check_out_file
from arena_gym.harness.runlock import RunLock
from arena_gym.types import ModelRef

#: Steps a direct measurement of one plan runs (warm-up included), for the cost comparison.
DIRECT_STEPS = 14
#: Seconds between two progress lines while a profile runs.
REPORT_EVERY_S = 10.0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class _Reporter:
    """Progress lines on stderr while a profile runs: the phase and round rank 0 reached, the time so far and an
    estimate of the time left (the a priori estimate until a tenth of the work is done, then extrapolated)."""

    def __init__(self, phases: dict[str, float]) -> None:
        self.phases, self.total = phases, sum(phases.values())
        self.start = self.last = time.monotonic()
        self.phase, self.done, self.of = "starting the ranks", 0, 0

    def progress(self, phase: str, done: int, total: int) -> None:
        self.phase, self.done, self.of = phase, done, total

    def fraction(self) -> float:
        """Share of the a priori time behind us: start-up, then compute (layers ... data), comm, grouped."""
        order = ["startup", "compute", "comm", "grouped"]
        group = {"comm": "comm", "grouped": "grouped"}.get(self.phase, "compute" if self.of else "startup")
        behind = sum(self.phases.get(p, 0.0) for p in order[: order.index(group)])
        within = self.phases.get(group, 0.0) * (self.done / self.of if self.of else 0.0)
        return min(1.0, (behind + within) / max(self.total, 1e-9))

    def tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last < REPORT_EVERY_S:
            return
        self.last = now
        elapsed, f = now - self.start, self.fraction()
        left = elapsed * (1 - f) / f if f >= 0.1 else max(self.total - elapsed, 0.0)
        where = f"{self.phase} {self.done}/{self.of}" if self.of else self.phase
        print(
            f"profile: {where}, {_duration(elapsed)} so far, about {_duration(left)} left", file=sys.stderr, flush=True
        )


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``estimate profile``."""
    parser.add_argument("--testbed", required=True, help="testbed preset (cpu-1, cpu-2, cpu-4) or JSON/TOML file")
    parser.add_argument(
        "--models",
        type=text_type(tuple[str, ...]),
        required=True,
        help="comma-separated zoo models, e.g. gpt__tiny,gpt__mini",
    )
    parser.add_argument("--out", required=True, help="profile to write (JSON)")
    parser.add_argument(
        "--quick", action="store_true", help="fewer sizes and rounds (seconds instead of minutes; noisier)"
    )
    parser.add_argument(
        "--samples", type=text_type(tuple[int, ...]), default=None, help="micro-batch sizes per device, e.g. 1,2,4,8,16"
    )
    parser.add_argument(
        "--tp",
        type=text_type(tuple[int, ...]),
        default=None,
        help="tensor-parallel degrees (default: all the node allows)",
    )
    parser.add_argument("--rounds", type=text_type(int), default=None, help="timed rounds per item")
    parser.add_argument(
        "--layer-repeats",
        type=text_type(int),
        default=None,
        help="calls of each layer back to back per round, the first dropped as warm-up (default 1: timed once)",
    )
    parser.add_argument(
        "--neighbours",
        choices=["busy", "idle"],
        default=None,
        help="profile compute on every device at once (busy, default) or on one while the others idle",
    )
    parser.add_argument(
        "--max-bytes-exp", type=text_type(int), default=None, help="largest collective size 2^K bytes (default 26)"
    )
    parser.add_argument(
        "--batch", type=text_type(int, 1), default=16, help="global batch for the cost comparison (default 16)"
    )
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto", help="GPU testbeds: cuda (auto)")
    parser.add_argument(
        "--work-dir", default=None, help="keep the ranks' records and logs here (default: a temporary folder)"
    )
    parser.set_defaults(handler=_profile)


def _settings(args: argparse.Namespace):
    from real_runner.profiler.settings import ProfilerSettings  # noqa: PLC0415

    s = ProfilerSettings.quick() if args.quick else ProfilerSettings()
    changes = {
        k: v
        for k, v in (
            ("samples", args.samples),
            ("tp", args.tp),
            ("rounds", args.rounds),
            ("layer_repeats", args.layer_repeats),
            ("neighbours", args.neighbours),
            ("comm_max_exp", args.max_bytes_exp),
        )
        if v is not None
    }
    if args.samples is not None:  # keep the overhead sizes among the profiled ones
        changes["overhead_samples"] = tuple(x for x in s.overhead_samples if x in args.samples) or args.samples[:1]
    return replace(s, **changes)


def _profile(args: argparse.Namespace) -> int:
    from tqdm import tqdm  # noqa: PLC0415

    import real_runner  # noqa: PLC0415
    from estimator.hardware import get_gpu  # noqa: PLC0415
    from estimator.planner import PlannerConfig  # noqa: PLC0415
    from estimator.profiled import ProfiledPerfModel, executable_plans  # noqa: PLC0415
    from estimator.table import shapes_for  # noqa: PLC0415
    from estimator.zoo import get_model  # noqa: PLC0415
    from real_runner.preflight import preflight  # noqa: PLC0415
    from real_runner.profiler.run import check_models, estimate_phases, profile_testbed, write_profile  # noqa: PLC0415
    from real_runner.testbed import load_testbed  # noqa: PLC0415

    out = check_out_file(args.out)
    testbed = load_testbed(args.testbed)
    models = check_models(args.models)
    settings = _settings(args)
    if args.device == "cpu" and not testbed.is_cpu:
        raise ValueError(f"--device cpu would measure CPU cores for a profile of {testbed.device_type} devices")
    preflight(
        testbed,
        device_memory_gb=None if testbed.is_cpu else get_gpu(testbed.device_type).memory_gb,
        models=[(m, get_model(m).param_count) for m in models],
    )
    with RunLock(out, "profile"):
        bars: dict[str, tqdm] = {}
        interactive = sys.stderr.isatty()

        def progress(phase: str, done: int, total: int) -> None:
            reporter.progress(phase, done, total)
            if not interactive:
                return
            bar = bars.get(phase)
            if bar is None:
                bar = bars[phase] = tqdm(
                    total=total, desc=f"profile {phase}", unit="round", leave=False, file=sys.stderr
                )
            bar.update(done - bar.n)

        phases = estimate_phases(testbed, models, settings)
        reporter = _Reporter(phases)
        print(
            f"profiling {testbed.name} ({testbed.total_devices} x {testbed.device_type}) for {', '.join(models)}: "
            f"estimated about {_duration(sum(phases.values()))} ("
            + ", ".join(f"{k} {_duration(v)}" for k, v in phases.items())
            + "; a guess from the items' FLOPs and this machine's speed, refined as it runs)",
            flush=True,
        )
        repo = Path(real_runner.__file__).resolve().parents[1]  # the ranks import the packages from here
        try:
            with tempfile.TemporaryDirectory(prefix="arena-profile-") as tmp:
                work = Path(args.work_dir) if args.work_dir else Path(tmp)
                profile = profile_testbed(
                    testbed,
                    models,
                    settings,
                    work,
                    env=os.environ,
                    cwd=repo,
                    device=args.device,
                    on_progress=progress,
                    on_wait=lambda: None if bars else reporter.tick(),  # lines until a progress bar takes over
                )
        except RuntimeError as exc:
            print(f"arena-gym estimate: error: {exc}", file=sys.stderr)
            return 1
        finally:
            for bar in bars.values():
                bar.close()
        write_profile(profile, out)
        perf = ProfiledPerfModel(profile, testbed.cluster())
        cfg = PlannerConfig()
        cost = profile.cost["device_s"]
        direct, count = 0.0, 0
        for m in models:
            arch = get_model(m)
            for shape in shapes_for(
                testbed.device_type, testbed.devices_per_node, testbed.total_devices, (1, 2, 4, 8, 16)
            ):
                for plan in executable_plans(arch, args.batch, shape, cfg):
                    est = perf.estimate(ModelRef.parse(m), args.batch, shape, plan)
                    direct += plan.num_gpus * (profile.cost.get("startup_s", 0.0) + DIRECT_STEPS * est.total_s)
                    count += 1
        print(
            f"wrote {out}: {cost:.0f} device-s ({profile.cost['wall_s']:.0f} s on {profile.cost['devices']:.0f} devices)"
        )
        print(
            f"measuring each of the {count} executable plans of {', '.join(models)} (batch {args.batch}) directly instead: "
            f"about {direct:.0f} device-s ({direct / max(cost, 1e-9):.1f}x; {DIRECT_STEPS} steps and a start-up each)"
        )
    return 0
