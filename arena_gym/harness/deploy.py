"""A deployment: one policy scheduling a trace of real jobs on a testbed, its results, and its resume.

:func:`prepare` resolves the settings (:class:`DeployConfig`) into a :class:`Deployment`: the
testbed, the performance model, the policy and the jobs (submit times multiplied by the time
scale, so the simulation and the live run see the same jobs). :func:`open_backend` builds the
:class:`~real_runner.live.LiveBackend` with its journal in the results directory; the one loop
(:func:`arena_gym.loop.run_episode`) runs it; :func:`write_results` writes the same files a
simulation writes (``config.json``, ``metrics.json``, ``jobs.csv``, ``timeline.csv``, plots), the
live extras (``live_jobs.csv``: generations, resumes, trajectory check per job) and the
sim-vs-live comparison (``sim/``: the twin charged the live overheads, ``sim_pred/``: the
simulator's own prediction, ``sim_vs_live.csv``, ``sim_vs_live.json``). A deployment's
settings are journaled, so :func:`load_deployment` rebuilds it from its directory to resume.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from arena_gym.harness.experiment import load_jobs
from arena_gym.harness.flags import flag
from arena_gym.harness.gpu_types import check_requested_types
from arena_gym.harness.out_dirs import check_out_dir
from arena_gym.harness.results import jobs_frame, timeline_frame
from arena_gym.metrics import compute_metrics
from arena_gym.outputs import code_version, write_csv, write_json
from arena_gym.protocols import Policy
from arena_gym.records import EpisodeRecord
from arena_gym.registry import make_perf, make_policy, resolve
from arena_gym.types import ClusterSpec, JobSpec, PerfModel
from estimator.hardware import get_gpu
from estimator.zoo import get_model
from real_runner.launchers import make_launcher
from real_runner.launchers.local import check_local_hosts
from real_runner.live.backend import LiveBackend, LiveStatus
from real_runner.live.config import LiveConfig
from real_runner.live.journal import Journal, exists
from real_runner.live.json_forms import job_from_dict
from real_runner.live.sim_vs_live import (
    SimVsLive,
    compare_runs,
    measure_overheads,
    median_overhead,
    predicted_starts,
    simulate_predicted,
    simulate_same,
)
from real_runner.live.trajectory import check_trajectory
from real_runner.plans import model_spec
from real_runner.preflight import preflight
from real_runner.progress import read_progress
from real_runner.testbed import Testbed, load_testbed, testbed_from_dict
from real_runner.training_modes import check_precision

log = logging.getLogger(__name__)

#: The kind of results directory ``deploy`` writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "deploy"

#: ``--perf`` value that profiles the testbed on first use (cached) and simulates with that profile.
PROFILE_SPEC = "profile"
#: Where the profiler's first-use entry point lives (resolved only when ``--perf profile`` is asked for).
ENSURE_PROFILE = "real_runner.profiler.cache:ensure_profile"


@dataclass(frozen=True)
class DeployConfig:
    """The settings of one deployment (what ``arena-gym deploy`` takes; journaled for a resume).

    ``testbed`` is a preset name or a file; ``launcher`` overrides the testbed's (None: keep it);
    ``perf`` is the performance model the backend validates with, policies plan with and the
    sim-vs-live simulations execute (``estimator``, ``measured:CSV``, ``profiled:PROFILE.json``, or
    ``profile``: profile the testbed on first use into ``profile_cache``). ``time_scale``
    multiplies the trace's submit times. The rest are :class:`LiveConfig` settings.
    """

    policy: str = "arena"
    trace: str = "live"
    testbed: str = "cpu-4"
    time_scale: float = 1.0
    launcher: str | None = None
    ray_address: str | None = None
    perf: str = "estimator"
    seed: int = 0
    round_s: float | None = None
    horizon_s: float = math.inf
    checkpoint_every_s: float = 10.0
    stale_timeout_s: float = 60.0
    max_retries: int = 3
    strict: bool = False
    sim: bool = True
    plots: bool = True
    profile_cache: str = "results/profiles"
    status_every_s: float = 10.0
    precision: str = "auto"  # the jobs' compute precision (real_runner.training_modes); auto: the testbed's

    def __post_init__(self) -> None:
        if not (0 < self.time_scale < math.inf):
            raise ValueError(f"{flag('time_scale')} must be finite and > 0, got {self.time_scale}")
        check_precision(self.precision, "deploy")

    def live_config(self) -> LiveConfig:
        """The backend settings."""
        return LiveConfig(
            round_s=self.round_s,
            horizon_s=self.horizon_s,
            checkpoint_every_s=self.checkpoint_every_s,
            stale_timeout_s=self.stale_timeout_s,
            max_retries=self.max_retries,
            seed=self.seed,
            status_every_s=self.status_every_s,
            precision=self.precision,
        )


@dataclass(frozen=True)
class Deployment:
    """A resolved deployment: testbed, cluster, performance model (and its resolved spec), policy, jobs."""

    config: DeployConfig
    testbed: Testbed
    cluster: ClusterSpec
    perf: PerfModel
    perf_spec: str
    policy: Policy
    jobs: tuple[JobSpec, ...]
    unplaceable: int


def testbed_to_dict(testbed: Testbed) -> dict[str, Any]:
    """The testbed in its file form (what :func:`real_runner.testbed.testbed_from_dict` reads)."""
    return {
        "name": testbed.name,
        "device_type": testbed.device_type,
        "launcher": testbed.launcher,
        "checkpoint_root": testbed.checkpoint_root,
        "nodes": [{"host": n.host, "devices": list(n.devices)} for n in testbed.nodes],
    }


def deploy_perf_spec(spec: str, testbed: Testbed, models: list[str], cache_dir: str, env: Mapping[str, str]) -> str:
    """The concrete performance-model spec: ``profile`` becomes ``profiled:PATH`` of the testbed's cached profile."""
    if spec != PROFILE_SPEC:
        return spec
    ensure_profile = resolve(ENSURE_PROFILE)
    return f"profiled:{ensure_profile(testbed, models, cache_dir, env=env)}"


def prepare(
    config: DeployConfig,
    env: Mapping[str, str],
    testbed: Testbed | None = None,
    jobs: tuple[JobSpec, ...] | None = None,
    perf_spec: str | None = None,
) -> Deployment:
    """Resolve the settings; ValueError (one line) naming what cannot be deployed.

    The testbed is checked against this machine first (:func:`real_runner.preflight.preflight`:
    CUDA, device indices, nccl, device memory, the checkpoint folder, every job runnable on some
    shape), before anything is profiled or launched. A resume passes the journaled ``testbed``,
    ``jobs`` and resolved ``perf_spec``.
    """
    testbed = testbed if testbed is not None else load_testbed(config.testbed)
    if config.launcher is not None:
        testbed = dataclasses.replace(testbed, launcher=config.launcher)
    if testbed.launcher == "local":
        check_local_hosts([n.host for n in testbed.nodes])
    cluster = testbed.cluster()
    probe = make_perf("estimator" if config.perf == PROFILE_SPEC else config.perf, cluster, config.seed)
    if jobs is None:
        raw = load_jobs(config.trace, cluster, probe, config.seed)
        jobs = tuple(dataclasses.replace(j, submit_time=j.submit_time * config.time_scale) for j in raw)
    models = sorted({j.model.name for j in jobs})
    for name in models:
        try:
            model_spec(name)
        except ValueError as exc:
            raise ValueError(f"trace {config.trace!r}: the runner cannot train {name}: {exc}") from None
    preflight(
        testbed,
        jobs=jobs,
        perf=probe,
        checkpoint_dir=Path(testbed.checkpoint_root) if testbed.checkpoint_root else None,
        device_memory_gb=None if testbed.is_cpu else get_gpu(testbed.device_type).memory_gb,
        models=[(name, get_model(name).param_count) for name in models],
    )
    perf_spec = perf_spec or deploy_perf_spec(config.perf, testbed, models, config.profile_cache, env)
    perf = make_perf(perf_spec, cluster, config.seed)
    unplaceable = check_requested_types(jobs, cluster, strict=config.strict, source=config.trace)
    policy = make_policy(config.policy, config.seed)
    return Deployment(config, testbed, cluster, perf, perf_spec, policy, jobs, unplaceable)


def check_deploy_dir(out: str | Path, replace: bool = False) -> Path:
    """A directory a new deployment may use: new, empty, or (with ``replace``) an earlier finished one.

    One-line ValueError otherwise: an unfinished deployment (resume it), another command's results,
    a finished deployment without ``replace`` (:func:`arena_gym.harness.out_dirs.check_out_dir`).
    Nothing is removed: a replacing deployment runs aside (:func:`arena_gym.harness.out_dirs.filled_dir`).
    """
    path = Path(out).absolute()
    if exists(path):
        journal = Journal(path / Journal.FILENAME)
        status = journal.meta("status")
        journal.close()
        if status != "finished":
            raise ValueError(
                f"--out {out}: holds an unfinished deployment ({status}); resume it with --resume {out} "
                "or name another directory"
            )
    return check_out_dir(out, kind=KIND, replace=replace)


def run_dir_of(testbed: Testbed, out: Path) -> Path:
    """Where the jobs' specs, logs, progress channels and checkpoints go (the testbed's shared root, if it names one)."""
    if testbed.checkpoint_root:
        return Path(testbed.checkpoint_root) / f"{out.name}-{int(time.time())}"
    return out / "run"


def open_backend(
    dep: Deployment,
    out: Path,
    env: Mapping[str, str],
    *,
    run_dir: Path | None = None,
    on_status: Callable[[LiveStatus], None] | None = None,
    interrupt: Callable[[], bool] | None = None,
) -> LiveBackend:
    """The live backend of a deployment, its journal in ``out`` (a new one records the settings)."""
    journal = Journal(out / Journal.FILENAME)
    if journal.meta("deploy") is None:
        run_dir = run_dir if run_dir is not None else run_dir_of(dep.testbed, out)
        with journal.transaction():
            journal.set_meta("deploy", _config_dict(dep.config))
            journal.set_meta("testbed", testbed_to_dict(dep.testbed))
            journal.set_meta("perf_spec", dep.perf_spec)
            journal.set_meta("run_dir", str(run_dir))
    launcher_args = (
        {
            "address": dep.config.ray_address,
            "namespace": f"arena-gym-{out.name}",
            "num_cpus": max(2, dep.testbed.total_devices),
        }
        if dep.testbed.launcher == "ray"
        else {}
    )
    launcher = make_launcher(dep.testbed.launcher, **launcher_args)
    return LiveBackend(
        dep.testbed,
        dep.perf,
        Path(journal.meta("run_dir")),
        launcher,
        config=dep.config.live_config(),
        journal=journal,
        env=env,
        on_status=on_status,
        interrupt=interrupt,
    )


def _config_dict(config: DeployConfig) -> dict[str, Any]:
    data = dataclasses.asdict(config)
    data["horizon_s"] = None if math.isinf(config.horizon_s) else config.horizon_s
    return data


def load_deployment(out: str | Path, env: Mapping[str, str], ray_address: str | None = None) -> tuple[Deployment, Path]:
    """The deployment journaled in ``out`` (to resume it) and its run directory; ValueError when there is none."""
    path = Path(out)
    if not exists(path):
        raise ValueError(f"--resume {out}: no deployment journal ({Journal.FILENAME}) there")
    journal = Journal(path / Journal.FILENAME)
    try:
        data, workload = journal.meta("deploy"), journal.meta("workload")
        if data is None or workload is None:
            raise ValueError(f"--resume {out}: the journal holds no deployment settings or workload")
        if journal.meta("status") == "finished":
            raise ValueError(f"--resume {out}: that deployment has finished")
        if data.get("horizon_s") is None:
            data["horizon_s"] = math.inf
        config = DeployConfig(**data)
        if ray_address is not None:
            config = dataclasses.replace(config, ray_address=ray_address)
        testbed = testbed_from_dict(journal.meta("testbed"), config.testbed)
        jobs = tuple(job_from_dict(d) for d in workload)
        dep = prepare(config, env, testbed=testbed, jobs=jobs, perf_spec=journal.meta("perf_spec"))
        return dep, Path(journal.meta("run_dir"))
    finally:
        journal.close()


@dataclass(frozen=True)
class DeployResult:
    """What a finished deployment produced: its record and metrics, and the sim-vs-live comparison (``sim_``:
    the twin, charged the live overheads; ``pred_``: the simulator's prediction from the performance model)."""

    record: EpisodeRecord
    metrics: dict[str, float]
    sim_record: EpisodeRecord | None
    sim_metrics: dict[str, float] | None
    comparison: SimVsLive | None
    live_jobs: pd.DataFrame
    pred_record: EpisodeRecord | None = None
    pred_metrics: dict[str, float] | None = None


def finish(dep: Deployment, backend: LiveBackend, record: EpisodeRecord) -> DeployResult:
    """Score the live run, check every job's trajectory, and simulate the same jobs and policy for comparison:
    the twin (the live overheads charged) and the prediction (a fresh policy of the same spec and seed on the
    performance model alone, as ``simulate`` would run it: nothing from the live run)."""
    metrics = {
        **compute_metrics(record),
        "jobs_unplaceable_type": float(dep.unplaceable),
        "oversubscription": backend.oversubscription,
    }
    progress = {
        spec.job_id: read_progress(path) for spec in dep.jobs if (path := backend.progress_path(spec.job_id)).exists()
    }
    rows = []
    for spec in dep.jobs:
        records = progress.get(spec.job_id)
        report = check_trajectory(records, spec.iterations) if records is not None else None
        rows.append(
            {
                "job_id": spec.job_id,
                "generations": report.generations if report else 0,
                "resumes": report.resumes if report else 0,
                "repeated_steps": report.repeated_steps if report else 0,
                "max_repeat_loss_diff": report.max_repeat_diff if report else math.nan,
                "final_step": report.final_step if report else 0,
                "target_step": spec.iterations,
                "trajectory_ok": bool(report and report.ok),
                "problems": "; ".join(report.problems) if report else "no progress log",
            }
        )
    live_jobs = pd.DataFrame(rows)
    metrics["trajectories_ok"] = float(live_jobs["trajectory_ok"].sum()) if len(live_jobs) else 0.0
    metrics["median_reconfiguration_s"] = median_overhead(record)
    sim_record = sim_metrics = comparison = pred_record = pred_metrics = None
    if dep.config.sim:
        overheads = measure_overheads(record, progress)
        sim_record = simulate_same(dep.jobs, dep.policy, dep.cluster, dep.perf, overheads, dep.config.round_s)
        sim_metrics = compute_metrics(sim_record)
        fresh = make_policy(dep.config.policy, dep.config.seed)
        live = dep.config.live_config()
        pred_record = simulate_predicted(
            dep.jobs,
            fresh,
            dep.cluster,
            dep.perf,
            dep.config.round_s,
            live.checkpoint_every_s,
            live.checkpoint_every_steps,
        )
        pred_metrics = compute_metrics(pred_record)
        starts = predicted_starts(dep.perf, dep.cluster, dep.jobs)
        comparison = compare_runs(record, sim_record, overheads, pred_record, starts)
        metrics["sim_avg_jct_error"] = comparison.avg_jct_error
        metrics["sim_pred_avg_jct_s"] = comparison.avg_jct_pred_s
        metrics["sim_pred_avg_jct_error"] = comparison.avg_jct_pred_error
    return DeployResult(record, metrics, sim_record, sim_metrics, comparison, live_jobs, pred_record, pred_metrics)


def write_results(out: Path, dep: Deployment, result: DeployResult) -> None:
    """The results directory: what a simulation writes, the live extras and the sim-vs-live comparison."""
    write_json(
        out / "config.json",
        {
            "kind": KIND,
            "config": dep.config,
            "seed": dep.config.seed,
            "code_version": code_version(),
            "policy": result.record.policy,
            "cluster": result.record.cluster,
            "testbed": testbed_to_dict(dep.testbed),
            "perf": dep.perf_spec,
            "oversubscription": result.metrics["oversubscription"],
        },
    )
    write_json(out / "metrics.json", result.metrics)
    write_csv(out / "jobs.csv", jobs_frame(result.record))
    write_csv(out / "timeline.csv", timeline_frame(result.record))
    write_csv(out / "live_jobs.csv", result.live_jobs)
    records = [result.record]
    if result.sim_record is not None and result.comparison is not None:
        sim = out / "sim"
        sim.mkdir(exist_ok=True)
        write_json(sim / "metrics.json", result.sim_metrics)
        write_csv(sim / "jobs.csv", jobs_frame(result.sim_record))
        write_csv(sim / "timeline.csv", timeline_frame(result.sim_record))
        write_csv(out / "sim_vs_live.csv", result.comparison.jobs)
        write_json(out / "sim_vs_live.json", result.comparison.summary())
        records.append(dataclasses.replace(result.sim_record, policy=f"{result.sim_record.policy} (sim)"))
    if result.pred_record is not None:
        pred = out / "sim_pred"
        pred.mkdir(exist_ok=True)
        write_json(pred / "metrics.json", result.pred_metrics)
        write_csv(pred / "jobs.csv", jobs_frame(result.pred_record))
        write_csv(pred / "timeline.csv", timeline_frame(result.pred_record))
        records.append(dataclasses.replace(result.pred_record, policy=f"{result.pred_record.policy} (predicted)"))
    if dep.config.plots:
        from arena_gym.harness.plots import plot_all  # matplotlib: only when plotting

        plot_all(records, out)
