"""One simulation run from a frozen config: its scenario (cluster, models, simulator settings), trace and policy; run, score."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from arena_gym.fields import Problems, build, check, check_fields
from arena_gym.harness.flags import flag
from arena_gym.loop import run_episode
from arena_gym.metrics import LogReading, compute_metrics, read_log
from arena_gym.perf import trace_hooks
from arena_gym.protocols import Policy
from arena_gym.records import EpisodeRecord
from arena_gym.registry import make_policy, own, trace_registry
from arena_gym.scenario import Scenario, build_scenario
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import ClusterSpec, JobSpec, OverheadClass, OverheadModel, PerfModel

#: Why deciding on rounds only needs a round (both commands' one line).
NO_ROUND = f"{flag('event_decisions')} needs {flag('round_s')} (otherwise nothing is ever decided)"


@dataclass(frozen=True)
class ScenarioOptions:
    """The scenario options a user sets, the same for ``compare`` (and ``simulate``) and ``evaluate``.

    Each is laid over a scenario's own setting, which a None leaves: for ``compare`` the
    defaults of :class:`RunConfig` (the estimator, no belief of its own, no horizon, no rounds,
    Arena's overheads), for ``evaluate`` each suite part's env config. ``perf`` is the
    ground-truth model, ``belief`` the one policies plan with, ``horizon_s`` counts from the
    first submission, ``round_s`` adds decision rounds, ``event_decisions`` False decides on
    rounds only, ``overhead`` prices reconfigurations; ``model_spec`` and ``allow_shadowing``
    as in :class:`RunConfig`. The fields are :class:`RunConfig`'s of the same names.
    """

    perf: str | None = None
    belief: str | None = None
    horizon_s: float | None = None
    round_s: float | None = None
    event_decisions: bool = True
    overhead: OverheadModel | None = None
    model_spec: str | None = None
    allow_shadowing: bool = False

    def __post_init__(self) -> None:
        check_fields(self)
        problems = Problems()
        problems.require(
            self.horizon_s is None or self.horizon_s > 0, f"{flag('horizon_s')} must be > 0, got {self.horizon_s}"
        )
        problems.require(
            self.round_s is None or 0 < self.round_s < math.inf,
            f"{flag('round_s')} must be finite and > 0, got {self.round_s}",
        )
        problems.raise_if_any()

    @classmethod
    def read(cls, data: Any, context: str) -> ScenarioOptions:
        """The options a JSON object records (as :func:`arena_gym.outputs.write_json` wrote them: an
        infinite horizon as ``"inf"``); :class:`arena_gym.fields.FieldError` prefixed ``context``."""
        return build(
            cls,
            data,
            context,
            readers={
                "horizon_s": lambda v: math.inf if v == "inf" else check(v, float | None, f"{context}: horizon_s"),
                "overhead": lambda v: None if v is None else build(OverheadModel, v, f"{context}: overhead"),
            },
        )

    def sim_config(self, base: SimConfig) -> SimConfig:
        """``base`` (a scenario's own simulator settings) with these options on top."""
        round_s = self.round_s if self.round_s is not None else base.round_s
        if not self.event_decisions and round_s is None:
            raise ValueError(NO_ROUND)
        return SimConfig(
            self.overhead if self.overhead is not None else base.overhead,
            round_s,
            self.event_decisions,
            self.horizon_s if self.horizon_s is not None else base.horizon_s,
            base.overhead_class,
        )

    def run_config(self, policy: str, trace: str, cluster: str, seed: int) -> RunConfig:
        """The :class:`RunConfig` of ``policy`` on ``trace`` with these options (its defaults where they give none)."""
        self.sim_config(SimConfig())  # a schedule that never decides is refused here, before any run
        given = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return RunConfig(policy, trace, cluster, seed, **given)


#: No option set: every scenario as its own settings make it.
NO_OPTIONS = ScenarioOptions()


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines one simulated episode.

    ``perf`` is the ground-truth model the simulator executes with; ``belief`` the one policies
    plan with (None: the same model). ``horizon_s`` counts from the first submission.
    ``model_spec`` is a JSON file of user-defined models (architectures the estimator knows
    in addition to its zoo; see ``estimator.zoo.load_models``). ``allow_shadowing`` lets a
    user model, trace file or cluster file take a built-in name (refused otherwise). The
    fields after ``seed`` are what a user sets through :class:`ScenarioOptions`.
    """

    policy: str
    trace: str = "synthetic"
    cluster: str = "testbed-64"
    seed: int = 0
    perf: str = "estimator"
    belief: str | None = None
    horizon_s: float = math.inf
    round_s: float | None = None
    event_decisions: bool = True
    overhead: OverheadModel = field(default_factory=OverheadModel)
    model_spec: str | None = None
    allow_shadowing: bool = False

    def sim_config(self, overhead_class: OverheadClass | str = OverheadClass.PRUNED) -> SimConfig:
        """The simulator settings of this run, charging ``overhead_class`` (the policy's ``ap_search``)."""
        return SimConfig(
            self.overhead, self.round_s, self.event_decisions, self.horizon_s, OverheadClass.parse(overhead_class)
        )

    def scenario(self, cache_dir: str | Path | None = None) -> Scenario:
        """This run's cluster, truth, belief and simulator settings (``cache_dir``: the estimator's disk cache)."""
        return build_scenario(
            self.cluster,
            self.perf,
            self.belief,
            self.seed,
            self.sim_config(),
            cache_dir=cache_dir,
            models=user_models(self.model_spec, self.allow_shadowing),
            allow_shadowing=self.allow_shadowing,
        )


@dataclass(frozen=True)
class RunResult:
    """A finished run: its config, the episode record and the metrics.

    ``reading`` is the record's event log as read for the metrics (:func:`arena_gym.metrics.read_log`), kept
    so that the result files and plots need not read it again (ignored unless it is this record's).
    """

    config: RunConfig
    record: EpisodeRecord
    metrics: dict[str, float]
    reading: LogReading | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Episode:
    """One scored episode: its record, its event log as read and the metrics computed from it."""

    record: EpisodeRecord
    reading: LogReading
    metrics: dict[str, float]


def play(policy: Policy, jobs: tuple[JobSpec, ...], backend: SimBackend, progress: bool = False) -> Episode:
    """``policy`` on ``jobs`` on a fresh simulator ``backend``, its event log read and scored.

    The one episode runner of the harness: ``compare``/``simulate`` (:func:`run`) and the
    evaluation protocol (:class:`arena_gym.harness.scoring.Evaluator`) both score through it.
    """
    record = run_episode(backend, policy, jobs, progress)
    done = read_log(record)
    return Episode(record, done, compute_metrics(record, done=done))


def user_models(path: str | None, allow_shadowing: bool = False) -> dict[str, Any] | None:
    """The user-defined models of a ``--model-spec`` JSON file by name (None without a file); a zoo
    name among them is refused unless ``allow_shadowing``."""
    if path is None:
        return None
    from estimator.zoo import load_models

    try:
        return load_models(path, allow_shadowing)
    except ValueError as exc:
        raise ValueError(f"--model-spec {path}: {exc}") from None


def check_trace_name(trace: str, allow_shadowing: bool = False) -> str:
    """The trace spec to load: a file named like a built-in generator or a registered trace is refused
    unless ``allow_shadowing`` (then the file is meant: returned as ``./NAME``)."""
    if not os.path.exists(trace) or os.path.isabs(trace):
        return trace
    generators = own("traces.formats:GENERATORS", f"trace {trace!r}")
    builtin = trace.partition(":")[0] in generators or trace_registry().knows(trace)
    if not builtin:
        return trace
    if not allow_shadowing:
        raise ValueError(
            f"trace {trace!r} names both a built-in trace and a file here; write ./{trace} for the file, "
            "or pass --allow-shadowing"
        )
    return os.path.join(os.curdir, trace)


def load_jobs(
    trace: str, cluster: ClusterSpec, perf: PerfModel, seed: int, allow_shadowing: bool = False
) -> tuple[JobSpec, ...]:
    """Resolve a trace spec into jobs, sampling missing fields feasibly on ``cluster``.

    Files and the built-in generators go to :func:`traces.resolve_trace`; other specs (a
    registered name, an ``arena_gym.traces`` entry point, ``module:attr``) to the trace registry,
    whose factory returns a ``Trace`` or a sequence of ``JobSpec``. A file that shadows a
    built-in name is refused unless ``allow_shadowing`` (:func:`check_trace_name`).
    """
    trace = check_trace_name(trace, allow_shadowing)
    what = f"trace {trace!r}"
    Trace, resolve_trace = own("traces:Trace", what), own("traces:resolve_trace", what)
    generators = own("traces.formats:GENERATORS", what)
    feasible, iter_time = trace_hooks(perf, cluster)
    registry = trace_registry()
    if trace.partition(":")[0] in generators or os.path.exists(trace) or not registry.knows(trace):
        return resolve_trace(trace, seed=seed, feasible=feasible, iter_time=iter_time).jobs
    made = registry.make(trace, seed=seed, cluster=cluster, feasible=feasible, iter_time=iter_time)
    jobs = made.jobs if isinstance(made, Trace) else made
    if not isinstance(jobs, (list, tuple)) or not jobs or not all(isinstance(j, JobSpec) for j in jobs):
        raise ValueError(f"trace {trace!r}: the factory returned no JobSpec sequence or Trace ({type(made).__name__})")
    return tuple(jobs)


def run(
    config: RunConfig,
    progress: bool = False,
    jobs: tuple[JobSpec, ...] | None = None,
    cache_dir: str | Path | None = None,
    scenario: Scenario | None = None,
) -> RunResult:
    """Run one episode as ``config`` says and compute its metrics.

    ``scenario`` is ``config``'s (:meth:`RunConfig.scenario`) when the caller has built it
    already (its models keep their tables); ``cache_dir`` is the estimator's disk cache (None: none).
    """
    if scenario is None:
        scenario = config.scenario(cache_dir)
    if jobs is None:
        jobs = load_jobs(config.trace, scenario.cluster, scenario.truth, config.seed, config.allow_shadowing)
    policy = make_policy(config.policy, config.seed)
    episode = play(policy, jobs, scenario.backend(policy.ap_search), progress)
    return RunResult(config, episode.record, episode.metrics, episode.reading)
