"""Training callbacks: progress bar, learning curve, wandb scalars, and evaluation against the heuristics."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from stable_baselines3.common.callbacks import BaseCallback, CheckpointCallback
from tqdm.auto import tqdm

from arena_gym.harness.scoring import mean_avg_jct
from arena_gym.harness.selection import Selection
from arena_gym.outputs import write_csv, write_json
from arena_gym.protocols import Policy

log = logging.getLogger(__name__)


class StampedCheckpointCallback(CheckpointCallback):
    """SB3's checkpoints (``model_N_steps.zip``), each with ``model_N_steps.json`` holding the run's config hash.

    A resume loads a checkpoint only under the config that wrote it (:func:`arena_gym.harness.trainers.sb3.resume`).
    """

    def __init__(self, config_hash: str, save_freq: int, save_path: str, name_prefix: str = "model") -> None:
        super().__init__(save_freq, save_path, name_prefix=name_prefix)
        self.config_hash = config_hash

    def _on_step(self) -> bool:
        saving = self.n_calls % self.save_freq == 0
        result = super()._on_step()
        if saving:
            write_json(Path(self._checkpoint_path(extension="json")), {"config_hash": self.config_hash})
        return result


class ProgressBarCallback(BaseCallback):
    """A tqdm bar over environment steps (SB3's own bar needs ``rich``, which the stack lacks).

    ``start`` is the step count a resumed run starts from; the bar shows the whole run.
    """

    def __init__(self, total_steps: int, enabled: bool = True, start: int = 0) -> None:
        super().__init__()
        self.total_steps = total_steps
        self.enabled = enabled
        self.start = start
        self._bar: Any = None
        self._shown = 0

    def _on_training_start(self) -> None:
        # disable=None: no bar when stderr is not a terminal (nohup logs, CI)
        self._bar = tqdm(
            total=self.total_steps,
            initial=self.start,
            desc="train",
            unit="step",
            disable=None if self.enabled else True,
            leave=False,
            mininterval=1.0,
        )
        self._shown = self.start

    def _on_step(self) -> bool:
        self._bar.update(self.num_timesteps - self._shown)
        self._shown = self.num_timesteps
        return True

    def _on_training_end(self) -> None:
        self._bar.close()


class LearningCurveCallback(BaseCallback):
    """Collects every finished training episode (return, length, average JCT) and logs it to ``run``.

    With ``csv`` the rows so far are written there at the end of each rollout, and a resumed
    run reads them back first (rows beyond the resume point are dropped).
    """

    COLUMNS = ("timesteps", "episode_return", "episode_length", "avg_jct_s", "jobs_finished", "jobs_total", "workload")

    def __init__(self, run: Any = None, csv: Path | None = None) -> None:
        super().__init__()
        self.run = run
        self.csv = csv
        self.rows: list[dict[str, Any]] = []

    def _on_training_start(self) -> None:
        if self.csv is not None and self.csv.is_file() and self.num_timesteps > 0:
            old = pd.read_csv(self.csv)
            self.rows = old[old["timesteps"] <= self.num_timesteps].to_dict("records")

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", ()):
            episode = info.get("episode")
            if episode is None:
                continue
            metrics = info.get("metrics", {})
            row = {
                "timesteps": float(self.num_timesteps),
                "episode_return": float(episode["r"]),
                "episode_length": float(episode["l"]),
                "avg_jct_s": float(metrics.get("avg_jct_s", math.nan)),
                "jobs_finished": float(metrics.get("jobs_finished", math.nan)),
                "jobs_total": float(metrics.get("jobs_total", math.nan)),
                "workload": info.get("workload", ""),
            }
            self.rows.append(row)
            if self.run is not None and math.isfinite(row["avg_jct_s"]):
                self.run.log(
                    {"episode/return": row["episode_return"], "episode/avg_jct_h": row["avg_jct_s"] / 3600},
                    step=self.num_timesteps,
                )
        return True

    def _on_rollout_end(self) -> None:
        if self.csv is not None:
            write_csv(self.csv, self.frame())

    def frame(self) -> pd.DataFrame:
        """The episodes so far, in order."""
        return pd.DataFrame(self.rows, columns=list(self.COLUMNS))


class WandbScalarCallback(BaseCallback):
    """Logs SB3's scalars (episode return/length means, losses, entropy, ...) to a wandb run.

    SB3's own ``WandbCallback`` logs no scalars; this one reads ``model.ep_info_buffer`` and
    ``model.logger.name_to_value`` at the end of each rollout, at most every ``every`` steps.
    """

    def __init__(self, run: Any, every: int = 1000) -> None:
        super().__init__()
        self.run = run
        self.every = max(1, every)
        self._last = -self.every

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.num_timesteps - self._last < self.every:
            return
        self._last = self.num_timesteps
        data: dict[str, float] = {
            k: float(v) for k, v in self.model.logger.name_to_value.items() if isinstance(v, (int, float, np.floating))
        }
        episodes = list(self.model.ep_info_buffer or ())
        if episodes:
            data["rollout/ep_rew_mean"] = float(np.mean([e["r"] for e in episodes]))
            data["rollout/ep_len_mean"] = float(np.mean([e["l"] for e in episodes]))
        if data:
            self.run.log(data, step=self.num_timesteps)


class ArenaEvalCallback(BaseCallback):
    """Every ``every`` steps, scores the current model as a Policy against the baselines on validation workloads.

    The baselines (by default FCFS and the Arena heuristic) are scored once, since they do not
    change. Each evaluation (also one at the start) appends to ``history`` (and its CSV), logs
    the table and per-policy means to wandb, calls ``on_new_best()`` when the agent's
    selection score (:mod:`arena_gym.harness.selection`, a column of the table) is the best so
    far, and then ``on_score(steps, score)``.
    """

    def __init__(
        self,
        selection: Selection,
        agent: Callable[[Any], Policy],
        baselines: Mapping[str, Policy],
        every: int,
        history_csv: Path,
        run: Any,
        on_new_best: Callable[[], object] | None = None,
    ) -> None:
        super().__init__()
        self.selection = selection
        self.agent = agent
        self.every = every
        self.history_csv = history_csv
        self.run = run
        self.on_new_best = on_new_best
        self.on_score: Callable[[int, float], None] | None = None
        self.baseline_table = selection.evaluator.score(baselines) if baselines else pd.DataFrame()
        self.history: list[pd.DataFrame] = []
        self.best = math.inf
        self._next = 0
        self._resumed = False

    def restore(self, history_csv: Path, upto: int) -> None:
        """Take back the validations of a resumed run up to step ``upto`` (history, best score); no evaluation at the start."""
        self._resumed = True
        self._next = (upto // self.every + 1) * self.every
        if not history_csv.is_file():
            return
        old = pd.read_csv(history_csv)
        old = old[old["timesteps"] <= upto]
        for _steps, table in old.groupby("timesteps", sort=True):
            self.history.append(table.reset_index(drop=True))
            self.best = min(self.best, float(table["selection_score"].iloc[0]))

    def _on_training_start(self) -> None:
        if not self._resumed:
            self._evaluate()

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            self._evaluate()
        return True

    def _evaluate(self) -> None:
        self._next = (self.num_timesteps // self.every + 1) * self.every
        agent_table, score = self.selection.score(self.agent(self.model))
        table = pd.concat([agent_table, self.baseline_table], ignore_index=True)
        table.insert(0, "timesteps", self.num_timesteps)
        table.insert(1, "selection_score", score)
        self.history.append(table)
        write_csv(self.history_csv, pd.concat(self.history, ignore_index=True))
        means = {p: mean_avg_jct(table, p) for p in table["policy"].unique()}
        log.info(
            "validation @%d steps: score %.3f; %s",
            self.num_timesteps,
            score,
            ", ".join(f"{p} {v / 3600:.2f} h" for p, v in means.items()),
        )
        self._log_wandb(table, means, score)
        if score < self.best:
            self.best = score
            if self.on_new_best is not None:
                self.on_new_best()
        if self.on_score is not None:
            self.on_score(self.num_timesteps, score)

    def _log_wandb(self, table: pd.DataFrame, means: Mapping[str, float], score: float) -> None:
        import wandb

        data: dict[str, Any] = {f"eval/{p}_avg_jct_h": v / 3600 for p, v in means.items() if math.isfinite(v)}
        if math.isfinite(score):
            data["eval/selection_score"] = score
        data["eval/table"] = wandb.Table(dataframe=table)
        self.run.log(data, step=self.num_timesteps)

    def frame(self) -> pd.DataFrame:
        """Every evaluation so far: one row per (timesteps, policy, workload)."""
        return pd.concat(self.history, ignore_index=True) if self.history else pd.DataFrame()
