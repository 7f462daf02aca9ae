"""Optuna studies: trials, pruning, the stop rule, resuming, two workers on one storage, dead workers, the best config."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import signal
import statistics
import time
from datetime import datetime, timedelta

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState

from arena_gym.harness import tune
from arena_gym.harness.trainers.es import ResidualTrainConfig
from arena_gym.harness.tune import Tuner, TuneSettings, coerce, get_target, open_study, running_note
from tests.arena_gym.harness.quadratic_target import SPEC, QuadConfig, QuadTarget


def settings(tmp_path, **changes) -> TuneSettings:
    values = {
        "target": SPEC,
        "out": str(tmp_path / "study"),
        "trials": 8,
        "workers": 1,
        "startup_trials": 3,
        "warmup_steps": 0,
        "base": {"label": "a"},
        "trial_set": {"steps": 2},
    }
    return TuneSettings(**(values | changes))


def test_a_study_runs_its_trials_prunes_and_writes_the_best_config(tmp_path) -> None:
    best = Tuner(settings(tmp_path)).run(progress=False)
    out = tmp_path / "study"
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == 8 and set(trials["state"]) <= {"COMPLETE", "PRUNED"}
    done = trials[trials["state"] == "COMPLETE"]
    assert best["value"] == pytest.approx(done["value"].min())
    assert best["value"] == pytest.approx((best["params"]["x"] - 1) ** 2 + (best["params"]["y"] + 0.5) ** 2)
    written = json.loads((out / "best_config.json").read_text())
    # the base carries over, the trial budget does not: steps is the default again
    assert written["config"] == {**QuadConfig().__dict__, **best["params"], "label": "a"}
    assert written["code_version"] and written["trials"] == trials["state"].value_counts().to_dict()
    for number in done["number"]:
        assert (out / "trials" / f"trial-{number:04d}" / "done.txt").read_text().split()[1:] == ["2", "a"]
    assert (out / "history.png").stat().st_size > 1000


def test_pruning_stops_trials_worse_than_the_median(tmp_path) -> None:
    s = settings(tmp_path, trials=16, trial_set={"steps": 4})
    Tuner(s).run(progress=False)
    trials = open_study(s).get_trials()
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned
    for t in pruned:
        assert not (tmp_path / "study" / "trials" / f"trial-{t.number:04d}" / "done.txt").exists()
        step = max(t.intermediate_values)
        earlier = [
            u.intermediate_values[step]
            for u in trials
            if u.number < t.number and u.state == optuna.trial.TrialState.COMPLETE
        ]
        assert len(earlier) >= s.startup_trials and t.intermediate_values[step] > statistics.median(earlier)


def test_the_same_command_continues_the_study_and_other_settings_are_refused(tmp_path) -> None:
    Tuner(settings(tmp_path, trials=4)).run(progress=False)
    first = pd.read_csv(tmp_path / "study" / "trials.csv")
    Tuner(settings(tmp_path, trials=7)).run(progress=False)
    again = pd.read_csv(tmp_path / "study" / "trials.csv")
    assert len(again) == 7
    pd.testing.assert_frame_equal(
        again.head(4)[["number", "params_x", "params_y"]], first[["number", "params_x", "params_y"]]
    )
    with pytest.raises(ValueError, match=r"started with other settings \(base differ\)"):
        Tuner(settings(tmp_path, base={"label": "b"})).run(progress=False)


def test_two_workers_share_one_storage(tmp_path) -> None:
    Tuner(settings(tmp_path, trials=6, workers=2, trial_set={"steps": 2, "pause_s": 0.4})).run(progress=False)
    out = tmp_path / "study"
    trials = pd.read_csv(out / "trials.csv")
    assert 6 <= len(trials[trials["state"].isin(["COMPLETE", "PRUNED"])]) <= 7
    pids = {p.read_text().split()[0] for p in (out / "trials").glob("*/done.txt")}
    assert len(pids) == 2


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used with Study.optimize")
@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("heartbeat", [True, False], ids=["after-its-heartbeat", "before-its-first-heartbeat"])
def test_a_trial_whose_worker_died_runs_again(tmp_path, heartbeat) -> None:
    Tuner(settings(tmp_path, trials=1, heartbeat_s=1, grace_s=2)).run(progress=False)
    s = settings(tmp_path, trials=2, heartbeat_s=1, grace_s=2)
    study = open_study(s)
    space = {"x": optuna.distributions.FloatDistribution(-2, 2), "y": optuna.distributions.FloatDistribution(-2, 2)}
    orphan = study.ask(space)  # created running; then its worker is killed
    if heartbeat:
        study._storage.record_heartbeat(orphan._trial_id)  # after its heartbeat thread wrote
    else:
        assert tune.fail_unbeaten_trials(study, s.grace_s) == []  # too young to be given up on
    time.sleep(3)
    if not heartbeat:  # optuna's own check never sees it: counted as running, the study would wait for ever
        optuna.storages.fail_stale_trials(study)
        assert study.get_trials()[orphan.number].state == optuna.trial.TrialState.RUNNING
    Tuner(s).run(progress=False)
    trials = {t.number: t for t in open_study(s).get_trials()}
    assert trials[orphan.number].state == optuna.trial.TrialState.FAIL
    retried = [t for t in trials.values() if t.system_attrs.get("failed_trial") == orphan.number]
    assert len(retried) == 1 and retried[0].params == orphan.params and retried[0].state.is_finished()


def _start_waiting(s: TuneSettings, start_at: float, won) -> None:
    """One worker's storage: at ``start_at`` it tries to start every waiting trial; ``won`` gets those it started."""
    storage = tune._storage(s)
    study_id = storage.get_study_id_from_name(s.study_name)
    waiting = [t._trial_id for t in storage.get_all_trials(study_id, states=(TrialState.WAITING,))]
    time.sleep(max(0.0, start_at - time.time()))
    won.put([i for i in waiting if storage.set_trial_state_values(i, state=TrialState.RUNNING)])


@pytest.mark.timeout(120)
def test_a_waiting_trial_starts_in_one_worker_only(tmp_path) -> None:
    """Trials queued to run again (a dead worker's) are taken by exactly one of the workers racing for them."""
    s = settings(tmp_path)
    (tmp_path / "study").mkdir()
    study = open_study(s)
    for i in range(60):
        study.enqueue_trial({"x": i / 60, "y": 0.0})
    spawn = multiprocessing.get_context("spawn")
    won = spawn.Queue()
    workers = [spawn.Process(target=_start_waiting, args=(s, time.time() + 5.0, won)) for _ in range(4)]
    for w in workers:
        w.start()
    started = [i for _ in workers for i in won.get(timeout=100)]
    for w in workers:
        w.join(timeout=10)
    assert sorted(started) == sorted(t._trial_id for t in study.get_trials()) and len(set(started)) == 60


def _ctrl_c(*_args) -> None:
    raise KeyboardInterrupt


def test_a_worker_stopped_by_ctrl_c_exits_quietly_with_the_interrupt_code(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tune, "run_worker", _ctrl_c)
    with pytest.raises(SystemExit) as stopped:
        tune._worker_process(settings(tmp_path), 1)
    assert stopped.value.code == tune.EXIT_INTERRUPTED


def test_a_worker_s_other_errors_propagate(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tune, "run_worker", lambda *_: {}["missing"])
    with pytest.raises(KeyError):
        tune._worker_process(settings(tmp_path), 1)


def _signal_self(signum: int) -> None:
    """Send ``signum`` to this process and give its handler the next instructions to run in."""
    os.kill(os.getpid(), signum)
    for _ in range(1000):
        time.sleep(0)


def test_ctrl_c_while_optuna_records_a_trial_lets_it_finish_recording(tmp_path, monkeypatch, ctrl_c_raises) -> None:
    record = optuna.storages.RDBStorage.set_trial_state_values

    def interrupted_while_recording(self, trial_id, state, values=None):
        if state == TrialState.COMPLETE:
            _signal_self(signal.SIGINT)  # lands inside optuna's bookkeeping, after the objective returned
        return record(self, trial_id, state, values)

    monkeypatch.setattr(optuna.storages.RDBStorage, "set_trial_state_values", interrupted_while_recording)
    s = settings(tmp_path, trials=3)
    (tmp_path / "study").mkdir()
    with pytest.raises(KeyboardInterrupt):
        tune.run_worker(s)
    monkeypatch.undo()
    states = [t.state for t in open_study(s).get_trials(deepcopy=False)]
    assert states == [TrialState.COMPLETE]  # recorded whole, and the worker stopped before the next trial


def test_bad_settings_are_refused_before_any_trial(tmp_path) -> None:
    with pytest.raises(ValueError, match="'broken' cannot run"):
        Tuner(settings(tmp_path, base={"label": "broken"}))
    with pytest.raises(ValueError, match="QuadConfig has no field 'z'"):
        Tuner(settings(tmp_path, trial_set={"z": 1}))
    with pytest.raises(ValueError, match="unknown tune target 'nope'"):
        get_target("nope")
    with pytest.raises(ValueError, match="heartbeat_s < grace_s"):
        settings(tmp_path, heartbeat_s=5, grace_s=5)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="not an arena-gym results directory"):
        Tuner(settings(tmp_path, out=str(tmp_path / "mine")))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep"
    assert not (tmp_path / "study").exists()


def test_a_study_without_a_complete_trial_says_so(tmp_path) -> None:
    with pytest.raises(ValueError, match="no trial of study .* has completed"):
        Tuner(settings(tmp_path, trials=2, base={"label": "prune"})).run(progress=False)
    assert not (tmp_path / "study" / "trials.csv").exists() and not (tmp_path / "study" / "best_config.json").exists()


def test_values_are_coerced_to_the_fields_types() -> None:
    assert coerce(ResidualTrainConfig, "iterations", "3") == 3
    assert coerce(ResidualTrainConfig, "sigma", "0.5") == 0.5
    assert coerce(ResidualTrainConfig, "loads", "0.6,0.9") == (0.6, 0.9)
    assert coerce(ResidualTrainConfig, "loads", [1.2]) == (1.2,)
    assert coerce(ResidualTrainConfig, "data_dir", "data") == "data"
    with pytest.raises(ValueError, match="ResidualTrainConfig.iterations: bad value 'many': expected an integer"):
        coerce(ResidualTrainConfig, "iterations", "many")


def test_fixed_values_are_read_as_coerce_reads_them() -> None:
    fixing = tune.Fixing(tune._FirstChoice(), {"n": "8.0", "x": "1e-3", "k": 3, "b": "true", "f": True, "c": "2"})
    assert fixing.suggest_int("n", 1, 10) == 8 and fixing.suggest_float("x", 0.0, 1.0) == 0.001
    assert fixing.suggest_int("k", 1, 10) == 3 and fixing.suggest_categorical("c", [1, 4]) == 2
    with pytest.raises(ValueError, match=r"^tune: b='true' is not an integer$"):  # coerce refuses it too
        fixing.suggest_int("b", 1, 10)
    with pytest.raises(ValueError, match=r"^tune: f=True is not a number$"):
        fixing.suggest_float("f", 0.0, 1.0)
    with pytest.raises(ValueError, match="QuadConfig.steps must be an integer, got True"):
        coerce(QuadConfig, "steps", "true")


def test_a_residual_study_trains_real_trials(shared_data, tmp_path) -> None:
    budget = {"iterations": 1, "windows": 1, "validation_limit": 1, "workers": 1, "pairs": 1}
    s = TuneSettings(
        target="residual",
        out=str(tmp_path / "study"),
        trials=2,
        workers=1,
        startup_trials=2,
        base={"data_dir": str(shared_data)},
        trial_set=budget,
    )
    best = Tuner(s).run(progress=False)
    # pairs, tuned but fixed by the budget, is not sampled: the trials ran with 1 and the best config says so
    assert 0.5 < best["value"] < 2.0 and set(best["params"]) == {"sigma", "learning_rate", "clip"}
    config = ResidualTrainConfig(**{k: coerce(ResidualTrainConfig, k, v) for k, v in best["config"].items()})
    assert config.iterations == ResidualTrainConfig.iterations and config.pairs == 1
    assert config.data_dir == str(shared_data)
    history = pd.read_csv(tmp_path / "study" / "trials" / f"trial-{best['trial']:04d}" / "history.csv")
    assert history["validation_geomean_ratio"].iloc[-1] == pytest.approx(best["value"])


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_ppo_study_trains_agents_and_its_best_config_feeds_train(tmp_path, env_overrides) -> None:
    from agents.rl.config import TrainConfig
    from tests.rl_cases import ENV_ID

    budget = {"steps": 256, "n_steps": 128, "eval_every": 128, "checkpoint_every": 0, "n_envs": 1}
    base = {"env_id": ENV_ID, "env_overrides": env_overrides, "eval_seeds": [1000], "eval_baselines": ["arena"]}
    s = TuneSettings(target="ppo", out=str(tmp_path / "study"), trials=2, workers=1, base=base, trial_set=budget)
    best = Tuner(s).run(progress=False)
    history = pd.read_csv(tmp_path / "study" / "trials" / f"trial-{best['trial']:04d}" / "eval_history.csv")
    assert sorted(history["timesteps"].unique()) == [0, 128, 256]
    config = TrainConfig.from_json(best["config"])
    assert config.steps == TrainConfig.steps and config.env_id == ENV_ID  # the budget is not the best config's
    assert config.net_arch == {"small": (64, 64), "medium": (128, 128), "large": (256, 256)}[best["params"]["net_arch"]]
    assert config.learning_rate == pytest.approx(best["params"]["learning_rate"])


class ShowingTarget(QuadTarget):
    """The quadratic, writing down (in the study's folder) whether each trial was asked to show progress."""

    def objective(self, config, out, report, progress=False):
        with (out.parent.parent / "events.txt").open("a") as f:
            f.write(f"trial progress={progress}\n")
        return super().objective(config, out, report)


SHOWING = ShowingTarget()


def test_in_one_process_each_trial_shows_its_trainers_progress_and_the_bar_counts_it(tmp_path, monkeypatch) -> None:
    import arena_gym.harness.tune as tune_module

    events = tmp_path / "study" / "events.txt"

    class RecordedBar(tune_module.tqdm):
        def update(self, n=1):
            with events.open("a") as f:
                f.write(f"bar +{n}\n")
            return super().update(n)

    monkeypatch.setattr(tune_module, "tqdm", RecordedBar)
    s = settings(tmp_path, target="tests.arena_gym.harness.test_tune:SHOWING", trials=3, startup_trials=5)
    Tuner(s).run(progress=True)
    lines = events.read_text().splitlines()
    assert lines[:4] == ["trial progress=True", "bar +1", "trial progress=True", "bar +1"]  # counted as it goes
    events.unlink()
    Tuner(dataclasses.replace(s, trials=4)).run(progress=False)
    assert events.read_text().splitlines()[0] == "trial progress=False"


def frozen(number: int, state: TrialState, start: datetime, steps: dict[int, float]) -> optuna.trial.FrozenTrial:
    return optuna.trial.FrozenTrial(
        number=number,
        state=state,
        value=None,
        datetime_start=start,
        datetime_complete=None,
        params={},
        distributions={},
        user_attrs={},
        system_attrs={},
        intermediate_values=steps,
        trial_id=number,
    )


def test_the_note_of_running_trials_names_each_with_its_time_and_last_step() -> None:
    start = datetime(2026, 1, 1, 12, 0, 0)
    trials = [
        frozen(2, TrialState.PRUNED, start, {1: 0.9}),
        frozen(3, TrialState.RUNNING, start, {1: 0.5, 2: 0.4}),
        frozen(4, TrialState.RUNNING, start + timedelta(seconds=40), {}),
    ]
    assert running_note(trials, start + timedelta(seconds=42)) == "running #3 42s step 2, #4 2s"
    assert running_note(trials[:1], start) == ""


def test_a_database_that_cannot_be_reached_is_one_line(tmp_path) -> None:
    tune.check_connection(f"sqlite:///{tmp_path / 'reachable.db'}")
    with pytest.raises(ValueError) as err:
        tune.check_connection(f"sqlite:///{tmp_path / 'no' / 'such' / 'folder.db'}")
    assert str(err.value).startswith(f"tune --storage 'sqlite:///{tmp_path}/no/such/folder.db': cannot connect (")
    assert "\n" not in str(err.value)
