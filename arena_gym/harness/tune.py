"""Hyperparameter studies on Optuna, the way rl-zoo3 runs them: sampled configs, pruning, shared storage.

A study tunes one *target* (:class:`TuneTarget`: a trainer with a config dataclass, a search
space and a validation score to minimise; :data:`TUNE_TARGETS` names the built-in ones, and any
``module:attr`` is one). Every trial trains on the target's config built from the study's fixed
settings (``base``), the sampled values and the trial budget (``trial_set``), reports its
validation score as it goes, and is pruned when that score is worse than the median of the
earlier trials at the same step. The trials live in an Optuna storage (an SQLite file in the
study's directory unless another SQLAlchemy URL is given): several worker processes, on one
machine or many, run trials of one study at once, and running the same command again continues
it up to ``--trials``. A worker killed mid-trial stops its heartbeat; the next worker to start a
trial marks that one failed and runs its parameters again.

The best trial's config, without the trial budget, is written as ``best_config.json``: the file
the target's own trainer takes with ``--config``.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import json
import logging
import multiprocessing
import os
import signal
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tqdm.auto import tqdm

from arena_gym.fields import check, describe, from_text, hints_of
from arena_gym.harness.out_dirs import check_out_dir
from arena_gym.harness.trainers import FORMER_NAMES, METHODS
from arena_gym.outputs import code_version, write_json
from arena_gym.registry import is_module_attr, resolve
from arena_gym.safe_points import SafePoints

if TYPE_CHECKING:
    import optuna

log = logging.getLogger(__name__)

#: The kind of results directory ``tune`` writes (:mod:`arena_gym.harness.out_dirs`); a rerun continues its study.
KIND = "tune"

#: Built-in targets: name -> ``module:attr`` of a :class:`TuneTarget`: every ``arena-gym train --method``, under its
#: name and its former one.
TUNE_TARGETS: dict[str, str] = METHODS | {old: METHODS[new] for old, new in FORMER_NAMES.items()}
#: Called by a trial with (step, validation score so far); raises to prune the trial.
Report = Callable[[int, float], None]


class TuneTarget(Protocol):
    """A trainer a study can tune: its config type, search space and objective (lower is better)."""

    config_type: type

    def sample(self, trial: Any) -> dict[str, Any]:
        """The sampled config fields of one trial (an optuna trial, or a stand-in with its ``suggest_*`` methods)."""

    def check(self, config: Any) -> None:
        """Raise ValueError naming the problem when ``config`` cannot run (data, paths), before any trial."""

    def objective(self, config: Any, out: Path, report: Report, progress: bool = False) -> float:
        """Train ``config`` into ``out`` and return its validation score, calling ``report`` as it goes.

        ``progress`` asks for the trainer's own progress bars on stderr (a target whose ``objective``
        lacks the parameter is called without it).
        """

    def config_json(self, config: Any) -> dict[str, Any]:
        """``config`` as the JSON object the target's trainer reads back."""


def get_target(name: str) -> TuneTarget:
    """The target registered as ``name``, or any ``module:attr``; ValueError naming the valid ones."""
    if name in TUNE_TARGETS:
        return resolve(TUNE_TARGETS[name])
    if is_module_attr(name):
        try:
            target = resolve(name)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"tune target {name!r} cannot be imported: {exc}") from None
        missing = [m for m in ("config_type", "sample", "check", "objective", "config_json") if not hasattr(target, m)]
        if missing or not dataclasses.is_dataclass(getattr(target, "config_type", None)):
            lacks = ", ".join(missing) or "a dataclass config_type"
            raise ValueError(f"tune target {name!r} is not a tune target (it lacks {lacks})")
        return target
    raise ValueError(f"unknown tune target {name!r}; valid: {', '.join(TUNE_TARGETS)} or module:attr")


class _FirstChoice:
    """A stand-in trial that answers every ``suggest_*`` with its lowest choice (to check fixed values before any trial)."""

    def suggest_float(self, name: str, low: float, high: float, **_: Any) -> float:
        return low

    def suggest_int(self, name: str, low: int, high: int, **_: Any) -> int:
        return low

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        return choices[0]


class Fixing:
    """A trial whose ``suggest_*`` of a fixed parameter returns the fixed value (not sampled, not recorded).

    Values may be command-line strings: they are read as the parameter's type, as :func:`coerce` reads
    them (:func:`arena_gym.fields.from_text`: ``true`` is no integer; a categorical one as the choice
    printed the same, if any; a budget may lie outside the range searched). Other calls go to the
    wrapped trial.
    """

    def __init__(self, trial: Any, fixed: Mapping[str, Any]) -> None:
        self.trial, self.fixed = trial, fixed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.trial, name)

    def suggest_float(self, name: str, low: float, high: float, **kwargs: Any) -> float:
        """The fixed value of ``name``, else the trial's."""
        if name in self.fixed:
            return float(self._number(name, float))
        return float(self.trial.suggest_float(name, low, high, **kwargs))

    def suggest_int(self, name: str, low: int, high: int, **kwargs: Any) -> int:
        """The fixed value of ``name``, else the trial's."""
        if name in self.fixed:
            return int(self._number(name, int))
        return int(self.trial.suggest_int(name, low, high, **kwargs))

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        """The fixed choice of ``name``, else the trial's."""
        if name not in self.fixed:
            return self.trial.suggest_categorical(name, choices)
        value = self.fixed[name]
        for choice in choices:
            if choice == value or str(choice) == str(value):
                return choice
        kind = type(choices[0])
        return self._number(name, kind) if kind in (int, float) else value

    def _number(self, name: str, kind: type) -> Any:
        value = self.fixed[name]
        try:
            return from_text(value, kind) if isinstance(value, str) else check(value, kind)
        except ValueError:
            raise ValueError(f"tune: {name}={value!r} is not {describe(kind)}") from None


def check_storage(url: str) -> None:
    """ValueError (one line) when ``url`` is not a database URL this machine can open, before any work."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise ValueError(f"tune --storage {url!r} is not a database URL (e.g. sqlite:///study.db)") from None
    try:
        parsed.get_dialect().import_dbapi()
    except ImportError as exc:
        raise ValueError(f"tune --storage {url!r}: its database driver is not installed ({exc})") from None
    except Exception as exc:  # sqlalchemy's NoSuchModuleError: an unknown dialect
        raise ValueError(f"tune --storage {url!r}: {exc}") from None
    if parsed.get_backend_name() == "sqlite":
        _check_sqlite(url, parsed.database)
    else:
        check_connection(url)


def check_connection(url: str) -> None:
    """ValueError (one line) when the database server of ``url`` cannot be reached or refuses the login."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import SQLAlchemyError

    engine = create_engine(url)
    try:
        with engine.connect():
            pass
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise ValueError(f"tune --storage {url!r}: cannot connect ({reason})") from None
    finally:
        engine.dispose()


def _check_sqlite(url: str, database: str | None) -> None:
    """The file of an SQLite storage URL: a file (not in memory: the workers could not share it), in a folder that
    exists, and either new or an SQLite database."""
    import sqlite3

    if database in (None, "", ":memory:"):
        raise ValueError(f"tune --storage {url!r}: an in-memory database is not shared by the trials; name a file")
    if "\0" in database:
        raise ValueError(f"tune --storage {url!r}: the file name holds a NUL character")
    path = Path(database).resolve()
    if not path.parent.is_dir():
        raise ValueError(f"tune --storage {url!r}: folder {path.parent} does not exist")
    if not path.exists():
        return
    if not path.is_file():
        raise ValueError(f"tune --storage {url!r}: {path} is not a regular file")
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            db.execute("PRAGMA schema_version").fetchone()
    except sqlite3.Error as exc:
        raise ValueError(f"tune --storage {url!r}: {path} is not an SQLite database ({exc})") from None


def coerce(config_type: type, key: str, value: Any) -> Any:
    """``value`` (a JSON value or a command-line string) in the form of ``config_type``'s field ``key``.

    A string is read by :func:`arena_gym.fields.from_text` (tuples: items joined with ``,``), else as JSON.
    """
    hints = hints_of(config_type)
    if key not in hints:
        raise ValueError(f"{config_type.__name__} has no field {key!r}")
    hint, where = hints[key], f"{config_type.__name__}.{key}"
    if isinstance(value, str):
        try:
            return from_text(value, hint, sep=",")
        except ValueError as exc:
            try:
                value = json.loads(value)
            except ValueError:
                raise ValueError(f"{where}: bad value {value!r}: {exc}") from None
    return check(value, hint, where)


@dataclass(frozen=True)
class TuneSettings:
    """One study: what it tunes, how many trials it runs, where they are stored.

    ``base`` fixes config fields of every trial and of the best config; ``trial_set`` fixes
    fields of the trials only (their budget: the best config keeps the target's defaults there).
    A field the study tunes, fixed by either, is not sampled: the trials run with the fixed value
    and the best config records it.
    ``storage`` is an SQLAlchemy URL (``None``: ``sqlite`` in ``out``); ``study`` its name.
    ``startup_trials`` random trials come before the TPE sampler and the pruner act; a trial is
    not pruned before step ``warmup_steps + 1``. A running trial beats every ``heartbeat_s``; one
    silent for ``grace_s`` counts as dead (its worker was killed) and its parameters run again.
    """

    target: str = "residual"
    out: str = "results/tune"
    trials: int = 20
    workers: int = 2
    seed: int = 0
    study: str = ""
    storage: str | None = None
    base: Mapping[str, Any] = field(default_factory=dict)
    trial_set: Mapping[str, Any] = field(default_factory=dict)
    startup_trials: int = 5
    warmup_steps: int = 1
    heartbeat_s: int = 30
    grace_s: int = 120

    def __post_init__(self) -> None:
        for name in ("trials", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"tune: {name} must be >= 1, got {getattr(self, name)}")
        if self.startup_trials < 0 or self.warmup_steps < 0:
            raise ValueError("tune: startup_trials and warmup_steps must be >= 0")
        if not 0 < self.heartbeat_s < self.grace_s:
            raise ValueError(f"tune: need 0 < heartbeat_s < grace_s, got {self.heartbeat_s} and {self.grace_s}")

    @property
    def fixed(self) -> dict[str, Any]:
        """Every value ``base`` and ``trial_set`` fix (a tuned parameter among them is not sampled)."""
        return {**self.base, **self.trial_set}

    @property
    def study_name(self) -> str:
        """The study's name in its storage (the target's name unless given)."""
        return self.study or self.target

    def storage_url(self) -> str:
        """The storage's URL."""
        return self.storage or f"sqlite:///{Path(self.out).resolve() / 'study.db'}"

    def recorded(self) -> dict[str, Any]:
        """What makes two commands the same study (all but the trial count, the workers and the output)."""
        return {
            "target": self.target,
            "seed": self.seed,
            "base": dict(sorted(self.base.items())),
            "trial_set": dict(sorted(self.trial_set.items())),
            "startup_trials": self.startup_trials,
            "warmup_steps": self.warmup_steps,
        }

    def config(self, target: TuneTarget, sampled: Mapping[str, Any], budget: bool = True) -> Any:
        """The target's config of ``sampled`` values: the base, then the sample, then (``budget``) the trial set."""
        values = {**self.base, **sampled, **(self.trial_set if budget else {})}
        try:
            return target.config_type(**{k: coerce(target.config_type, k, v) for k, v in values.items()})
        except TypeError as exc:  # a field of the wrong type, found by the config's own checks
            raise ValueError(str(exc)) from None


def _storage(settings: TuneSettings) -> optuna.storages.BaseStorage:
    import optuna

    sqlite = settings.storage_url().startswith("sqlite")
    with warnings.catch_warnings():  # the heartbeat and its retry callback are marked experimental
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        storage = optuna.storages.RDBStorage(
            settings.storage_url(),
            engine_kwargs={"connect_args": {"timeout": 60}} if sqlite else {},
            heartbeat_interval=settings.heartbeat_s,
            grace_period=settings.grace_s,
            heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2),
        )
    if sqlite:
        _lock_on_begin(storage.engine)
    return storage


def _lock_on_begin(engine: Any) -> None:
    """Every transaction on ``engine`` (SQLite) takes the write lock when it begins (``BEGIN IMMEDIATE``).

    SQLite ignores optuna's ``SELECT ... FOR UPDATE``: two workers could both read a waiting trial (a
    stale one queued to run again) as waiting and both start it. With the lock taken at the start,
    the second reads it running and samples a trial of its own.
    """
    from sqlalchemy import event

    def autocommit_driver(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the driver's own deferred BEGIN off; ours below

    def begin_immediate(connection: Any) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    event.listen(engine, "connect", autocommit_driver)
    event.listen(engine, "begin", begin_immediate)
    engine.dispose()  # connections opened while optuna set up the tables reconnect with the above


def fail_unbeaten_trials(study: optuna.Study, grace_s: float) -> list[int]:
    """Fail, and queue to run again, the running trials that started over ``grace_s`` ago with no heartbeat.

    A worker killed after its trial was created and before its heartbeat thread first wrote leaves
    a trial that optuna's stale check never sees (it looks only at trials with a heartbeat): it
    would count as running for ever, and a study short of trials would wait for it for ever. The
    ids of the trials failed here (a trial another worker failed first is left to it).
    """
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.storages._rdb import models  # optuna's schema: which trials have a heartbeat
    from optuna.trial import TrialState
    from sqlalchemy.orm import Session

    storage = study._storage
    rdb: Any = getattr(storage, "_backend", storage)  # an RDBStorage; the study wraps it in a cache
    cutoff = datetime.now() - timedelta(seconds=grace_s)
    old = [
        t._trial_id
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        if t.datetime_start is not None and t.datetime_start < cutoff
    ]
    if not old:
        return []
    beats = models.TrialHeartbeatModel
    with Session(rdb.engine) as session:
        beaten = {i for (i,) in session.query(beats.trial_id).filter(beats.trial_id.in_(old))}
    failed = []
    for trial_id in old:
        if trial_id in beaten:
            continue
        with contextlib.suppress(UpdateFinishedTrialError):
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                failed.append(trial_id)
    retry = rdb.get_heartbeat_stale_trial_callback()
    for trial_id in failed:
        log.warning(
            "trial %d: running with no heartbeat for over %g s (its worker died); it runs again", trial_id, grace_s
        )
        if retry is not None:
            retry(study, copy.deepcopy(storage.get_trial(trial_id)))
    return failed


def open_study(settings: TuneSettings, worker: int = 0) -> optuna.Study:
    """The study in its storage (created on first use); ValueError when the storage's study has other settings."""
    import optuna

    study = optuna.create_study(
        study_name=settings.study_name,
        storage=_storage(settings),
        direction="minimize",
        sampler=optuna.samplers.TPESampler(seed=settings.seed + worker, n_startup_trials=settings.startup_trials),
        pruner=optuna.pruners.MedianPruner(
            n_startup_trials=settings.startup_trials, n_warmup_steps=settings.warmup_steps
        ),
        load_if_exists=True,
    )
    mine = json.loads(json.dumps(settings.recorded()))
    theirs = study.user_attrs.get("settings")
    if theirs is None:
        study.set_user_attr("settings", mine)
    elif theirs != mine:
        differ = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        raise ValueError(
            f"tune: study {settings.study_name!r} in {settings.storage_url()} was started with other settings "
            f"({', '.join(differ)} differ); give the same ones, or a new --study or --out"
        )
    return study


def counted(study: optuna.Study, running: bool = False) -> int:
    """Finished trials of ``study`` (complete or pruned; with ``running`` also those in progress)."""
    from optuna.trial import TrialState

    states = (TrialState.COMPLETE, TrialState.PRUNED, *((TrialState.RUNNING,) if running else ()))
    return len(study.get_trials(deepcopy=False, states=states))


def _objective(
    settings: TuneSettings, target: TuneTarget, progress: bool, stops: SafePoints
) -> Callable[[optuna.Trial], float]:
    import optuna

    shown = {"progress": progress} if "progress" in inspect.signature(target.objective).parameters else {}

    def objective(trial: optuna.Trial) -> float:
        with stops.open():
            with stops.closed():  # the sampled values are written to the study
                config = settings.config(target, target.sample(Fixing(trial, settings.fixed)))

            def report(step: int, value: float) -> None:
                with stops.closed():
                    trial.report(value, step)
                    prune = trial.should_prune()
                if prune:
                    raise optuna.TrialPruned(f"validation {value:.4f} at step {step}")

            out = Path(settings.out).resolve() / "trials" / f"trial-{trial.number:04d}"
            return target.objective(config, out, report, **shown)

    return objective


#: Exit code of a worker process stopped by Ctrl-C (its trial is marked failed), as the command line's.
EXIT_INTERRUPTED = 130


def running_note(trials: Sequence[optuna.trial.FrozenTrial], now: datetime) -> str:
    """The running trials as the tune bar's note: each one's number, time so far and last reported step."""
    from optuna.trial import TrialState

    notes = []
    for t in trials:
        if t.state != TrialState.RUNNING or t.datetime_start is None:
            continue
        step = f" step {max(t.intermediate_values)}" if t.intermediate_values else ""
        notes.append(f"#{t.number} {(now - t.datetime_start).total_seconds():.0f}s{step}")
    return f"running {', '.join(notes)}" if notes else ""


class _QuietInterrupt(logging.Filter):
    """Drops optuna's traceback of a trial stopped by Ctrl-C (optuna marks it failed; one line says so instead)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt):
            log.warning("%s", record.getMessage().partition(" with parameters")[0].replace("failed", "interrupted"))
            return False
        return True


def run_worker(
    settings: TuneSettings, worker: int = 0, progress: bool = False, on_trial: Callable[[int], None] | None = None
) -> None:
    """Run trials of the study until it holds ``settings.trials`` finished ones.

    While the rest are running elsewhere it waits for them: they finish, or their worker died and
    they go stale (no heartbeat for ``grace_s``), are marked failed and run again here. With
    ``progress`` each trial shows its trainer's progress bars (iterations, episodes) on stderr;
    ``on_trial`` is told the study's finished count after each trial this worker ran. Ctrl-C and
    SIGTERM are delivered at once inside a trial's objective (optuna then fails the trial) and in the wait
    between trials, and held while optuna creates, records or tells a trial, so that no stop leaves a
    trial RUNNING for a rerun to wait out (:class:`~arena_gym.safe_points.SafePoints`).
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trials_log = logging.getLogger("optuna.study._optimize")
    if not any(isinstance(f, _QuietInterrupt) for f in trials_log.filters):  # once per process
        trials_log.addFilter(_QuietInterrupt())
    logging.getLogger("traces").setLevel(logging.WARNING)
    logging.getLogger("envs.workload").setLevel(logging.WARNING)
    study = open_study(settings, worker)
    target = get_target(settings.target)
    with SafePoints().installed() as stops:
        objective = _objective(settings, target, progress, stops)
        while counted(study) < settings.trials:
            stops.deliver_held()
            with warnings.catch_warnings():  # marked experimental, like the heartbeat it reads
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(study)
            fail_unbeaten_trials(study, settings.grace_s)
            if counted(study, running=True) < settings.trials:
                study.optimize(objective, n_trials=1, gc_after_trial=True)
                if on_trial is not None:
                    on_trial(counted(study))
            else:
                with stops.open():
                    time.sleep(min(settings.heartbeat_s, 5))
        stops.deliver_held()


def _worker_process(settings: TuneSettings, worker: int) -> None:
    """A spawned worker: Ctrl-C, or a first SIGTERM (a process-group kill: a batch system stopping the command),
    ends it quietly with :data:`EXIT_INTERRUPTED` once optuna has failed its trial (or recorded the trial it
    was recording: see :class:`SafePoints`), so that a rerun takes the trial up at once rather than after the
    heartbeat's grace."""
    signal.signal(signal.SIGTERM, _interrupt_once)
    try:
        run_worker(settings, worker)
    except KeyboardInterrupt:
        raise SystemExit(EXIT_INTERRUPTED) from None


def _interrupt_once(signum: int, frame: object) -> None:
    """A worker's SIGTERM handler: the first one is Ctrl-C; any later one ends the process at once."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    raise KeyboardInterrupt


def _stop(workers: list[Any], first_s: float = 2.0, patience_s: float = 10.0) -> None:
    """End the workers still running so that each marks its trial failed: Ctrl-C (SIGINT), SIGKILL after ``patience_s``.

    Workers a terminal's Ctrl-C already reached are given ``first_s`` to finish on their own.
    """
    deadline = time.monotonic() + first_s
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    for w in workers:
        if w.is_alive() and w.pid is not None:
            os.kill(w.pid, signal.SIGINT)
    deadline = time.monotonic() + patience_s
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
        if w.is_alive():
            w.kill()
            w.join()


class Tuner:
    """Runs :class:`TuneSettings` into its output directory: the study, ``trials.csv``, ``history.png``, the best config."""

    def __init__(self, settings: TuneSettings, replace: bool = False) -> None:
        """``replace``: a results directory that records no kind is taken as this study's (its own is always continued)."""
        self.settings = settings
        self.target = get_target(settings.target)
        self.out = check_out_dir(settings.out, kind=KIND, replace=replace, resume=True)
        if settings.storage is not None:
            check_storage(settings.storage)
        self.target.sample(Fixing(_FirstChoice(), settings.fixed))  # a fixed tuned value must be one it may take
        config = settings.config(self.target, {})  # every fixed field is checked before any trial
        self.target.check(config)

    def run(self, progress: bool = True) -> dict[str, Any]:
        """Run the workers until the study holds ``trials`` finished trials; write the files; the best trial's summary."""
        import optuna

        s = self.settings
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.out.mkdir(parents=True, exist_ok=True)
        study = open_study(s)
        write_json(self.out / "config.json", {"kind": KIND, "code_version": code_version(), "seed": s.seed, "tune": s})
        with tqdm(total=s.trials, initial=counted(study), desc="tune", unit="trial", disable=not progress) as bar:
            if s.workers == 1:
                run_worker(s, progress=progress, on_trial=lambda done: bar.update(done - bar.n))
            else:
                self._spawn(study, bar)
            bar.update(counted(study) - bar.n)
        return self.write(study)

    def _spawn(self, study: optuna.Study, bar: tqdm) -> None:
        context = multiprocessing.get_context("spawn")
        workers = [
            context.Process(target=_worker_process, args=(self.settings, i)) for i in range(self.settings.workers)
        ]
        for w in workers:
            w.start()
        try:
            while any(w.is_alive() for w in workers):
                time.sleep(2.0)
                if (done := counted(study)) > bar.n:
                    bar.update(done - bar.n)
                bar.set_postfix_str(running_note(study.get_trials(deepcopy=False), datetime.now()))
        finally:
            _stop(workers)
        failed = [f"{i} (exit code {w.exitcode})" for i, w in enumerate(workers) if w.exitcode]
        if failed:
            raise RuntimeError(
                f"tune: worker {', '.join(failed)} failed; the finished trials stay in {self.settings.storage_url()}, "
                "and the same command continues the study"
            )

    def write(self, study: optuna.Study) -> dict[str, Any]:
        """``trials.csv``, ``history.png`` and ``best_config.json`` of the study as it stands."""
        import optuna

        from arena_gym.harness.eval_plots import plot_study

        if not study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            raise ValueError(f"tune: no trial of study {self.settings.study_name!r} has completed; nothing to write")

        trials = study.trials_dataframe(attrs=("number", "value", "state", "params", "duration"))
        trials["duration_s"] = trials.pop("duration").dt.total_seconds()
        last = {
            t.number: t.intermediate_values[max(t.intermediate_values)] for t in study.trials if t.intermediate_values
        }
        trials["last_reported"] = trials["number"].map(last)
        trials.to_csv(self.out / "trials.csv", index=False)
        plot_study(trials, self.out / "history.png")
        best = study.best_trial
        # the values the trial trained with, a fixed tuned parameter included (it is fixed in the best config too)
        sampled = self.target.sample(Fixing(optuna.trial.FixedTrial(best.params), self.settings.fixed))
        config = self.settings.config(self.target, sampled, budget=False)
        summary = {
            "code_version": code_version(),
            "seed": self.settings.seed,
            "study": self.settings.study_name,
            "trial": best.number,
            "value": best.value,
            "params": best.params,
            "trials": {state: int(n) for state, n in trials["state"].value_counts().items()},
            "config": self.target.config_json(config),
        }
        write_json(self.out / "best_config.json", summary)
        return summary
