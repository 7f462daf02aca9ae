"""Expert iteration (DAgger) for a slot-action agent, with a search policy as teacher.

From a trained SB3 model (``warm_start``, e.g. ``arena-gym train``'s ``best_model.zip``; its
recorded EnvConfig is the env), every round plays ``episodes`` train windows with the DAgger
mixture (:mod:`agents.rl.dagger`: the teacher's action with probability ``beta ** (round - 1)``,
else the agent's greedy action), labels every visited state with the teacher's action,
adds them to the data of all earlier rounds, and fits the policy by masked cross-entropy and
the value head to the returns (:func:`agents.rl.bc.behaviour_clone`). After every round the
model is scored on the validation windows against Arena (the selection score of every trainer,
:mod:`arena_gym.harness.selection`); the best one is ``best_model.zip``.

Labelling is the expensive part (the teacher searches at every decision point) and runs as
one task per episode: in this process, in ``workers`` local processes, or as Ray tasks on the
cluster at ``ray``. An episode's labels depend only on (model, teacher, beta, seed), never on
where it ran.

The run writes ``config.json`` (config, env config, code version), ``history.csv`` / ``.png``
(one row per round, round 0 the warm start), ``rounds/round_N.zip`` and ``best_model.zip``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from agents.rl.algos import algo_spec, greedy_action
from agents.rl.artifact import ModelInfo, load_model, read_model_info, save_model
from agents.rl.bc import BCConfig, ExpertData, behaviour_clone
from agents.rl.config import EVAL_SPLIT, TrainConfig
from agents.rl.dagger import LabelledEpisode, label_episode
from arena_gym.fields import Problems, check_fields
from arena_gym.harness.out_dirs import check_out_dir
from arena_gym.harness.scoring import Evaluator, model_policy
from arena_gym.harness.selection import Selection
from arena_gym.harness.sweep import run_tasks
from arena_gym.harness.trainers.trainer_method import TrainerMethod
from arena_gym.outputs import code_version, write_csv, write_json
from arena_gym.registry import make_policy
from envs.config import EnvConfig

if TYPE_CHECKING:
    import optuna

    from arena_gym.harness.tune import Report

log = logging.getLogger(__name__)

#: The kind of results directory this trainer writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "train:expert-iteration"


#: The columns of a round's row in ``history.csv`` besides ``round`` and ``validation_score``.
ROUND_FIELDS = (
    "beta",
    "samples",
    "new_samples",
    "decisions",
    "agent_agreement",
    "teacher_played",
    "label_cpu_s",
    "label_wall_s",
    "train_agreement",
    "holdout_agreement",
    "fit_wall_s",
)


@dataclass(frozen=True)
class ExpertIterationConfig:
    """Settings of an expert-iteration run (the fields are the script's options).

    ``warm_start`` the SB3 model to start from (required to run; e.g. ``arena-gym train``'s ``best_model.zip``); ``teacher`` the registered policy that labels;
    ``rounds`` DAgger rounds of ``episodes`` train windows each; ``beta`` the probability of
    playing the teacher's action in round 2 (round ``r`` plays it with ``beta ** (r - 1)``,
    round 1 always); ``epochs``, ``learning_rate``, ``batch_size``, ``holdout`` the fit;
    ``gamma`` the returns' discount; ``eval_limit`` validation windows (0: all); ``seed`` the
    episodes' windows and the fit; ``workers`` local labelling processes, ``ray`` a Ray address
    (or ``auto``) to label on instead (empty: local).
    """

    warm_start: str | None = None
    teacher: str = "lookahead"
    rounds: int = 3
    episodes: int = 4
    beta: float = 0.5
    epochs: int = 10
    learning_rate: float = 3e-4
    batch_size: int = 256
    holdout: float = 0.2
    gamma: float = 0.99
    eval_limit: int = 0
    seed: int = 0
    workers: int = 1
    ray: str = ""

    def __post_init__(self) -> None:
        check_fields(self)
        problems = Problems()
        problems.require(
            self.warm_start is None or bool(self.warm_start),
            "warm_start must name an SB3 model zip (arena-gym train's best_model.zip)",
        )
        for name in ("rounds", "episodes", "epochs", "batch_size", "workers"):
            problems.require(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        problems.require(0.0 <= self.beta <= 1.0, f"beta must be in [0, 1], got {self.beta}")
        problems.require(
            self.learning_rate > 0 and 0.0 <= self.holdout < 1.0 and 0.0 < self.gamma <= 1.0,
            f"need learning_rate > 0, 0 <= holdout < 1, 0 < gamma <= 1; got "
            f"{self.learning_rate}, {self.holdout}, {self.gamma}",
        )
        problems.require(self.eval_limit >= 0, f"eval_limit must be >= 0, got {self.eval_limit}")
        problems.raise_if_any("ExpertIterationConfig")

    def beta_of(self, round_: int) -> float:
        """The probability of playing the teacher's action in round ``round_`` (from 1)."""
        return self.beta ** (round_ - 1)


@dataclass(frozen=True)
class LabelTask:
    """One episode to label: the agent's weights (a model zip's bytes), its env, the teacher and the mixture."""

    model: bytes
    env_config: EnvConfig
    teacher: str
    beta: float
    seed: int
    gamma: float


def episode_seed(seed: int, round_: int, episode: int) -> int:
    """The env reset seed of one episode of one round (a train window drawn from it)."""
    return int(np.random.SeedSequence([seed, round_, episode]).generate_state(1)[0])


def label_task(task: LabelTask) -> tuple[LabelledEpisode, float]:
    """Label one episode (a worker's task); returns it and the process seconds it took."""
    import torch as th

    from envs.arena_env import ArenaSchedEnv

    th.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.zip"
        path.write_bytes(task.model)
        model, _ = load_model(path)
    env = ArenaSchedEnv(config=task.env_config)
    teacher = make_policy(task.teacher, task.seed)
    began = time.process_time()
    try:
        episode = label_episode(
            env, teacher, lambda obs, mask: greedy_action(model, obs, mask), task.beta, task.seed, task.gamma
        )
    finally:
        env.close()
    return episode, time.process_time() - began


class ExpertIteration:
    """Runs :class:`ExpertIterationConfig` into a results directory (see the module docstring)."""

    def __init__(self, config: ExpertIterationConfig, out_dir: str | Path) -> None:
        self.config = config
        if config.warm_start is None:
            raise ValueError(
                "expert iteration needs warm_start: an SB3 model zip to start from (arena-gym train's "
                "best_model.zip; --set warm_start=PATH)"
            )
        self.warm_start: str = config.warm_start
        self.out = check_out_dir(out_dir, kind=KIND)
        self.info: ModelInfo = read_model_info(self.warm_start)
        if algo_spec(self.info.algo).family != "actor_critic":
            raise ValueError(
                f"warm start {config.warm_start}: expert iteration needs an actor-critic model, not {self.info.algo}"
            )
        make_policy(config.teacher)  # an unknown teacher fails here, before any work
        self.evaluator = Evaluator.for_split(
            self.info.env_config, EVAL_SPLIT, TrainConfig().eval_seeds, limit=config.eval_limit
        )
        self.history: list[dict[str, Any]] = []

    def run(self, progress: bool = True) -> dict[str, Any]:
        """All rounds; returns the best round's history row (``round``, ``validation_score``, ...)."""
        cfg, out = self.config, self.out
        (out / "rounds").mkdir(parents=True, exist_ok=True)
        write_json(
            out / "config.json",
            {
                "kind": KIND,
                "config": dataclasses.asdict(cfg),
                "env_id": self.info.env_id,
                "env_config": self.info.to_json()["env_config"],
                "code_version": code_version(),
            },
        )
        model, _ = load_model(self.warm_start)
        info = dataclasses.replace(self.info, code_version=code_version())
        self.selection = Selection(self.evaluator, cfg.seed)
        best = self._record(0, model, info, dict.fromkeys(ROUND_FIELDS, math.nan) | {"samples": 0})
        parts: list[ExpertData] = []
        for round_ in range(1, cfg.rounds + 1):
            began = time.perf_counter()
            episodes, cpu = self._label(round_, out / "rounds" / f"round_{round_ - 1}.zip", progress)
            parts.extend(e.data for e in episodes)
            data = ExpertData.concat(parts)
            labelled = time.perf_counter() - began
            fit = behaviour_clone(
                model,
                data,
                BCConfig(
                    experts=(cfg.teacher,),
                    samples=max(len(data), 2),
                    epochs=cfg.epochs,
                    batch_size=cfg.batch_size,
                    learning_rate=cfg.learning_rate,
                    gamma=cfg.gamma,
                    holdout=cfg.holdout,
                    seed=cfg.seed + round_,
                ),
            )
            row = {
                "beta": cfg.beta_of(round_),
                "samples": len(data),
                "new_samples": sum(len(e.data) for e in episodes),
                "decisions": sum(e.decisions for e in episodes),
                "agent_agreement": float(np.mean([e.agent_agreement for e in episodes])),
                "teacher_played": float(np.mean([e.teacher_played for e in episodes])),
                "label_cpu_s": cpu,
                "label_wall_s": labelled,
                "train_agreement": fit.train_agreement,
                "holdout_agreement": fit.holdout_agreement,
                "fit_wall_s": time.perf_counter() - began - labelled,
            }
            candidate = self._record(round_, model, info, row)
            if candidate["validation_score"] < best["validation_score"]:
                best = candidate
        return best

    def _label(self, round_: int, model_path: Path, progress: bool) -> tuple[list[LabelledEpisode], float]:
        cfg = self.config
        blob = model_path.read_bytes()
        tasks = [
            LabelTask(
                blob,
                self.info.env_config,
                cfg.teacher,
                cfg.beta_of(round_),
                episode_seed(cfg.seed, round_, e),
                cfg.gamma,
            )
            for e in range(cfg.episodes)
        ]
        done = run_tasks(label_task, tasks, cfg.workers, progress, unit="episode", ray=cfg.ray or None)
        return [episode for episode, _ in done], float(sum(cpu for _, cpu in done))

    def _record(self, round_: int, model: Any, info: ModelInfo, row: dict[str, Any]) -> dict[str, Any]:
        """Validate, save the round's model (and the best), append the history row and rewrite the files."""
        from arena_gym.harness.eval_plots import plot_expert_iteration

        _, score = self.selection.score(model_policy(model, info.env_config))
        save_model(model, self.out / "rounds" / f"round_{round_}.zip", info)
        row = {"round": round_, **row, "validation_score": score}
        if all(score < r["validation_score"] for r in self.history):
            save_model(model, self.out / "best_model.zip", info)
        self.history.append(row)
        frame = pd.DataFrame(self.history)
        write_csv(self.out / "history.csv", frame)
        plot_expert_iteration(frame, self.out / "history.png")
        log.info("round %d: validation %.4f of Arena (%d samples)", round_, score, row["samples"])
        return row


class ExpertIterationMethod(TrainerMethod):
    """Expert iteration (DAgger) of a slot agent from a warm start, with a search policy as teacher.

    Tuned: the mixture's decay, the epochs and the learning rate of each refit; the best
    selection score is reported once, at the end.
    """

    config_type = ExpertIterationConfig
    trainer = ExpertIteration

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """beta uniform, epochs from a list, learning_rate log-uniform."""
        return {
            "beta": trial.suggest_float("beta", 0.3, 0.9),
            "epochs": trial.suggest_categorical("epochs", [5, 10, 20]),
            "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True),
        }

    def objective(self, config: ExpertIterationConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out``; the best round's selection score."""
        best = ExpertIteration(config, out).run(progress=progress)
        report(int(best["round"]), float(best["validation_score"]))
        return float(best["validation_score"])


#: ``arena-gym train --method`` / ``tune --target`` expert-iteration: see :data:`arena_gym.harness.trainers.METHODS`.
EXPERT_ITERATION = ExpertIterationMethod()
