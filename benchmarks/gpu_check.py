"""The prepared GPU check: the runner on a real GPU against torch, the estimator and the simulator, in one JSON.

On a machine with torch and CUDA (this project's extras not needed: no SB3, wandb or Ray), from a clone:

1. ``pytest -m "gpu and not distributed" tests/real_runner`` (counts of passed / skipped / failed; needs
   pytest); the gpu tests that start nccl ranks are step 6;
2. a throughput probe per model (gpt__350M batch 16, gpt__1.3B batch 8; one GPU, one micro-batch):
   seconds per step and model TFLOP/s (6 x parameters x tokens per step) of the runner's
   ``real_runner.executor.Trainer`` (its default precision and recomputation on CUDA) and of a plain
   loop over the same ``real_runner.model.GPT`` under ``torch.autocast(bfloat16)`` with fused AdamW and
   no recomputation, against the estimator's time of that plan (uncalibrated, and calibrated by step 4);
3. ``arena-gym estimate profile --quick --samples 1,2,4,8,16`` of a one-GPU testbed of this device type, for
   the probed models (``--profile-models``);
4. ``arena-gym estimate calibrate --profile`` of that profile;
5. ``arena-gym deploy --policy arena`` of three gpt__350M jobs on that testbed with the calibrated
   estimator (``--perf calibrated:FILE``), its sim-vs-live table: the predicted simulation's error (the
   calibrated model's step times and restart costs, nothing measured live) is the goal's, the twin's beside it;
6. with two or more GPUs, the nccl tests (``pytest -m "gpu and distributed" tests/real_runner``).

Every step runs under a time limit and records an error instead of stopping the check; the JSON of
figures (``--out``, default ``benchmarks/results/gpu/gpu_check.json``) is written at the end. About
5-8 minutes on one GPU. Goals (one H200): gpt__1.3B batch 8 at >= 300 model TFLOP/s with
recomputation (<= 0.22 s a step), gpt__350M batch 16 at >= 250; the calibrated estimator within 15 %
of both; the deploy's average-JCT error within 10 %.

Without CUDA it prints one line saying why and exits with code 2 (nothing measured). Where the
``arena-gym`` entry points are not installed (a clone without ``pip install``), it installs the
repository itself with ``pip install --no-deps --no-build-isolation -e .`` first.

Usage: ``python benchmarks/gpu_check.py [--out FILE] [--steps N] [--profile-models gpt__350M,gpt__1.3B]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / "benchmarks" / "results" / "gpu" / "gpu_check.json"
#: (model, global batch) of the throughput probe.
PROBES = (("gpt__350M", 16), ("gpt__1.3B", 8))
#: Goals per probed model: model TFLOP/s of the runner's step, and the calibrated estimator's largest error.
TFLOPS_GOALS = {"gpt__350M": 250.0, "gpt__1.3B": 300.0}
ESTIMATE_GOAL, DEPLOY_GOAL = 0.15, 0.10
#: The deployed jobs: (job id, submit s, iterations), gpt__350M at global batch 8.
DEPLOY_JOBS = (("a", 0, 60), ("b", 5, 30), ("c", 10, 45))
#: GPU names as the driver reports them -> catalogue types (first match; A100 by its memory).
NAME_TYPES = (
    ("H200", "h200"),
    ("H100", "h100"),
    ("H800", "h800"),
    ("A100", "a100"),
    ("L40S", "l40s"),
    ("L20", "l20"),
    ("A40", "a40"),
    ("A10", "a10"),
    ("V100", "v100"),
    ("T4", "t4"),
    ("P100", "p100"),
    ("3090", "rtx3090"),
)
#: The pytest command of the test steps.
PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
#: Exit code of a run on a machine without CUDA.
NO_CUDA_EXIT = 2


def cuda_missing() -> str | None:
    """Why this machine cannot run the check (torch absent, or no CUDA device), or None when it can."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"no CUDA device (torch {torch.__version__}: torch.cuda.is_available() is False)"
    return None


def catalogue_type(device_name: str, memory_gib: float) -> str:
    """The hardware-catalogue type of a GPU the driver names ``device_name``; ValueError when none matches."""
    upper = device_name.upper()
    for needle, name in NAME_TYPES:
        if needle in upper:
            if name == "a100":
                return "a100-80gb" if memory_gib > 48 else "a100-40gb"
            if name == "v100":
                return "v100-32gb" if memory_gib > 20 else "v100-16gb"
            return name
    raise ValueError(
        f"GPU {device_name!r} is not in the hardware catalogue; known: {', '.join(n for _, n in NAME_TYPES)}"
    )


def model_tflops(params: float, tokens: int, step_s: float) -> float:
    """Model FLOP/s of a training step in TFLOP/s: 6 x parameters x tokens per step / seconds."""
    return 6.0 * params * tokens / step_s / 1e12 if step_s > 0 else math.nan


def pytest_counts(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line (``4 passed, 2 skipped in 3.2s``), by outcome."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|skipped|error|deselected)", line)]
    if not lines:
        return {}
    return {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|errors?|deselected)", lines[-1])}


def within(value: float, goal: float) -> bool:
    """Whether a relative error is within a goal (a NaN never is)."""
    return math.isfinite(value) and abs(value) <= goal


def run(cmd: list[str], timeout_s: float, env: dict[str, str]) -> dict[str, Any]:
    """A subprocess in the repository: exit code, seconds and the tail of its output."""
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
        code, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, out = -1, f"timed out after {timeout_s:.0f} s\n" + str(exc.stdout or "")
    return {"cmd": " ".join(cmd), "exit": code, "wall_s": round(time.monotonic() - start, 1), "tail": out[-3000:]}


def step(results: dict[str, Any], name: str, fn: Callable[[], Any]) -> Any:
    """Run one part of the check; its figures (or its error) go under ``results[name]``."""
    print(f"gpu_check: {name} ...", flush=True)
    start = time.monotonic()
    try:
        value = fn()
    except Exception as exc:  # one failing part must not lose the others' figures
        value = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"}
    results[name] = value
    print(f"gpu_check: {name} done in {time.monotonic() - start:.0f} s", flush=True)
    return value


def ensure_installed(env: dict[str, str]) -> dict[str, Any]:
    """Install the repository (no dependencies) when its entry points are not registered."""
    names = {ep.name for ep in metadata.entry_points(group="arena_gym.catalogues")}
    if "estimator" in names:
        return {"installed": "already"}
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", "."]
    return run(cmd, 300, env)


def time_steps(train_step: Callable[[int], object], steps: int, warmup: int) -> float:
    """Median seconds of ``steps`` CUDA-synchronised calls after ``warmup`` untimed ones."""
    import torch

    for s in range(warmup):
        train_step(s)
    torch.cuda.synchronize()
    times = []
    for s in range(warmup, warmup + steps):
        start = time.perf_counter()
        train_step(s)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def plain_bf16(spec, batch: int, steps: int, device) -> tuple[float, float]:
    """Seconds per step and parameters of a plain loop over ``real_runner.model.GPT``: bf16 autocast, fused
    AdamW, no recomputation, one micro-batch."""
    import torch

    from real_runner.data import global_batch
    from real_runner.model import GPT, loss_fn

    net = GPT(spec, seed=0).to(device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, fused=True)

    def plain(s: int) -> None:
        x, y = global_batch(0, s, batch, spec.seq_len, spec.vocab)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    seconds = time_steps(plain, steps, 3)
    return seconds, float(sum(p.numel() for p in net.parameters()))


def probe(model: str, batch: int, steps: int) -> dict[str, Any]:
    """The runner's step and a plain bf16 loop of the same model on GPU 0 (one micro-batch), one after the other
    (the memory of the first is released before the second)."""
    import torch

    from arena_gym.types import ModelRef, Plan, StagePlan
    from estimator.zoo import get_model
    from real_runner.executor import Trainer
    from real_runner.model import n_layers
    from real_runner.plans import model_spec, resolve_plan
    from real_runner.precision import resolve_precision

    device = torch.device("cuda", 0)
    arch, spec = get_model(ModelRef.parse(model)), model_spec(model)
    plan = Plan((StagePlan(0, n_layers(spec), 1, 1),), 1)
    precision = resolve_precision("auto", arch.dtype, device)
    trainer = Trainer(
        spec,
        resolve_plan(spec, plan, batch, 1),
        rank=0,
        global_batch=batch,
        lr=1e-4,
        seed=0,
        device=device,
        precision=precision,
        remat=arch.remat,
    )
    runner_s = time_steps(trainer.train_step, steps, 3)
    del trainer
    torch.cuda.empty_cache()

    plain_s, params = plain_bf16(spec, batch, steps, device)
    tokens = batch * spec.seq_len
    return {
        "batch": batch,
        "plan": "one GPU, one micro-batch",
        "precision": precision.name,
        "remat": bool(arch.remat),
        "parameters": params,
        "runner_s": runner_s,
        "runner_tflops": model_tflops(params, tokens, runner_s),
        "plain_bf16_s": plain_s,
        "plain_bf16_tflops": model_tflops(params, tokens, plain_s),
        "plan_obj": plan,
    }


def estimator_times(probes: dict[str, Any], gpu_type: str, params_file: Path | None) -> dict[str, Any]:
    """The estimator's time of each probed plan (the calibrated one when ``params_file`` is given)."""
    from arena_gym.types import GpuType, ModelRef, ResourceShape
    from estimator.perfmodel import calibrated_perf_model, default_perf_model

    perf = calibrated_perf_model(str(params_file)) if params_file is not None else default_perf_model()
    out = {}
    for model, p in probes.items():
        if "plan_obj" not in p:
            continue
        est = perf.estimate(ModelRef.parse(model), p["batch"], ResourceShape(GpuType(gpu_type), 1, 1), p["plan_obj"])
        out[model] = {"estimate_s": est.total_s, "error_vs_runner": est.total_s / p["runner_s"] - 1.0}
    return out


def deploy_trace(path: Path, gpu_type: str) -> Path:
    """A canonical trace of the deployed gpt__350M jobs."""
    rows = ["job_id,submit_time_s,model,global_batch,iterations,gpu_type,num_gpus,deadline_s"]
    rows += [f"{j},{t},gpt__350M,8,{n},{gpu_type},1," for j, t, n in DEPLOY_JOBS]
    path.write_text("\n".join(rows) + "\n")
    return path


def read_deploy(out: Path) -> dict[str, Any]:
    """The figures of a deploy's results directory: its metrics and the sim-vs-live table."""
    figures: dict[str, Any] = {}
    for name in ("metrics.json", "sim_vs_live.json"):
        if (out / name).is_file():
            figures[name.removesuffix(".json")] = json.loads((out / name).read_text())
    if (out / "sim_vs_live.csv").is_file():
        figures["sim_vs_live_jobs"] = (out / "sim_vs_live.csv").read_text().splitlines()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON of figures")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per probe (after 3 warm-up steps)")
    parser.add_argument(
        "--profile-models", default=",".join(m for m, _ in PROBES), help="models `estimate profile` measures"
    )
    args = parser.parse_args()
    reason = cuda_missing()
    if reason is not None:
        print(f"gpu_check: {reason}: nothing to measure on this machine", file=sys.stderr)
        return NO_CUDA_EXIT
    import torch

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.setdefault("WANDB_MODE", "disabled")
    props = torch.cuda.get_device_properties(0)
    gpu_type = catalogue_type(props.name, props.total_memory / 2**30)
    results: dict[str, Any] = {
        "device": props.name,
        "gpu_type": gpu_type,
        "gpus": torch.cuda.device_count(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    step(results, "install", lambda: ensure_installed(env))
    py = sys.executable
    step(
        results,
        "gpu_tests",
        lambda: _with_counts(run([*PYTEST, "-m", "gpu and not distributed", "tests/real_runner"], 240, env)),
    )
    probes: dict[str, Any] = {}
    for model, batch in PROBES:
        probes[model] = step(results, f"probe_{model}", lambda m=model, b=batch: probe(m, b, args.steps))
    step(results, "estimator", lambda: estimator_times(probes, gpu_type, None))
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        testbed = work / "node.json"
        testbed.write_text(
            json.dumps(
                {"name": f"one-{gpu_type}", "device_type": gpu_type, "nodes": [{"host": "localhost", "devices": [0]}]}
            )
        )
        profile, calibration = work / "profile.json", work / "calibration.json"
        cli = [py, "-m", "arena_gym"]
        step(
            results,
            "estimate_profile",
            lambda: run(
                [
                    *cli,
                    "estimate",
                    "profile",
                    "--testbed",
                    str(testbed),
                    "--models",
                    args.profile_models,
                    "--out",
                    str(profile),
                    "--quick",
                    "--samples",
                    "1,2,4,8,16",
                ],
                240,
                env,
            ),
        )
        step(
            results,
            "estimate_calibrate",
            lambda: run(
                [*cli, "estimate", "calibrate", "--profile", str(profile), "--out", str(calibration)], 120, env
            ),
        )
        if calibration.is_file():
            results["calibration"] = json.loads(calibration.read_text())
            step(results, "estimator_calibrated", lambda: estimator_times(probes, gpu_type, calibration))
        perf = f"calibrated:{calibration}" if calibration.is_file() else "estimator"
        out = work / "deploy"
        trace = deploy_trace(work / "jobs.csv", gpu_type)
        deploy = step(
            results,
            "deploy",
            lambda: run(
                [
                    *cli,
                    "deploy",
                    "--policy",
                    "arena",
                    "--testbed",
                    str(testbed),
                    "--trace",
                    str(trace),
                    "--perf",
                    perf,
                    "--out",
                    str(out),
                    "--no-plots",
                    "--horizon",
                    "240",
                ],
                300,
                env,
            ),
        )
        if isinstance(deploy, dict):
            deploy.update(read_deploy(out))
    if torch.cuda.device_count() >= 2:
        step(
            results,
            "nccl_tests",
            lambda: _with_counts(
                run(
                    [*PYTEST, "-m", "gpu and distributed", "tests/real_runner"],
                    300,
                    env,
                )
            ),
        )
    for p in probes.values():
        if isinstance(p, dict):
            p.pop("plan_obj", None)
    results["goals"] = goals(results)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(json.dumps(results["goals"], indent=2))
    print(f"gpu_check: figures written to {args.out}")
    return 0


def _with_counts(result: dict[str, Any]) -> dict[str, Any]:
    return {**result, "counts": pytest_counts(result["tail"])}


def _goal(value: float, goal: float, met: Callable[[float], bool]) -> dict[str, Any]:
    """One goal's entry: its figure and whether it is met (both None when the figure was not measured)."""
    measured = isinstance(value, (int, float)) and math.isfinite(value)
    return {"value": value if measured else None, "goal": goal, "met": met(value) if measured else None}


def goals(results: dict[str, Any]) -> dict[str, Any]:
    """Each goal of the check with its figure and whether it is met (None: not measured)."""
    out: dict[str, Any] = {}
    calibrated = results.get("estimator_calibrated", {})
    for model, goal in TFLOPS_GOALS.items():
        tflops = results.get(f"probe_{model}", {}).get("runner_tflops", math.nan)
        out[f"{model}_tflops"] = _goal(tflops, goal, lambda v, g=goal: v >= g)
        err = calibrated.get(model, {}).get("error_vs_runner", math.nan)
        out[f"{model}_calibrated_error"] = _goal(err, ESTIMATE_GOAL, lambda v: within(v, ESTIMATE_GOAL))
    metrics = results.get("deploy", {}).get("metrics", {})
    for name, key in (
        ("deploy_avg_jct_error", "sim_pred_avg_jct_error"),
        ("deploy_twin_avg_jct_error", "sim_avg_jct_error"),
    ):
        error = metrics.get(key, math.nan)
        out[name] = _goal(error, DEPLOY_GOAL, lambda v: within(v, DEPLOY_GOAL))
    return out


if __name__ == "__main__":
    sys.exit(main())
