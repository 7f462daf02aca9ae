"""Profile a testbed: launch one profiling rank per device, wait, and merge their records into a
:class:`~estimator.profile.Profile` (no torch in this process).

The ranks are started the way the runner's local launcher starts training ranks (the same rank
variables and ``env://`` rendezvous, one process per device, CPU ranks pinned to their core) and
are tracked with its :class:`~real_runner.ranks.LocalJob`. Merging: compute times are the mean
over the ranks that measured them (grouped curves: over every rank); a collective's time per size is the mean over the group's
ranks of each round, then the mean over rounds without the lowest and highest tenth; the AdamW
fit is non-negative least squares over the plain parameter sets.

Profiling cost is device-seconds: the wall time from launch to the last rank's exit times the
devices held.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from arena_gym.outputs import atomic_write, code_version
from estimator.hardware import canonical_gpu_name, get_gpu
from estimator.profile import (
    GROUPED_SUFFIX,
    CommTable,
    Curve,
    DeviceInfo,
    LayerParams,
    ModelInfo,
    OptimizerFit,
    OrderCurve,
    Profile,
    ProfileError,
)
from estimator.zoo import get_model
from real_runner.plans import model_spec
from real_runner.profiler.comm import trimmed_mean
from real_runner.profiler.restart import Launch, profile_restarts
from real_runner.profiler.settings import ProfileJob, ProfilerSettings, Progress, tp_degrees
from real_runner.ranks import spawn_ranks
from real_runner.testbed import Testbed

log = logging.getLogger(__name__)


def check_models(models: Sequence[str]) -> tuple[str, ...]:
    """Canonical names of the models to profile; ValueError naming one the runner cannot train."""
    out = []
    for m in models:
        arch = get_model(m)
        if arch.kind != "transformer" or arch.experts:
            raise ValueError(f"model {arch.name}: the profiler profiles the runner's dense transformers only")
        out.append(arch.name)
    if not out:
        raise ValueError("name at least one model to profile")
    return tuple(dict.fromkeys(out))


def _pin_cores(testbed: Testbed) -> list[int] | None:
    if not testbed.is_cpu:
        return None
    cores = sorted(os.sched_getaffinity(0))
    wanted = [d for node in testbed.nodes for d in node.devices]
    if all(c in cores for c in wanted):
        return wanted
    log.warning(
        "testbed %s names cores %s, this process may use %s: ranks share cores round-robin", testbed.name, wanted, cores
    )
    return [cores[i % len(cores)] for i in range(len(wanted))]


#: Seconds a profiling run spends before its first measurement (interpreters, torch, the process group), a guess.
STARTUP_S = 10.0
#: Seconds one generation of the restart probe takes (a fresh worker process, a few steps, a checkpoint), a guess.
RESTART_GENERATION_S = 8.0


def host_flops(seconds: float = 0.05) -> float:
    """FLOP/s of one core of this machine on a float32 matrix product (numpy, timed for about ``seconds``)."""
    a = np.ones((192, 192), dtype=np.float32)
    calls, t0 = 0, time.perf_counter()
    while calls < 3 or time.perf_counter() - t0 < seconds:
        a @ a
        calls += 1
    return calls * 2 * 192**3 / (time.perf_counter() - t0)


def estimate_phases(
    testbed: Testbed, models: Sequence[str], settings: ProfilerSettings, flops: float | None = None
) -> dict[str, float]:
    """A priori seconds of each phase of a profiling run (``startup``, ``compute``, ``comm``, ``grouped``): the
    FLOPs its items run, forward and backward, at ``flops`` per second (default: :func:`host_flops` on a CPU
    testbed, a third of the device's catalogue peak on GPUs), and the bytes its collectives move at a nominal
    bandwidth. A guess to tell the user what to expect before the first measurement, not a measurement."""
    s = settings
    if flops is None:
        flops = host_flops() if testbed.is_cpu else get_gpu(testbed.device_type).peak_tflops("fp32") * 1e12 / 3
    world = testbed.total_devices
    compute = 0.0
    for name in models:
        arch, spec = get_model(name), model_spec(name)
        per_sample = {"embed": arch.layers.flops[0], "block": arch.layers.flops[1], "head": arch.layers.flops[-1]}
        tps = tp_degrees(s, spec.heads, testbed.devices_per_node)
        wrappers = (1 if world > 1 else 0) + (1 if max(tps) > 1 else 0)
        layer = sum(3 * per_sample["block"] * n / tp for tp in tps for n in s.samples)
        layer += sum(3 * per_sample[k] * n for k in ("embed", "head") for n in s.samples)
        layer += sum(3 * per_sample["block"] * n * wrappers for n in s.overhead_samples)
        compute += (s.rounds + s.warmup_rounds) * layer
        if world > 1:  # pipeline overhead and op order: the whole model at a few micro-batch sizes
            whole = 3 * arch.flops_per_sample
            compute += (s.rounds + s.warmup_rounds) * sum(
                whole * n * s.pipeline_micro_batches for n in s.pipeline_samples
            )
            compute += (s.order_rounds + 1) * 2 * sum(whole * n * k for n in s.order_samples for k in s.order_in_flight)
        compute += (
            (s.rounds + s.warmup_rounds) * sum(3 * arch.flops_per_sample * b / max(world, 1) for b in s.batches) / 8
        )
        compute += s.optimizer_rounds * 20 * arch.param_count
    phases = {"startup": STARTUP_S, "compute": compute / max(flops, 1.0)}
    if s.restart_steps:
        phases["restart"] = 2 * len(models) * RESTART_GENERATION_S
    if world > 1:
        moved = sum(s.sizes()) * len(s.comm_ops) * (s.comm_rounds + s.comm_warmup)
        collectives = len(s.sizes()) * len(s.comm_ops) * (s.comm_rounds + s.comm_warmup)
        bandwidth = 1e9 if testbed.is_cpu else 50e9  # loopback gloo (stack.md: 0.4-2.8 GB/s); NVLink-class
        phases["comm"] = moved / bandwidth + collectives * (s.gap_s + 3e-4)
        if s.grouped:
            phases["grouped"] = phases["compute"] / 2
    return phases


def _tail_progress(path: Path, offset: int, on_progress: Progress | None) -> int:
    if not path.exists():
        return offset
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        rec = json.loads(line)
        if on_progress is not None:
            on_progress(rec["phase"], int(rec["done"]), int(rec["total"]))
    return offset + end


def profile_testbed(
    testbed: Testbed,
    models: Sequence[str],
    settings: ProfilerSettings,
    work_dir: str | Path,
    *,
    env: Mapping[str, str],
    python: str = sys.executable,
    cwd: str | Path | None = None,
    device: str = "auto",
    timeout_s: float = 4 * 3600.0,
    on_progress: Progress | None = None,
    on_wait: Callable[[], None] | None = None,
) -> Profile:
    """Profile ``models`` on every device of ``testbed`` (this machine); the merged profile.

    ``env`` is the ranks' base environment, ``work_dir`` receives the job file, the rank records
    and logs; ``on_progress(phase, done, total)`` gets rank 0's progress records, ``on_wait()`` is called at
    every poll (about ten times a second) from the launch on, records or not. Once the ranks are done, each model's
    (re)start costs are measured on the first device (:mod:`real_runner.profiler.restart`, unless the settings'
    ``restart_steps`` is 0). RuntimeError (naming the rank and the cause) when a rank fails or the run exceeds
    ``timeout_s``.
    """
    names = check_models(models)
    if testbed.launcher != "local" or any(n.host not in ("localhost", "127.0.0.1") for n in testbed.nodes):
        raise ValueError(
            f"testbed {testbed.name}: the profiler runs every rank on this machine (a local launcher on "
            "localhost); profile one node of a multi-machine testbed with a one-node testbed file"
        )
    work = Path(work_dir)
    out = work / "ranks"
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*"):
        stale.unlink()
    device_ids = tuple(testbed.nodes[0].devices)
    job = ProfileJob(
        names,
        settings,
        testbed.name,
        len(testbed.nodes),
        testbed.devices_per_node,
        device_ids,
        str(out.resolve()),
        "cpu" if testbed.is_cpu else device,
    )
    job_path = job.save(work / "profile-job.json")
    ranks = spawn_ranks(
        job_path,
        job.world_size,
        env=env,
        log_dir=work / "logs",
        pin_cores=_pin_cores(testbed),
        python=python,
        cwd=cwd,
        module="real_runner.profiler.worker",
    )
    offset, deadline = 0, time.monotonic() + timeout_s
    try:
        while True:
            offset = _tail_progress(out / "progress.jsonl", offset, on_progress)
            if on_wait is not None:
                on_wait()
            codes = ranks.poll()
            failed = [r for r, c in enumerate(codes) if c not in (None, 0)]
            if failed:
                ranks.kill()
                raise RuntimeError(
                    f"profiling rank {failed[0]} exited with code {codes[failed[0]]}: "
                    f"{ranks.log_tail(failed[0], 1200).strip().splitlines()[-1:]}"
                )
            if all(c == 0 for c in codes):
                break
            if time.monotonic() > deadline:
                ranks.kill()
                raise RuntimeError(f"profiling did not finish within {timeout_s:.0f} s")
            time.sleep(0.1)
    except BaseException:
        ranks.kill()
        raise
    wall = time.time() - ranks.launched_at
    records = [json.loads((out / f"rank{r}.json").read_text()) for r in range(job.world_size)]
    profile = merge(job, testbed, records, wall)
    if not settings.restart_steps:
        return profile
    if on_progress is not None:
        on_progress("restart", 0, len(names))
    t0 = time.time()
    pins = _pin_cores(testbed)
    launch = Launch(
        env if testbed.is_cpu else {**env, "CUDA_VISIBLE_DEVICES": str(device_ids[0])},
        pins[0] if pins else None,
        python,
        cwd,
    )
    restart = profile_restarts(
        names,
        work / "restart",
        launch,
        steps=settings.restart_steps,
        batch=settings.restart_batch,
        device=job.device,
        timeout_s=max(1.0, deadline - time.monotonic()),
    )
    if on_progress is not None:
        on_progress("restart", len(names), len(names))
    spent = time.time() - t0
    cost = {**profile.cost, "restart_s": spent, "wall_s": wall + spent, "device_s": (wall + spent) * job.world_size}
    return dataclasses.replace(profile, restart=restart, cost=cost)


# ----------------------------------------------------------------------------------------------
# merging


def _curves(records: list[dict[str, Any]]) -> tuple[tuple[Curve, ...], tuple[Curve, ...]]:
    points: dict[tuple, dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        for c in rec["curves"]:
            points[(c["model"], c["layer"], c["variant"], c["tp"])][c["samples"]].append((c["fw_s"], c["bw_s"]))
    compute, overhead = [], []
    for (model, layer, variant, tp), by_n in sorted(points.items()):
        ns = sorted(by_n)
        fw = tuple(float(np.mean([v[0] for v in by_n[n]])) for n in ns)
        bw = tuple(float(np.mean([v[1] for v in by_n[n]])) for n in ns)
        (compute if variant == "compute" else overhead).append(Curve(model, layer, variant, tp, tuple(ns), fw, bw))
    return tuple(compute), tuple(overhead)


def _grouped(records: list[dict[str, Any]]) -> tuple[Curve, ...]:
    points: dict[tuple, dict[int, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        for c in rec.get("grouped", []):
            points[(c["model"], c["layer"], c["wrapper"], c["group"])][c["samples"]].append((c["fw_s"], c["bw_s"]))
    out = []
    for (model, layer, wrapper, group), by_n in sorted(points.items()):
        ns = sorted(by_n)
        fw = tuple(float(np.mean([v[0] for v in by_n[n]])) for n in ns)
        bw = tuple(float(np.mean([v[1] for v in by_n[n]])) for n in ns)
        out.append(Curve(model, layer, wrapper + GROUPED_SUFFIX, group, tuple(ns), fw, bw))
    return tuple(out)


def _order(records: list[dict[str, Any]]) -> tuple[OrderCurve, ...]:
    points: dict[tuple[str, int], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for rec in records:
        for o in rec.get("order", []):
            points[(o["model"], o["in_flight"])][o["samples"]].append(o["fraction"])
    out = []
    for (model, in_flight), by_n in sorted(points.items()):
        ns = sorted(by_n)
        out.append(OrderCurve(model, in_flight, tuple(ns), tuple(float(np.mean(by_n[n])) for n in ns)))
    return tuple(out)


def fit_optimizer(records: list[dict[str, Any]]) -> OptimizerFit:
    """AdamW step model from the optimizer records (non-negative least squares; wrappers: extra per DTensor)."""
    from scipy.optimize import nnls  # noqa: PLC0415

    rows = [
        (o["tensors"], o["elements"], o["step_s"])
        for rec in records
        for o in rec["optimizer"]
        if o["wrapper"] == "none"
    ]
    if not rows:
        raise ValueError("no optimizer measurements to fit")
    a = np.array([[r[0], r[1]] for r in rows], dtype=float)
    y = np.array([r[2] for r in rows])
    scale = a.max(axis=0)
    coef, _ = nnls(a / scale, y)
    coef = coef / scale
    extra: dict[str, float] = {}
    for w in ("tp", "fsdp"):
        pairs = [(o["extra_s"], o["tensors"]) for rec in records for o in rec["optimizer"] if o["wrapper"] == w]
        if pairs and sum(p[1] for p in pairs) > 0:
            extra[w] = float(sum(p[0] for p in pairs) / sum(p[1] for p in pairs))
    return OptimizerFit(float(coef[0]), float(coef[1]), extra)


def _comm(records: list[dict[str, Any]]) -> tuple[CommTable, ...]:
    groups: dict[tuple[str, int, int], list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        for c in rec["comm"]:
            groups[(c["op"], len(c["ranks"]), c["nodes"])].append(c)
    tables = []
    for (op, p, nodes), entries in sorted(groups.items()):
        sizes = entries[0]["bytes"]
        seconds = []
        for i in range(len(sizes)):
            rounds = np.array([e["seconds"][i] for e in entries], dtype=float)  # [ranks, rounds]
            seconds.append(trimmed_mean(list(rounds.mean(axis=0))))
        tables.append(CommTable(op, p, nodes, tuple(sizes), tuple(seconds)))
    return tuple(tables)


def merge(job: ProfileJob, testbed: Testbed, records: list[dict[str, Any]], wall_s: float) -> Profile:
    """One profile from the records of every rank."""
    measured = [r["compute"] for r in records if r.get("compute")]
    if not measured:
        raise ProfileError("no rank measured the computation phase")
    compute, overhead = _curves(measured)
    models = {}
    for name in job.models:
        spec = model_spec(name)
        counts = measured[0]["params"][name]
        models[name] = ModelInfo(
            name,
            spec.layers,
            spec.hidden,
            spec.heads,
            spec.seq_len,
            spec.vocab,
            4,
            {k: LayerParams(**v) for k, v in counts.items()},
        )
    data: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {}
    for name in job.models:
        by_b: dict[int, list[float]] = defaultdict(list)
        for rec in measured:
            for d in rec["data"]:
                if d["model"] == name:
                    by_b[d["batch"]].append(d["seconds"])
        bs = sorted(by_b)
        data[name] = (tuple(bs), tuple(float(np.mean(by_b[b])) for b in bs))
    first = records[0]
    device = DeviceInfo(
        canonical_gpu_name(testbed.device_type),
        first["backend"],
        testbed.name,
        len(testbed.nodes),
        testbed.devices_per_node,
        first["host"],
        first["torch"],
        int(first["threads"]),
        job.settings.neighbours,
        str(first["device"]).partition(":")[0],
    )
    t = first["timings"]
    world = job.world_size
    cost = {
        "wall_s": wall_s,
        "devices": float(world),
        "device_s": wall_s * world,
        "startup_s": float(t.get("launch_to_ready_s", 0.0)),
        "compute_s": float(t.get("compute_s", 0.0)),
        "comm_s": float(t.get("comm_s", 0.0)),
        "grouped_s": float(t.get("grouped_s", 0.0)),
    }
    created = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    backward_call = float(np.mean([rec["backward_call_s"] for rec in measured]))
    return Profile(
        device,
        models,
        compute,
        overhead,
        fit_optimizer(measured),
        data,
        _comm(records),
        backward_call,
        cost,
        job.settings.to_dict(),
        created,
        code_version(),
        grouped=_grouped(records),
        order=_order(measured),
    )


def write_profile(profile: Profile, path: str | Path) -> Path:
    """Write ``profile`` to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(profile.to_json(), encoding="utf-8"))
