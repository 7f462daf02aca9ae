"""Training a learned scheduler: TrainConfig -> vectorised envs, optional BC warm start, SB3 learning, evaluation.

``train(config)`` writes into ``config.out_dir``: ``config.json`` (config, resolved EnvConfig,
seed, code version), ``checkpoints/`` (SB3 zips plus ``arena_gym.json``), ``learning_curve.csv``
and ``.png``, ``eval_history.csv`` (every evaluation during training), ``eval.csv`` (final
model vs the baselines on the validation workloads, one row per policy and seed),
``eval_summary.csv``, ``model.zip`` (final) and ``best_model.zip`` (lowest validation JCT with
every job finished, over the periodic evaluations and the final model).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch as th
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, CheckpointCallback

from agents.rl.algos import ALGOS, algo_spec
from agents.rl.artifact import ModelInfo, load_model, save_model, write_sidecar
from agents.rl.bc import BCConfig, BCResult, warm_start
from agents.rl.callbacks import ArenaEvalCallback, LearningCurveCallback, ProgressBarCallback, WandbScalarCallback
from agents.rl.env_factory import VEC_ENVS, env_config, make_env, make_training_vec_env
from agents.rl.evaluate import Evaluator, baseline_policies, mean_avg_jct, model_policy, summarise
from agents.rl.plots import plot_learning_curve
from arena_gym.results import code_version, write_csv, write_json
from arena_gym.tracking import finish_run, start_run

log = logging.getLogger(__name__)

WANDB_MODES: tuple[str, ...] = ("disabled", "offline", "online")


@dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a training run.

    ``env_overrides`` replace EnvConfig fields of ``env_id``. Env ``i`` of the ``n_envs`` is
    first reset with ``seed + i`` and then keeps drawing fresh workloads; behaviour cloning
    plays from ``seed + n_envs``; ``eval_seeds`` (validation workloads) must avoid all of
    these. ``n_steps`` ... ``clip_range`` are passed to the algorithms that accept them
    (see :data:`agents.rl.algos.ALGOS`), ``algo_kwargs`` override anything else. Steps and
    ``*_every`` count environment steps over all envs; 0 turns periodic evaluation or
    checkpoints off (a final evaluation always runs). ``bc_warm_start_steps`` expert samples
    (0 = off) are cloned from ``bc_expert`` before RL.
    """

    algo: str = "maskable_ppo"
    env_id: str = "ArenaGym/Tiny-v0"
    env_overrides: Mapping[str, Any] = field(default_factory=dict)
    steps: int = 100_000
    n_envs: int = 2
    vec: str = "dummy"
    start_method: str | None = None
    seed: int = 0
    learning_rate: float = 3e-4
    n_steps: int = 512
    batch_size: int = 128
    n_epochs: int = 10
    gamma: float = 0.99
    gae_lambda: float = 0.95
    ent_coef: float = 0.01
    clip_range: float = 0.2
    net_arch: tuple[int, ...] = (128, 128)
    algo_kwargs: Mapping[str, Any] = field(default_factory=dict)
    eval_every: int = 10_000
    eval_seeds: tuple[int, ...] = (1_000_000, 1_000_001, 1_000_002, 1_000_003)
    eval_baselines: tuple[str, ...] = ("fcfs", "arena")
    checkpoint_every: int = 25_000
    bc_warm_start_steps: int = 0
    bc_expert: str = "arena"
    bc_epochs: int = 20
    out_dir: str = "results/train"
    wandb_mode: str = "disabled"
    wandb_project: str = "arena-gym"
    progress: bool = True

    def __post_init__(self) -> None:
        problems = []
        if self.algo not in ALGOS:
            problems.append(f"unknown algo {self.algo!r} (valid: {', '.join(sorted(ALGOS))})")
        if self.vec not in VEC_ENVS:
            problems.append(f"unknown vec {self.vec!r} (valid: {', '.join(VEC_ENVS)})")
        if self.wandb_mode not in WANDB_MODES:
            problems.append(f"unknown wandb_mode {self.wandb_mode!r} (valid: {', '.join(WANDB_MODES)})")
        if self.steps < 1 or self.n_envs < 1:
            problems.append(f"need steps >= 1 and n_envs >= 1, got {self.steps}, {self.n_envs}")
        if min(self.eval_every, self.checkpoint_every, self.bc_warm_start_steps) < 0:
            problems.append("eval_every, checkpoint_every and bc_warm_start_steps must be >= 0")
        if not self.eval_seeds:
            problems.append("eval_seeds must name at least one validation seed")
        clash = sorted(set(self.eval_seeds) & set(self.training_seeds))
        if clash:
            problems.append(f"eval_seeds {clash} overlap the training seeds {self.seed}..{self.seed + self.n_envs}")
        if self.bc_warm_start_steps and self.algo in ALGOS and algo_spec(self.algo).family != "actor_critic":
            problems.append(f"behaviour cloning needs an actor-critic algorithm, not {self.algo}")
        if problems:
            raise ValueError("TrainConfig: " + "; ".join(problems))
        object.__setattr__(self, "eval_seeds", tuple(int(s) for s in self.eval_seeds))
        object.__setattr__(self, "net_arch", tuple(int(n) for n in self.net_arch))

    @property
    def training_seeds(self) -> tuple[int, ...]:
        """Reset seeds used for training (one per env) and for behaviour cloning (the last)."""
        return tuple(range(self.seed, self.seed + self.n_envs + 1))


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
    """The SB3 model of ``config.algo`` on ``env`` (MultiInputPolicy, CPU, seeded)."""
    spec = algo_spec(config.algo)
    kwargs = {**spec.defaults, **{p: getattr(config, p) for p in spec.params}, **dict(config.algo_kwargs)}
    try:
        return spec.cls()("MultiInputPolicy", env, seed=config.seed, device="cpu", verbose=0,
                          policy_kwargs={"net_arch": list(config.net_arch)}, **kwargs)
    except TypeError as exc:
        raise ValueError(f"bad hyperparameters for {config.algo}: {str(exc).splitlines()[0]}") from None


def _callbacks(config: TrainConfig, out: Path, run: Any, evaluator: Evaluator, baselines: Mapping[str, Any],
               info: ModelInfo, model: Any) -> tuple[list[BaseCallback], LearningCurveCallback, ArenaEvalCallback | None]:
    curve = LearningCurveCallback(run)
    callbacks: list[BaseCallback] = [curve, ProgressBarCallback(config.steps, config.progress),
                                     WandbScalarCallback(run, every=max(config.steps // 200, 1))]
    if config.checkpoint_every:
        write_sidecar(out / "checkpoints", info)
        callbacks.append(CheckpointCallback(max(config.checkpoint_every // config.n_envs, 1), str(out / "checkpoints"),
                                            name_prefix="model"))
    evaluation = None
    if config.eval_every:
        evaluation = ArenaEvalCallback(
            evaluator, lambda m: model_policy(m, info.env_config), baselines, config.eval_every,
            out / "eval_history.csv", run, on_new_best=lambda: save_model(model, out / "best_model.zip", info))
        callbacks.append(evaluation)
    return callbacks, curve, evaluation


def train(config: TrainConfig) -> TrainResult:
    """Train ``config.algo`` on ``config.env_id``, evaluate it against the baselines, and write the run folder."""
    th.set_num_threads(1)
    start = time.perf_counter()
    out = Path(config.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "best_model.zip").unlink(missing_ok=True)  # a previous run's best must not pass for this one's
    env_cfg = env_config(config.env_id, config.env_overrides)
    info = ModelInfo(config.algo, config.env_id, env_cfg, code_version())
    write_json(out / "config.json", {"train": config, "env_config": info.to_json()["env_config"], "seed": config.seed,
                                     "code_version": info.code_version})
    run = start_run(out, config, "train", config.wandb_mode, config.wandb_project)
    venv = make_training_vec_env(config.env_id, config.env_overrides, config.n_envs, config.vec, config.seed,
                                 config.start_method)
    try:
        model = build_model(config, venv)
        bc = None
        if config.bc_warm_start_steps:
            bc_env = make_env(config.env_id, config.env_overrides)
            bc = warm_start(model, bc_env, BCConfig(expert=config.bc_expert, samples=config.bc_warm_start_steps,
                                                    epochs=config.bc_epochs, gamma=config.gamma,
                                                    seed=config.training_seeds[-1]))
            bc_env.close()
            run.log({f"bc/{k}": float(v) for k, v in vars(bc).items()}, step=0)
        evaluator = Evaluator(env_cfg, config.eval_seeds)
        baselines = baseline_policies(config.eval_baselines, config.seed)
        callbacks, curve, evaluation = _callbacks(config, out, run, evaluator, baselines, info, model)
        model.learn(total_timesteps=config.steps, callback=CallbackList(callbacks))
        model_path = save_model(model, out / "model.zip", info)
        table, best_path = _final_table(evaluator, evaluation, baselines, model, out / "best_model.zip", info)
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
    result = TrainResult(out, model_path, best_path, curve_path, eval_path, metrics, int(model.num_timesteps), wall, bc)
    write_json(out / "result.json", {"metrics": metrics, "timesteps": result.timesteps, "wall_s": wall,
                                     "bc": bc, "model": str(model_path), "best_model": str(best_path) if best_path else None})
    log.info("trained %d steps in %.0f s: %s", result.timesteps, wall,
             ", ".join(f"{k} {v / 3600:.2f} h" for k, v in metrics.items() if math.isfinite(v)))
    return result


def _final_table(evaluator: Evaluator, evaluation: ArenaEvalCallback | None, baselines: Mapping[str, Any],
                 model: Any, best_path: Path, info: ModelInfo) -> tuple[pd.DataFrame, Path | None]:
    """The final model, the best one (lowest validation JCT, the final model included) and the baselines.

    Returns the table (one row per policy and seed) and the best model's path (None when no
    evaluated model finished every job).
    """
    agent = evaluator.run(model_policy(model, info.env_config), "agent")
    score = mean_avg_jct(agent, "agent")
    if math.isfinite(score) and score <= (evaluation.best if evaluation is not None else math.inf):
        save_model(model, best_path, info)
        best = agent.assign(policy="agent-best")
    elif best_path.is_file():
        best = evaluator.run(model_policy(load_model(best_path)[0], info.env_config), "agent-best")
    else:
        best = None
    baseline_table = evaluation.baseline_table if evaluation is not None else evaluator.score(baselines)
    parts = [agent] + ([best] if best is not None else []) + [baseline_table]
    return pd.concat(parts, ignore_index=True), best_path if best is not None else None


def _log_final(run: Any, table: pd.DataFrame, metrics: Mapping[str, float], out: Path, timesteps: int) -> None:
    import wandb

    data: dict[str, Any] = {f"final/{k}": v for k, v in metrics.items() if math.isfinite(v)}
    data["final/eval_table"] = wandb.Table(dataframe=table)
    data["final/learning_curve"] = wandb.Image(str(out / "learning_curve.png"))
    run.log(data, step=timesteps)
