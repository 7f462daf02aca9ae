"""Sim vs live: the same jobs and policy simulated on the testbed's cluster, compared job by job (no torch).

Two simulations run :class:`arena_gym.sim.SimBackend` on the testbed's one-type cluster with a
performance model (the estimator, a measured table or a profile of the testbed) as the policy's
belief and, for the training steps, as the truth:

* the *predicted* one (:func:`simulate_predicted`) is the simulator's own claim, made before any
  live run: every (re)start pays what the performance model knows of it (a version-5 profile's
  measured start, checkpoint save and load, :class:`arena_gym.restarts.RestartCosts`; else the
  checkpoint-resume constant, 0 s), and every step its share of the periodic checkpoint saves the
  deployment's settings ask for, at the measured save time; it checks the overhead model too;
* the calibrated *twin* (:func:`simulate_same`) charges what the live job paid beyond its steps,
  measured from the live run (:class:`LiveOverheads`): every (re)start pays the mean live start
  cost (launch to first step, plus the checkpoint a generation saves when it ends), and every step
  pays its model's share of periodic checkpoint saves. It isolates what the performance model and
  the scheduling dynamics get right.

Every event log goes through the same metrics code.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from arena_gym.loop import run_episode
from arena_gym.metrics import job_outcomes
from arena_gym.perf import NoisyPerfModel, ScaledPerfModel
from arena_gym.protocols import Policy
from arena_gym.records import EpisodeRecord, EventKind
from arena_gym.restarts import RestartCost, RestartCosts, RestartKind
from arena_gym.scenario import build_scenario
from arena_gym.sim import SimConfig
from arena_gym.types import (
    ClusterSpec,
    JobId,
    JobSpec,
    ModelRef,
    OverheadClass,
    OverheadModel,
    PerfModel,
    ResourceShape,
)
from real_runner.progress import ProgressRecord


def measured_overheads(record: EpisodeRecord) -> list[float]:
    """Seconds from each ALLOCATE (or FAIL) to the next RUN of the same job: the reconfigurations paid live."""
    since: dict[str, float] = {}
    out = []
    for e in record.events:
        if e.kind in (EventKind.ALLOCATE, EventKind.FAIL):
            since[e.job_id] = e.time
        elif e.kind is EventKind.RUN and e.job_id in since:
            out.append(e.time - since.pop(e.job_id))
        elif e.kind in (EventKind.PREEMPT, EventKind.FINISH):
            since.pop(e.job_id, None)
    return out


@dataclass(frozen=True)
class LiveOverheads:
    """What the live run paid beyond its training steps, as the twin charges it.

    ``start_s``: per (re)start, the mean seconds from an ALLOCATE (or FAIL) to the first step of the
    generation it launched, plus the mean seconds a finished job spent after its last step (its final
    checkpoint): the total a run pays is starts x mean, so the mean, not the median, keeps the average
    JCT. ``save_share``: per model, seconds of periodic checkpoint saves per second of training steps.
    """

    start_s: float = 0.0
    save_share: Mapping[str, float] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        """Flat figures for ``sim_vs_live.json``."""
        return {"sim_start_s": self.start_s, **{f"sim_save_share_{m}": v for m, v in sorted(self.save_share.items())}}


def measure_overheads(record: EpisodeRecord, progress: Mapping[JobId, Sequence[ProgressRecord]]) -> LiveOverheads:
    """:class:`LiveOverheads` from the live event log and each job's progress records (job id -> records)."""
    starts = measured_overheads(record)
    tails, saves, steps = [], dict[str, float](), dict[str, float]()
    models = {j.job_id: j.model.name for j in record.jobs}
    for job_id, records in progress.items():
        step_records = [r for r in records if r.event == "step" and r.iter_s is not None]
        if not step_records or job_id not in models:
            continue
        last_step = step_records[-1].t
        done = [r for r in records if r.event == "done"]
        if done:
            tails.append(max(0.0, done[-1].t - last_step))
        model = models[job_id]
        steps[model] = steps.get(model, 0.0) + sum(r.iter_s for r in step_records if r.iter_s is not None)
        saves[model] = saves.get(model, 0.0) + sum(
            float(r.info.get("save_s", 0.0)) for r in records if r.event == "checkpoint" and r.t < last_step
        )
    start_s = (sum(starts) + sum(tails)) / len(starts) if starts else 0.0
    return LiveOverheads(start_s, {m: saves[m] / steps[m] for m in steps if steps[m] > 0})


@dataclass(frozen=True)
class CheckpointedPerf(ScaledPerfModel):
    """``base`` with every iteration time stretched by its model's share of periodic checkpoint saves."""

    base: PerfModel
    save_share: Mapping[str, float]

    @property
    def name(self) -> str:
        """The base model's name, marked."""
        return f"{self.base.name}+checkpoints"

    def _factor(self, model: ModelRef, batch: int, shape: ResourceShape) -> float:
        return 1.0 + self.save_share.get(model.name, 0.0)


def simulate_same(
    jobs: Sequence[JobSpec],
    policy: Policy,
    cluster: ClusterSpec,
    perf: PerfModel,
    overheads: LiveOverheads,
    round_s: float | None = None,
) -> EpisodeRecord:
    """Run ``policy`` on the simulator with the same jobs: ``perf`` is its belief, ``perf`` with the live
    checkpoint shares the truth, and every (re)start costs ``overheads.start_s``."""
    config = SimConfig(overhead=OverheadModel(ckpt_resume_s=overheads.start_s), round_s=round_s, overhead_class="none")
    truth = CheckpointedPerf(perf, dict(overheads.save_share))
    return run_episode(build_scenario(cluster, truth, perf, sim=config).backend(), policy, jobs)


@dataclass(frozen=True)
class PeriodicSaves(ScaledPerfModel):
    """``base`` with every iteration time stretched by the periodic checkpoint saves the runner's workers make,
    each as long as the model's measured ``save_s`` (``base``'s :class:`~arena_gym.restarts.RestartCosts`; no
    figure, no stretch). A worker saves when ``every_s`` seconds have passed since its last save and at every
    ``every_steps``-th step (0: off), so it saves at the higher of the two rates, and at their sum where
    the step saves are the rarer (they do not wait for the timer, which every save restarts). A generation
    is charged ``steps / interval`` saves where the runner makes the whole number of them (up to one save
    less per generation); the generation's last save is its closing one (:meth:`RestartCost.seconds`)."""

    base: PerfModel
    every_s: float = 0.0
    every_steps: int = 0

    @property
    def name(self) -> str:
        """The base model's name, marked."""
        return f"{self.base.name}+saves"

    def restart_cost(self, model: ModelRef, gpu_type: str) -> RestartCost | None:
        """The base model's restart costs (so the simulator still charges them)."""
        return self.base.restart_cost(model, gpu_type) if isinstance(self.base, RestartCosts) else None

    def _factor(self, model: ModelRef, batch: int, shape: ResourceShape) -> float:
        cost = self.restart_cost(model, shape.gpu_type)
        if cost is None:
            return 1.0
        by_time = 1.0 / self.every_s if self.every_s > 0 else 0.0
        by_steps = 1.0 / (self.every_steps * self.base.iter_time(model, batch, shape)) if self.every_steps else 0.0
        rate = by_time + by_steps if 0 < by_steps < by_time else max(by_time, by_steps)
        return 1.0 + cost.save_s * rate


def simulate_predicted(
    jobs: Sequence[JobSpec],
    policy: Policy,
    cluster: ClusterSpec,
    perf: PerfModel,
    round_s: float | None = None,
    checkpoint_every_s: float = 0.0,
    checkpoint_every_steps: int = 0,
    step_noise: float = 0.0,
    start_noise: float = 0.0,
    noise_seed: int = 0,
) -> EpisodeRecord:
    """Run ``policy`` on the simulator with the same jobs, as the simulator predicts them before any live run:
    ``perf`` is the belief, and with the runner's periodic checkpoint saves (:class:`PeriodicSaves`, at the
    deployment's checkpoint settings) the truth; every (re)start costs what ``perf`` knows of it and nothing
    else (its :class:`~arena_gym.restarts.RestartCosts` by the kind of (re)start; else the 0 s checkpoint
    resume). No plan-search term is charged (overhead class ``none``): the live runner has none beyond the
    policy's own decision time.

    ``step_noise`` or ``start_noise`` > 0 asks what the prediction would be in a world whose times are off:
    the truth's iteration times (per model, batch and shape) and process starts (per model and GPU type)
    then carry :class:`~arena_gym.perf.NoisyPerfModel`'s fixed log-normal errors of those sigmas, drawn by
    ``noise_seed``; the policy still plans with ``perf``."""
    config = SimConfig(round_s=round_s, overhead_class=OverheadClass.NONE)
    noisy = step_noise > 0 or start_noise > 0
    world = NoisyPerfModel(perf, step_noise, noise_seed, start_noise) if noisy else perf
    truth = PeriodicSaves(world, checkpoint_every_s, checkpoint_every_steps)
    return run_episode(build_scenario(cluster, truth, perf, sim=config).backend(), policy, jobs)


def predicted_starts(perf: PerfModel, cluster: ClusterSpec, jobs: Sequence[JobSpec]) -> dict[str, float]:
    """Per model of ``jobs``, what ``perf`` charges its first start on the cluster's device type (a profile's
    ``start_s`` and the generation's closing ``save_s``); models it has no figure for are left out."""
    if not isinstance(perf, RestartCosts):
        return {}
    out = {}
    for name, model in sorted({j.model.name: j.model for j in jobs}.items()):
        for group in cluster.groups:
            cost = perf.restart_cost(model, group.gpu_type)
            if cost is not None:
                out[name] = cost.seconds(RestartKind.FIRST)
                break
    return out


@dataclass(frozen=True)
class SimVsLive:
    """Per-job JCTs live, in the twin and predicted, and the average-JCT errors (simulated minus live, relative
    to live). ``pred_start_s``: per model, the first start the predicted simulation charged (the profile's)."""

    jobs: pd.DataFrame
    avg_jct_live_s: float
    avg_jct_sim_s: float
    overheads: LiveOverheads
    pred_start_s: Mapping[str, float] = field(default_factory=dict)

    @property
    def avg_jct_error(self) -> float:
        """The twin's (simulated - live) / live average JCT over the jobs finished in both."""
        return (self.avg_jct_sim_s - self.avg_jct_live_s) / self.avg_jct_live_s if self.avg_jct_live_s else math.nan

    @property
    def avg_jct_pred_s(self) -> float:
        """The predicted simulation's average JCT over the compared jobs it finished (NaN: none, or not run)."""
        pred = self.jobs["pred_jct_s"].dropna()
        return float(pred.mean()) if len(pred) else math.nan

    @property
    def avg_jct_pred_error(self) -> float:
        """The predicted simulation's (predicted - live) / live average JCT over the same jobs."""
        live = float(self.jobs.loc[self.jobs["pred_jct_s"].notna(), "live_jct_s"].mean())
        return (self.avg_jct_pred_s - live) / live if live else math.nan

    def summary(self) -> dict[str, float]:
        """The figures for ``sim_vs_live.json``."""
        errors = self.jobs["jct_error"].abs()
        pred_errors = self.jobs["pred_jct_error"].abs()
        return {
            "avg_jct_live_s": self.avg_jct_live_s,
            "avg_jct_sim_s": self.avg_jct_sim_s,
            "avg_jct_error": self.avg_jct_error,
            "median_abs_job_jct_error": float(errors.median()),
            "max_abs_job_jct_error": float(errors.max()),
            "jobs_compared": float(len(self.jobs)),
            **self.overheads.summary(),
            "avg_jct_pred_s": self.avg_jct_pred_s,
            "avg_jct_pred_error": self.avg_jct_pred_error,
            "median_abs_job_pred_jct_error": float(pred_errors.median()),
            "max_abs_job_pred_jct_error": float(pred_errors.max()),
            **{f"pred_start_s_{m}": v for m, v in sorted(self.pred_start_s.items())},
        }


def compare_runs(
    live: EpisodeRecord,
    sim: EpisodeRecord,
    overheads: LiveOverheads,
    pred: EpisodeRecord | None = None,
    pred_start_s: Mapping[str, float] | None = None,
) -> SimVsLive:
    """Join the runs' job outcomes: one row per job finished live and in the twin ``sim``, with its JCT in the
    predicted simulation ``pred`` (NaN where that did not finish it, or none was run)."""
    specs = {j.job_id: j for j in live.jobs}
    live_jct = {o.job_id: o.jct for o in job_outcomes(live) if o.jct is not None}
    sim_jct = {o.job_id: o.jct for o in job_outcomes(sim) if o.jct is not None}
    pred_jct = {o.job_id: o.jct for o in job_outcomes(pred) if o.jct is not None} if pred is not None else {}
    rows = []
    for job_id in sorted(set(live_jct) & set(sim_jct)):
        spec = specs[job_id]
        predicted = pred_jct.get(job_id, math.nan)
        rows.append(
            {
                "job_id": job_id,
                "model": spec.model.name,
                "global_batch": spec.global_batch,
                "iterations": spec.iterations,
                "requested_gpus": spec.requested_gpus or 0,
                "live_jct_s": live_jct[job_id],
                "sim_jct_s": sim_jct[job_id],
                "jct_error": (sim_jct[job_id] - live_jct[job_id]) / live_jct[job_id],
                "pred_jct_s": predicted,
                "pred_jct_error": (predicted - live_jct[job_id]) / live_jct[job_id],
            }
        )
    frame = pd.DataFrame(
        rows,
        columns=[
            "job_id",
            "model",
            "global_batch",
            "iterations",
            "requested_gpus",
            "live_jct_s",
            "sim_jct_s",
            "jct_error",
            "pred_jct_s",
            "pred_jct_error",
        ],
    )
    avg = lambda col: float(frame[col].mean()) if len(frame) else math.nan  # noqa: E731
    return SimVsLive(frame, avg("live_jct_s"), avg("sim_jct_s"), overheads, dict(pred_start_s or {}))


def median_overhead(record: EpisodeRecord) -> float:
    """The median live reconfiguration overhead (0 when none was measured)."""
    values = measured_overheads(record)
    return statistics.median(values) if values else 0.0
