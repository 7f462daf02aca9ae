"""Train the residual on Arena's Gittins order, urgency and sizing by evolution strategies on the real traces' train windows.

The residual network (:mod:`agents.residual.priority`) has a few dozen weights, and its score is
an episode's average JCT, not a per-step reward: antithetic evolution strategies with ranked
fitness fit that directly. Each iteration draws ``windows`` train windows; every perturbed
network (``theta +- sigma * eps``, ``pairs`` pairs), the current one and the base policy
(``arena-gittins-32-f``, a zero residual) run on the same windows; a network's fitness is the
mean log ratio of its padded average JCT to the base's. The current network is then scored on
the validation windows by the selection score (:mod:`arena_gym.harness.selection`: the
geometric-mean padded-JCT ratio to Arena), and the one with the best is kept: the test windows
are never seen. ``heads`` names the rows it moves (the others stay as ``start`` has them).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from agents.residual.priority import HEADS, ResidualWeights
from arena_gym.harness.eval_plots import plot_es_history
from arena_gym.harness.out_dirs import check_out_dir
from arena_gym.harness.scoring import Evaluator
from arena_gym.harness.selection import SELECTION_REFERENCE, geomean_ratio
from arena_gym.harness.trainers.trainer_method import TrainerMethod
from arena_gym.harness.trainers.windows import BASE_SPEC, ResidualData, windows_and_scores
from arena_gym.outputs import code_version, write_json

if TYPE_CHECKING:
    import optuna

    from arena_gym.harness.tune import Report

log = logging.getLogger(__name__)

#: The kind of results directory this trainer writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "train:es"


@dataclass(frozen=True)
class ResidualTrainConfig(ResidualData):
    """One evolution-strategies run: data, budget and step sizes.

    Each of ``iterations`` iterations scores ``2 * pairs + 2`` networks on ``windows`` train
    windows drawn from the ``traces`` at the offered ``loads`` (the base's scores are kept per
    window: it is deterministic), then the updated network on the validation windows
    (``validation_limit`` of them, evenly spaced; 0 = all). ``sigma`` is the perturbation's scale,
    ``learning_rate`` the step on the ranked-fitness gradient, ``clip`` the bound of each residual
    (None: ``start``'s, or 3 without one); ``workers`` local processes run the episodes. ``heads`` are
    the rows of the network it moves (of ``order``, ``urgency``, ``size``); the others stay as they
    are in the weights file ``start`` (zero without one), from which it also starts.
    """

    iterations: int = 12
    pairs: int = 5
    windows: int = 20
    sigma: float = 0.3
    learning_rate: float = 0.2
    clip: float | None = None
    heads: tuple[str, ...] = ("order", "urgency")
    start: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.heads or len(set(self.heads)) < len(self.heads) or not set(self.heads) <= set(HEADS):
            raise ValueError(
                f"ResidualTrainConfig.heads must name some of {', '.join(HEADS)}, each once, got {self.heads}"
            )
        if self.start is not None:
            ResidualWeights.load(self.start)  # a bad file is refused here, before any work
        for name in ("iterations", "pairs", "windows"):
            if getattr(self, name) < 1:
                raise ValueError(f"ResidualTrainConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("sigma", "learning_rate", "clip"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"ResidualTrainConfig.{name} must be finite and > 0, got {value}")


def centred_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks of ``values`` mapped to ``[-0.5, 0.5]`` (lowest first), ties broken by position."""
    ranks = np.empty(len(values))
    ranks[np.argsort(values, kind="stable")] = np.arange(len(values))
    return ranks / max(len(values) - 1, 1) - 0.5


def es_step(
    theta: np.ndarray, eps: np.ndarray, fitness_plus: np.ndarray, fitness_minus: np.ndarray, config: ResidualTrainConfig
) -> np.ndarray:
    """One antithetic ES update of ``theta`` that lowers the fitness (lower is better)."""
    ranks = centred_ranks(np.concatenate([fitness_plus, fitness_minus]))
    n = len(fitness_plus)
    weight = ranks[:n] - ranks[n:]  # > 0 where +eps was worse than -eps
    gradient = (weight[:, None] * eps).sum(axis=0) / (2 * n * config.sigma)
    return theta - config.learning_rate * gradient


#: Called after every iteration with (iteration, the best validation ratio so far); may raise to stop the run.
IterationHook = Callable[[int, float], None]


class ResidualTrainer:
    """Runs :class:`ResidualTrainConfig` into an output directory (weights, history, config)."""

    def __init__(self, config: ResidualTrainConfig, out: str | Path) -> None:
        self.config = config
        self.out = check_out_dir(out, kind=KIND)
        self.train, self.validation, self.scores = windows_and_scores(config)

    @staticmethod
    def _spec(weights: ResidualWeights, folder: Path, name: str) -> str:
        return f"residual:{weights.save(folder / f'{name}.json')}"

    def run(self, progress: bool = True, on_iteration: IterationHook | None = None) -> ResidualWeights:
        """Train; write ``residual.json`` (the best network on validation), ``history.csv`` / ``.png`` and ``config.json``.

        Candidate weight files live in a temporary folder inside the output directory, which the
        episodes' processes read (on Ray, every node must see that directory at the same path, or
        at the same path relative to the driver's working directory); ``on_iteration`` sees every
        iteration's best validation ratio so far (a tuner prunes there).
        """
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(
            self.out / "config.json",
            {"kind": KIND, "code_version": code_version(), "seed": self.config.seed, "config": self.config},
        )
        with tempfile.TemporaryDirectory(prefix="candidates-", dir=self.out) as folder:
            score, it, weights = self._iterate(Path(folder), progress, on_iteration)
        trained: dict[str, Any] = {
            "method": "antithetic evolution strategies, ranked fitness (mean log padded-JCT ratio to the base)",
            "base": BASE_SPEC,
            "selection_reference": SELECTION_REFERENCE,
            "code_version": code_version(),
            "config": dataclasses.asdict(self.config),
            "iteration": it,
            "validation_geomean_ratio": score,
            "train_windows": len(self.train.workloads),
            "validation_windows": len(self.validation.workloads),
        }
        final = dataclasses.replace(weights, trained=trained)
        final.save(self.out / "residual.json")
        plot_es_history(pd.read_csv(self.out / "history.csv"), self.out / "history.png")
        return final

    def _iterate(
        self, folder: Path, progress: bool, on_iteration: IterationHook | None
    ) -> tuple[float, int, ResidualWeights]:
        """The ES iterations: (validation geomean ratio, iteration, weights) of the best network on validation."""
        cfg = self.config
        rng = np.random.default_rng(cfg.seed)
        start = ResidualWeights.load(cfg.start) if cfg.start else ResidualWeights()
        start = start if cfg.clip is None else dataclasses.replace(start, clip=cfg.clip)
        heads = cfg.heads
        theta, history = start.head_vector(heads), []
        best: tuple[float, int, ResidualWeights] | None = None
        began = time.perf_counter()
        for it in tqdm(range(1, cfg.iterations + 1), desc="residual ES", unit="iter", disable=not progress):
            picked = rng.choice(
                len(self.train.workloads), size=min(cfg.windows, len(self.train.workloads)), replace=False
            )
            eps = rng.standard_normal((cfg.pairs, len(theta)))
            specs = {"theta": self._spec(start.with_heads(heads, theta), folder, f"it{it}-theta")}
            for i, e in enumerate(eps):
                plus, minus = (
                    start.with_heads(heads, theta + cfg.sigma * e),
                    start.with_heads(heads, theta - cfg.sigma * e),
                )
                specs[f"plus{i}"] = self._spec(plus, folder, f"it{it}-plus{i}")
                specs[f"minus{i}"] = self._spec(minus, folder, f"it{it}-minus{i}")
            batch = Evaluator(self.train.config, [self.train.workloads[int(i)] for i in sorted(picked)])
            ratios = self.scores.log_ratios(batch, specs, progress=progress)
            fit = {label: float(r.mean()) for label, r in ratios.items()}
            theta = es_step(
                theta,
                eps,
                np.array([fit[f"plus{i}"] for i in range(cfg.pairs)]),
                np.array([fit[f"minus{i}"] for i in range(cfg.pairs)]),
                cfg,
            )
            current = start.with_heads(heads, theta)
            check = {"theta": self._spec(current, folder, f"it{it}-updated")}
            valid = self.scores.log_ratios(self.validation, check, SELECTION_REFERENCE, progress)["theta"]
            score = geomean_ratio(valid)
            if best is None or score < best[0]:
                best = (score, it, current)
            row = {
                "iteration": it,
                "train_theta_ratio": math.exp(fit["theta"]),
                "train_best_ratio": math.exp(min(fit.values())),
                "validation_geomean_ratio": score,
                "validation_wins": int((valid < -1e-9).sum()),
                "validation_windows": len(valid),
                "norm": float(np.linalg.norm(theta)),
                "elapsed_s": time.perf_counter() - began,
                "weights": json.dumps([round(x, 6) for x in theta]),
            }
            history.append(row)
            pd.DataFrame(history).to_csv(self.out / "history.csv", index=False)
            log.info("iteration %d: train %.4f, validation %.4f", it, row["train_theta_ratio"], score)
            if on_iteration is not None:
                on_iteration(it, best[0])
        assert best is not None  # iterations >= 1
        return best


class ESMethod(TrainerMethod):
    """The residual on Arena's Gittins order, urgency and sizing, trained by evolution strategies.

    Tuned: the perturbation scale, the step size, the log-multiplier bound and the number of
    antithetic pairs; the best selection score so far is reported after every iteration.
    """

    config_type = ResidualTrainConfig
    trainer = ResidualTrainer

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """sigma and learning_rate log-uniform, clip uniform, pairs 3..6."""
        return {
            "sigma": trial.suggest_float("sigma", 0.05, 1.0, log=True),
            "learning_rate": trial.suggest_float("learning_rate", 0.02, 1.0, log=True),
            "clip": trial.suggest_float("clip", 1.0, 5.0),
            "pairs": trial.suggest_int("pairs", 3, 6),
        }

    def objective(self, config: ResidualTrainConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out``; the best selection score."""
        weights = ResidualTrainer(config, out).run(progress=progress, on_iteration=report)
        return float(weights.trained["validation_geomean_ratio"])


#: ``arena-gym train --method`` / ``tune --target`` es: see :data:`arena_gym.harness.trainers.METHODS`.
ES = ESMethod()
