"""``arena-gym train --method sb3``: TrainConfig -> vectorised envs, optional BC warm start, SB3 learning, validation.

``train(config)`` writes into ``config.out_dir``: ``config.json`` (config, resolved EnvConfig,
seed, code version), ``checkpoints/`` (SB3 zips with their optimizer state, plus
``arena_gym.json``; each ``model_N_steps.zip`` beside a ``model_N_steps.json`` holding the config
hash), ``learning_curve.csv`` and ``.png``, ``eval_history.csv`` (every
validation during training), ``eval.csv`` (final and best model vs the baselines on the
validation workloads, one row per policy and workload), ``eval_summary.csv``, ``model.zip``
(final) and ``best_model.zip`` (best validation score with every job finished, over the
periodic validations and the final model). ``resume(out_dir)`` continues a run from its
latest checkpoint, written under the same config. A new run goes only into a new or empty
directory or, with ``replace``, an earlier finished training run (replaced as a whole once the
new run is complete: :func:`arena_gym.harness.out_dirs.filled_dir`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import torch as th
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from agents.rl.algos import algo_spec, policy_class
from agents.rl.artifact import ModelInfo, load_model, save_model, write_sidecar
from agents.rl.bc import BCConfig, BCResult, warm_start
from agents.rl.config import EVAL_SPLIT, TRAIN_SPLIT, TrainConfig
from agents.rl.env_factory import env_config, make_env, make_training_vec_env
from arena_gym.harness.callbacks import (
    ArenaEvalCallback,
    LearningCurveCallback,
    ProgressBarCallback,
    StampedCheckpointCallback,
    WandbScalarCallback,
)
from arena_gym.harness.eval_plots import plot_learning_curve
from arena_gym.harness.out_dirs import check_out_dir, filled_dir
from arena_gym.harness.scoring import Evaluator, baseline_policies, mean_avg_jct, model_policy, summarise
from arena_gym.harness.selection import Selection
from arena_gym.harness.tracking import finish_run, start_run
from arena_gym.outputs import code_version, write_csv, write_json

if TYPE_CHECKING:
    import optuna

    from arena_gym.harness.tune import Report

log = logging.getLogger(__name__)

_CHECKPOINT = re.compile(r"^model_(\d+)_steps\.zip$")
#: TrainConfig fields a resume may change (the budget, where and how it is reported): outside the config hash.
_UNHASHED = ("steps", "out_dir", "wandb_mode", "wandb_project", "progress")
#: The kind of results directory an sb3 run writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "train:sb3"

__all__ = [
    "SB3",
    "SB3Method",
    "TrainConfig",
    "TrainResult",
    "build_model",
    "config_hash",
    "latest_checkpoint",
    "resume",
    "train",
]


@dataclass(frozen=True)
class TrainResult:
    """Where a run's outputs are, and its final validation figures (mean avg JCT per policy, seconds)."""

    out_dir: Path
    model_path: Path
    best_model_path: Path | None
    learning_curve_path: Path
    eval_path: Path
    metrics: Mapping[str, float]
    timesteps: int
    wall_s: float
    bc: BCResult | None = None


def build_model(config: TrainConfig, env: Any) -> Any:
    """The SB3 model of ``config.algo`` with the ``config.policy`` network on ``env`` (CPU, seeded)."""
    spec = algo_spec(config.algo)
    kwargs = {**spec.defaults, **{p: getattr(config, p) for p in spec.params}, **dict(config.algo_kwargs)}
    try:
        return spec.cls()(
            policy_class(config.algo, config.policy),
            env,
            seed=config.seed,
            device="cpu",
            verbose=0,
            policy_kwargs={"net_arch": list(config.net_arch)},
            **kwargs,
        )
    except (TypeError, AssertionError) as exc:
        raise ValueError(f"bad hyperparameters for {config.algo}: {str(exc).splitlines()[0]}") from None


def latest_checkpoint(out_dir: Path) -> tuple[Path, int] | None:
    """The newest ``checkpoints/model_N_steps.zip`` of a run and its step count N, or None."""
    found = [
        (int(m.group(1)), p)
        for p in (Path(out_dir) / "checkpoints").glob("model_*_steps.zip")
        if (m := _CHECKPOINT.match(p.name))
    ]
    if not found:
        return None
    steps, path = max(found)
    return path, steps


def config_hash(config: TrainConfig) -> str:
    """A short hash of what determines a run's learning (every field but :data:`_UNHASHED`)."""
    data = {k: v for k, v in config.to_json().items() if k not in _UNHASHED}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def checkpoint_hash(checkpoint: Path) -> str | None:
    """The config hash stamped beside a checkpoint (``model_N_steps.json``), or None when there is none."""
    try:
        value = json.loads(checkpoint.with_suffix(".json").read_text(encoding="utf-8")).get("config_hash")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _finished_steps(out: Path) -> int | None:
    """The steps a run's ``result.json`` records, or None when it has none (not finished)."""
    try:
        steps = json.loads((out / "result.json").read_text(encoding="utf-8"))["timesteps"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return steps if isinstance(steps, int) else None


def is_train_run(out: Path) -> bool:
    """Whether ``out`` holds a training run (its ``config.json`` has a ``train`` section)."""
    try:
        data = json.loads((Path(out) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "train" in data


def prepare_run_dir(out_dir: str | Path, replace: bool = False) -> Path:
    """The directory of a new run: new, empty, or (with ``replace``) an earlier finished training run.

    Refused (one-line ValueError): anything :func:`arena_gym.harness.out_dirs.check_out_dir`
    refuses for kind ``train:sb3`` (another command's results; a finished run without
    ``replace``), and an unfinished run with a checkpoint (resume it instead): nothing of an
    earlier run can mix with the new one, and nothing is removed here.
    """
    out = check_out_dir(out_dir, kind=KIND, replace=True)  # another command's results: refused
    if out.is_dir() and any(out.iterdir()) and is_train_run(out):
        checkpoint, done = latest_checkpoint(out), _finished_steps(out)
        if checkpoint is not None and (done is None or done < checkpoint[1]):
            raise ValueError(
                f"--out {out_dir}: holds an unfinished training run (latest checkpoint at {checkpoint[1]} steps); "
                f"continue it with --resume {out_dir} or name another directory"
            )
    return check_out_dir(out_dir, kind=KIND, replace=replace)


def _validation(config: TrainConfig) -> Evaluator:
    return Evaluator.for_split(
        env_config(config.env_id, config.env_overrides_for(EVAL_SPLIT)),
        EVAL_SPLIT,
        config.eval_seeds,
        limit=config.eval_limit,
    )


def _callbacks(
    config: TrainConfig,
    out: Path,
    run: Any,
    selection: Selection,
    baselines: Mapping[str, Any],
    info: ModelInfo,
    model: Any,
    start_steps: int,
) -> tuple[list[BaseCallback], LearningCurveCallback, ArenaEvalCallback | None]:
    curve = LearningCurveCallback(run, out / "learning_curve.csv")
    callbacks: list[BaseCallback] = [
        curve,
        ProgressBarCallback(config.steps, config.progress, start_steps),
        WandbScalarCallback(run, every=max(config.steps // 200, 1)),
    ]
    if config.checkpoint_every:
        write_sidecar(out / "checkpoints", info)
        callbacks.append(
            StampedCheckpointCallback(
                config_hash(config), max(config.checkpoint_every // config.n_envs, 1), str(out / "checkpoints")
            )
        )
    evaluation = None
    if config.eval_every:
        evaluation = ArenaEvalCallback(
            selection,
            lambda m: model_policy(m, info.env_config),
            baselines,
            config.eval_every,
            out / "eval_history.csv",
            run,
            on_new_best=lambda: save_model(model, out / "best_model.zip", info),
        )
        callbacks.append(evaluation)
    return callbacks, curve, evaluation


def train(
    config: TrainConfig, on_validation: Callable[[int, float], None] | None = None, replace: bool = False
) -> TrainResult:
    """Train ``config.algo`` on ``config.env_id``, validate it against the baselines, and write the run folder.

    The run folder must be new, empty or, with ``replace``, an earlier finished training run
    (:func:`prepare_run_dir`), which the new run replaces once complete (an interrupted
    replacement leaves it as it was). ``on_validation`` sees (steps, selection score) after
    every validation (a tuner prunes there).
    """
    env_config(config.env_id, config.env_overrides_for(TRAIN_SPLIT))  # a bad override fails before anything is touched
    with filled_dir(prepare_run_dir(config.out_dir, replace)) as work:
        return _run(config, resume_from=None, on_validation=on_validation, work=work)


def resume(out_dir: str | Path, steps: int | None = None) -> TrainResult:
    """Continue the run in ``out_dir`` from its latest checkpoint up to its ``steps`` (or ``steps``, if given).

    The config is read back from ``config.json``; the model's weights and optimizer state come
    from the checkpoint (nothing unpickled), the validation history, best score and learning
    curve from the run's files. The envs restart with fresh workloads (seeds offset by the
    checkpoint's step count), so no training workload is replayed.
    """
    out = Path(out_dir)
    meta = out / "config.json"
    if not meta.is_file():
        raise ValueError(f"cannot resume {out}: no config.json (not a training run directory)")
    try:
        config = TrainConfig.from_json(json.loads(meta.read_text())["train"])
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot resume {out}: config.json is not a training config ({exc})") from None
    if steps is not None:
        config = TrainConfig.from_json({**config.to_json(), "steps": steps})
    checkpoint = latest_checkpoint(out)
    if checkpoint is None:
        raise ValueError(f"cannot resume {out}: no checkpoints/model_N_steps.zip (checkpoint_every was 0?)")
    stamped, expected = checkpoint_hash(checkpoint[0]), config_hash(config)
    if stamped != expected:
        raise ValueError(
            f"cannot resume {out}: checkpoint {checkpoint[0].name} was written under another config "
            f"(config hash {stamped or 'missing'}, config.json's {expected}); start a new run instead"
        )
    if checkpoint[1] >= config.steps:
        raise ValueError(
            f"cannot resume {out}: its latest checkpoint is at {checkpoint[1]} of {config.steps} steps "
            "(give more steps)"
        )
    return _run(config, resume_from=checkpoint, work=Path(config.out_dir))


def _run(
    config: TrainConfig,
    resume_from: tuple[Path, int] | None,
    work: Path,
    on_validation: Callable[[int, float], None] | None = None,
) -> TrainResult:
    """Train into ``work`` (``config.out_dir`` or, while replacing an earlier run, a staged directory that
    becomes it); the result names the files at ``config.out_dir``."""
    th.set_num_threads(1)
    start = time.perf_counter()
    out, home = work, Path(config.out_dir)
    env_cfg = env_config(config.env_id, config.env_overrides_for(TRAIN_SPLIT))  # validates the overrides first
    out.mkdir(parents=True, exist_ok=True)
    start_steps = resume_from[1] if resume_from else 0
    info = ModelInfo(config.algo, config.env_id, env_cfg, code_version(), config.policy)
    write_json(
        out / "config.json",
        {
            "kind": KIND,
            "train": config.to_json(),
            "env_config": info.to_json()["env_config"],
            "seed": config.seed,
            "code_version": info.code_version,
            "resumed_from_steps": start_steps,
        },
    )
    run = start_run(out, config.to_json(), "train", config.wandb_mode, config.wandb_project)
    venv = make_training_vec_env(
        config.env_id, config.env_overrides_for(TRAIN_SPLIT), config.n_envs, config.vec, config.seed + start_steps
    )
    try:
        model = build_model(config, venv)
        bc = None
        if resume_from is not None:
            model.set_parameters(str(resume_from[0]), exact_match=True, device="cpu")
            model.num_timesteps = start_steps
            log.info("resumed from %s (%d steps)", resume_from[0], start_steps)
        elif config.bc_warm_start_steps:
            bc_env = make_env(config.env_id, config.env_overrides_for(TRAIN_SPLIT))
            bc = warm_start(
                model,
                bc_env,
                BCConfig(
                    experts=config.bc_expert,
                    samples=config.bc_warm_start_steps,
                    epochs=config.bc_epochs,
                    gamma=config.gamma,
                    seed=config.training_seeds[-1],
                ),
            )
            bc_env.close()
            run.log({f"bc/{k}": float(v) for k, v in vars(bc).items()}, step=0)
        evaluator = _validation(config)
        baselines = baseline_policies(config.eval_baselines, config.seed)
        selection = Selection(evaluator, config.seed)
        callbacks, curve, evaluation = _callbacks(config, out, run, selection, baselines, info, model, start_steps)
        if evaluation is not None:
            evaluation.on_score = on_validation
        if resume_from is not None and evaluation is not None:
            evaluation.restore(out / "eval_history.csv", start_steps)
        model.learn(
            total_timesteps=config.steps - start_steps,
            callback=CallbackList(callbacks),
            reset_num_timesteps=resume_from is None,
        )
        model_path = save_model(model, out / "model.zip", info)
        table, best_path = _final_table(selection, evaluation, baselines, model, out / "best_model.zip", info)
        eval_path = write_csv(out / "eval.csv", table)
        write_csv(out / "eval_summary.csv", summarise(table))
        episodes = curve.frame()
        curve_path = write_csv(out / "learning_curve.csv", episodes)
        history = evaluation.frame() if evaluation is not None else table.assign(timesteps=model.num_timesteps)
        plot_learning_curve(episodes, history, out / "learning_curve.png")
        metrics = {f"{p}_avg_jct_s": mean_avg_jct(table, p) for p in table["policy"].unique()}
        wall = time.perf_counter() - start
        _log_final(run, table, metrics, out, model.num_timesteps)
    finally:
        venv.close()
        finish_run(run)
    model_path, curve_path, eval_path = (home / p.relative_to(out) for p in (model_path, curve_path, eval_path))
    best_path = home / best_path.relative_to(out) if best_path else None
    result = TrainResult(
        home, model_path, best_path, curve_path, eval_path, metrics, int(model.num_timesteps), wall, bc
    )
    write_json(
        out / "result.json",
        {
            "metrics": metrics,
            "timesteps": result.timesteps,
            "wall_s": wall,
            "resumed_from_steps": start_steps,
            "bc": bc,
            "model": str(model_path),
            "best_model": str(best_path) if best_path else None,
        },
    )
    log.info(
        "trained %d steps in %.0f s: %s",
        result.timesteps,
        wall,
        ", ".join(f"{k} {v / 3600:.2f} h" for k, v in metrics.items() if math.isfinite(v)),
    )
    return result


def _final_table(
    selection: Selection,
    evaluation: ArenaEvalCallback | None,
    baselines: Mapping[str, Any],
    model: Any,
    best_path: Path,
    info: ModelInfo,
) -> tuple[pd.DataFrame, Path | None]:
    """The final model, the best one (best validation score, the final model included) and the baselines.

    Returns the table (one row per policy and workload) and the best model's path (None when no
    evaluated model has a finite selection score).
    """
    evaluator = selection.evaluator
    agent, score = selection.score(model_policy(model, info.env_config))
    baseline_table = evaluation.baseline_table if evaluation is not None else evaluator.score(baselines)
    if math.isfinite(score) and score <= (evaluation.best if evaluation is not None else math.inf):
        save_model(model, best_path, info)
        best = agent.assign(policy="agent-best")
    elif best_path.is_file():
        best = evaluator.run(model_policy(load_model(best_path)[0], info.env_config), "agent-best")
    else:
        best = None
    parts = [agent] + ([best] if best is not None else []) + [baseline_table]
    return pd.concat(parts, ignore_index=True), best_path if best is not None else None


def _log_final(run: Any, table: pd.DataFrame, metrics: Mapping[str, float], out: Path, timesteps: int) -> None:
    import wandb

    data: dict[str, Any] = {f"final/{k}": v for k, v in metrics.items() if math.isfinite(v)}
    data["final/eval_table"] = wandb.Table(dataframe=table)
    data["final/learning_curve"] = wandb.Image(str(out / "learning_curve.png"))
    run.log(data, step=timesteps)


class SB3Method:
    """A stable-baselines3 agent (``arena-gym train``), sampled the way rl-zoo3 samples PPO.

    Tuned: the learning rate, rollout length, minibatch size, epochs, discount, GAE lambda,
    entropy bonus, clip range and network width. The selection score is reported at every
    validation; the trial's value is the best of them (the model training keeps).
    """

    config_type = TrainConfig

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """rl-zoo3's PPO space, narrowed to what one CPU runs."""
        n_steps = trial.suggest_categorical("n_steps", [128, 256, 512, 1024])
        return {
            "learning_rate": trial.suggest_float("learning_rate", 1e-5, 1e-3, log=True),
            "n_steps": n_steps,
            "batch_size": min(trial.suggest_categorical("batch_size", [32, 64, 128, 256]), n_steps),
            "n_epochs": trial.suggest_categorical("n_epochs", [3, 5, 10, 20]),
            "gamma": trial.suggest_categorical("gamma", [0.95, 0.98, 0.99, 0.995, 0.999]),
            "gae_lambda": trial.suggest_categorical("gae_lambda", [0.8, 0.9, 0.95, 0.98, 1.0]),
            "ent_coef": trial.suggest_float("ent_coef", 1e-8, 0.05, log=True),
            "clip_range": trial.suggest_categorical("clip_range", [0.1, 0.2, 0.3, 0.4]),
            "net_arch": {"small": (64, 64), "medium": (128, 128), "large": (256, 256)}[
                trial.suggest_categorical("net_arch", ["small", "medium", "large"])
            ],
        }

    def check(self, config: TrainConfig) -> None:
        """The env and its overrides (a bad one fails here); validation must run for pruning to see a score."""
        env_config(config.env_id, config.env_overrides_for(TRAIN_SPLIT))
        if config.eval_every < 1:
            raise ValueError("tune: the sb3 method needs eval_every >= 1 (its trials are pruned on validation)")

    def objective(self, config: TrainConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out`` (no wandb); the best validation score."""
        scores: list[float] = []

        def seen(steps: int, score: float) -> None:
            scores.append(score)
            report(steps, min(scores))

        run = dataclasses.replace(config, out_dir=str(out), wandb_mode="disabled", progress=progress)
        train(run, on_validation=seen)
        return min(scores)

    def config_json(self, config: TrainConfig) -> dict[str, Any]:
        """``TrainConfig.to_json``: the file ``arena-gym train --config`` reads."""
        return config.to_json()


#: ``arena-gym train --method`` / ``tune --target`` sb3: see :data:`arena_gym.harness.trainers.METHODS`.
SB3 = SB3Method()
