"""A fast tune target for the study's tests: a quadratic whose validation score falls with the steps."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class QuadConfig:
    """The point tried, the steps it reports, a pause per step, and a label (``prune``: every trial is pruned)."""

    x: float = 0.0
    y: float = 0.0
    steps: int = 3
    pause_s: float = 0.0
    label: str = ""


class QuadTarget:
    """Minimise (x - 1)^2 + (y + 0.5)^2; reports ``score + 1 / step`` at steps 1..steps."""

    config_type = QuadConfig

    def sample(self, trial: Any) -> dict[str, Any]:
        return {"x": trial.suggest_float("x", -2.0, 2.0), "y": trial.suggest_float("y", -2.0, 2.0)}

    def check(self, config: QuadConfig) -> None:
        if config.label == "broken":
            raise ValueError("QuadConfig.label: 'broken' cannot run")

    def objective(self, config: QuadConfig, out: Path, report: Any) -> float:
        out.mkdir(parents=True)
        if config.label == "prune":
            import optuna

            raise optuna.TrialPruned("always")
        score = (config.x - 1.0) ** 2 + (config.y + 0.5) ** 2
        for step in range(1, config.steps + 1):
            time.sleep(config.pause_s)
            report(step, score + 1.0 / step)
        (out / "done.txt").write_text(f"{os.getpid()} {config.steps} {config.label}\n")
        return score

    def config_json(self, config: QuadConfig) -> dict[str, Any]:
        return dataclasses.asdict(config)


QUAD = QuadTarget()
SPEC = "tests.arena_gym.harness.quadratic_target:QUAD"
