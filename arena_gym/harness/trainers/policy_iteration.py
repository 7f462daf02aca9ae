"""Policy iteration for the residual: a lookahead over perturbed residuals improves the current one, and its choices
are distilled back into it.

Each round draws ``pairs`` directions ``eps`` and makes the candidates ``theta +- sigma * eps``. On
``windows`` train windows the lookahead (:class:`agents.search.lookahead.Lookahead`) runs with the
current residual as its base and the candidates as its proposals: at every decision point where
their decisions differ it rolls each one forward in ``worlds`` worlds sampled from the belief and
takes the best (the base's on a tie). Every such search is a label: the features of the jobs the
residual sets multipliers for there, and the winner's log-multipliers for them (the base's when it
won). The next residual is the ridge regression of those multipliers on those features, one weight
row per multiplier, pulled towards the current weights by ``ridge`` (relative to the features'
mean square). It is scored on the validation windows by the selection score
(:mod:`arena_gym.harness.selection`); the rounds stop after ``patience`` rounds without a better
score, and the best residual is kept (the warm start, round 0, included).

Non-clairvoyant by construction: the lookahead's worlds are sampled from the belief given the work
attained, and the features are the residual's own. Each window is one task, in ``workers`` local
processes or on the Ray cluster at ``ray``; a search task carries the weights themselves, while the
validations read them from a folder inside the output directory (on Ray, every node must see it).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from agents.arena import ArenaPolicy
from agents.residual.priority import RESIDUAL_FEATURES, ResidualPriority, ResidualWeights
from agents.search.lookahead import Lookahead, LookaheadConfig
from arena_gym.harness.eval_plots import plot_policy_iteration
from arena_gym.harness.out_dirs import check_out_dir
from arena_gym.harness.scoring import cluster_scenario
from arena_gym.harness.selection import SELECTION_REFERENCE, geomean_ratio
from arena_gym.harness.sweep import run_tasks
from arena_gym.harness.trainers.trainer_method import TrainerMethod
from arena_gym.harness.trainers.windows import ResidualData, windows_and_scores
from arena_gym.loop import run_episode
from arena_gym.outputs import code_version, write_json
from arena_gym.types import Decision, Snapshot
from envs import EnvConfig, Workload

if TYPE_CHECKING:
    import optuna

    from arena_gym.harness.tune import Report

log = logging.getLogger(__name__)

#: The kind of results directory this trainer writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "train:policy-iteration"


@dataclass(frozen=True)
class PolicyIterationConfig(ResidualData):
    """One policy-iteration run: the warm start (``""``: zero weights, ``arena-gittins-32-f``), ``rounds`` at most,
    ``windows`` train windows a round, ``pairs`` perturbation directions of scale ``sigma``, the lookahead's
    ``worlds`` and ``horizon_s``, the distillation's ``ridge`` and the ``patience`` in rounds."""

    warm_start: str = ""
    rounds: int = 4
    windows: int = 16
    pairs: int = 2
    sigma: float = 0.3
    worlds: int = 8
    horizon_s: float = 4 * 3600.0
    ridge: float = 0.1
    patience: int = 2

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("rounds", "windows", "pairs", "worlds", "patience"):
            if getattr(self, name) < 1:
                raise ValueError(f"PolicyIterationConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("sigma", "horizon_s", "ridge"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"PolicyIterationConfig.{name} must be finite and > 0, got {value}")


@dataclass(frozen=True)
class SearchTask:
    """One train window searched by the lookahead: the base weights, the candidates' and the search's settings."""

    config: EnvConfig
    workload: Workload
    base: ResidualWeights
    candidates: tuple[ResidualWeights, ...]
    worlds: int
    horizon_s: float
    seed: int


@dataclass(frozen=True)
class Labels:
    """A window's searches: every labelled job's features (rows), which proposal won its search (0: the base,
    ``k``: candidate ``k - 1``), and how many searches there were and how many a candidate won."""

    features: np.ndarray
    winner: np.ndarray
    searches: int
    changed: int


class LabellingLookahead(Lookahead):
    """The lookahead, keeping at each search the base residual's features of the jobs it sets multipliers for."""

    def __init__(self, config: LookaheadConfig, rng: np.random.Generator) -> None:
        super().__init__("lookahead-residual", config, rng)
        assert isinstance(self.base, ArenaPolicy) and isinstance(self.base.priority, ResidualPriority)
        self.priority: ResidualPriority = self.base.priority
        self.proposer: dict[str, int] = {p.name: i for i, p in enumerate((self.base, *self.candidates))}
        self.labels: list[tuple[np.ndarray, int]] = []  # per search: the features, the winner

    def decide(self, snapshot: Snapshot) -> Decision:
        """The lookahead's decision; a search it ran is labelled."""
        searched = len(self.searches)
        decision = super().decide(snapshot)
        if len(self.searches) > searched:
            search = self.searches[-1]
            winner = self.proposer[search.proposers[search.chosen]]
            self.labels.append((self.priority.listed_features(snapshot), winner))
        return decision


def proposals(theta: np.ndarray, eps: np.ndarray, sigma: float) -> np.ndarray:
    """The flat weights a round proposes: ``theta``, then ``theta + sigma * e`` and ``theta - sigma * e`` per direction."""
    return np.stack([theta, *[theta + sign * sigma * e for e in eps for sign in (1.0, -1.0)]])


def teacher(
    base: ResidualWeights, candidates: Sequence[ResidualWeights], worlds: int, horizon_s: float, seed: int
) -> LabellingLookahead:
    """The lookahead over the residual ``base`` and its ``candidates`` (the policy a round improves ``base`` by)."""
    with tempfile.TemporaryDirectory(prefix="policy-iteration-") as folder:
        specs = [f"residual:{w.save(Path(folder) / f'w{i}.json')}" for i, w in enumerate((base, *candidates))]
        config = LookaheadConfig(
            base=specs[0], candidates=tuple(specs[1:]), worlds=worlds, horizon_s=horizon_s, margin=0.0
        )
        return LabellingLookahead(config, np.random.default_rng(seed))


def search_window(task: SearchTask) -> Labels:
    """Run the lookahead on one window (a worker's task): its labels."""
    search = teacher(task.base, task.candidates, task.worlds, task.horizon_s, task.seed)
    scenario = cluster_scenario(task.config, task.workload.cluster)
    run_episode(scenario.backend(search.ap_search), search, task.workload.jobs)
    width = len(RESIDUAL_FEATURES)
    rows = [x for x, _ in search.labels]
    return Labels(
        np.concatenate(rows) if rows else np.empty((0, width)),
        np.concatenate([np.full(len(x), k, dtype=np.int64) for x, k in search.labels] or [np.empty(0, np.int64)]),
        search.searched,
        search.changed,
    )


def distil(theta: np.ndarray, proposed: np.ndarray, labels: Labels, ridge: float, clip: float) -> np.ndarray:
    """The weights whose outputs fit the winners' clipped log-multipliers on the labelled features in least squares,
    pulled towards ``theta`` by ``ridge`` x the features' mean square (``proposed``: every proposal's flat weights,
    the base's first, as :func:`proposals` makes them)."""
    x, width = labels.features, len(RESIDUAL_FEATURES)
    if not len(x):
        return theta
    rows = proposed.reshape(len(proposed), 2, width)[labels.winner]  # (samples, 2, features)
    targets = np.clip(np.einsum("sf,smf->sm", x, rows), -clip, clip)
    gram = x.T @ x
    pull = ridge * np.trace(gram) / width
    current = theta.reshape(2, width).T
    solved = np.linalg.solve(gram + pull * np.eye(width), x.T @ targets + pull * current)
    return solved.T.ravel()


def merge(parts: list[Labels]) -> Labels:
    """One set of labels from several windows'."""
    return Labels(
        np.concatenate([p.features for p in parts]),
        np.concatenate([p.winner for p in parts]),
        sum(p.searches for p in parts),
        sum(p.changed for p in parts),
    )


class PolicyIteration:
    """Runs :class:`PolicyIterationConfig` into an output directory (weights, history, config)."""

    def __init__(self, config: PolicyIterationConfig, out: str | Path) -> None:
        self.config = config
        self.start = ResidualWeights.load(config.warm_start) if config.warm_start else ResidualWeights()
        self.out = check_out_dir(out, kind=KIND)
        self.train, self.validation, self.scores = windows_and_scores(config)

    def run(self, progress: bool = True) -> ResidualWeights:
        """Iterate; write ``residual.json`` (the best on validation), ``history.csv`` / ``.png`` and ``config.json``."""
        cfg = self.config
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(
            self.out / "config.json", {"kind": KIND, "code_version": code_version(), "seed": cfg.seed, "config": cfg}
        )
        rng = np.random.default_rng(cfg.seed)
        theta, history = self.start.vector, []
        began = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="candidates-", dir=self.out) as folder:
            best = (self._validate(theta, Path(folder), "round0"), 0, theta)
            history.append(self._row(0, best[0], None, theta, began))
            for round_ in tqdm(range(1, cfg.rounds + 1), desc="policy iteration", unit="round", disable=not progress):
                labels, proposed = self._search(theta, rng, round_, progress)
                theta = distil(theta, proposed, labels, cfg.ridge, self.start.clip)
                score = self._validate(theta, Path(folder), f"round{round_}")
                history.append(self._row(round_, score, labels, theta, began))
                pd.DataFrame(history).to_csv(self.out / "history.csv", index=False)
                log.info("round %d: %d searches, validation %.4f", round_, labels.searches, score)
                if score < best[0]:
                    best = (score, round_, theta)
                elif round_ - best[1] >= cfg.patience:
                    break
        trained = {
            "method": "policy iteration: a lookahead over perturbed residuals, distilled by ridge regression",
            "warm_start": cfg.warm_start,
            "selection_reference": SELECTION_REFERENCE,
            "code_version": code_version(),
            "config": dataclasses.asdict(cfg),
            "round": best[1],
            "validation_geomean_ratio": best[0],
            "train_windows": len(self.train.workloads),
            "validation_windows": len(self.validation.workloads),
        }
        final = self.start.with_vector(best[2], trained)
        final.save(self.out / "residual.json")
        plot_policy_iteration(pd.DataFrame(history), self.out / "history.png")
        return final

    def _search(
        self, theta: np.ndarray, rng: np.random.Generator, round_: int, progress: bool
    ) -> tuple[Labels, np.ndarray]:
        """One round's labels on its train windows, and every proposal's flat weights (the base's first)."""
        cfg = self.config
        picked = rng.choice(len(self.train.workloads), size=min(cfg.windows, len(self.train.workloads)), replace=False)
        eps = rng.standard_normal((cfg.pairs, len(theta)))
        proposed = proposals(theta, eps, cfg.sigma)
        weights = [self.start.with_vector(p) for p in proposed]
        tasks = [
            SearchTask(
                self.train.config,
                self.train.workloads[int(i)],
                weights[0],
                tuple(weights[1:]),
                cfg.worlds,
                cfg.horizon_s,
                int(np.random.SeedSequence([cfg.seed, round_, int(i)]).generate_state(1)[0]),
            )
            for i in sorted(picked)
        ]
        parts = run_tasks(search_window, tasks, cfg.workers, progress, unit="window", ray=cfg.ray)
        return merge(parts), proposed

    def _validate(self, theta: np.ndarray, folder: Path, name: str) -> float:
        spec = f"residual:{self.start.with_vector(theta).save(folder / f'{name}.json')}"
        return geomean_ratio(self.scores.log_ratios(self.validation, {"theta": spec}, SELECTION_REFERENCE)["theta"])

    def _row(self, round_: int, score: float, labels: Labels | None, theta: np.ndarray, began: float) -> dict[str, Any]:
        return {
            "round": round_,
            "searches": labels.searches if labels is not None else 0,
            "candidate_won": labels.changed if labels is not None else 0,
            "labelled_rows": len(labels.features) if labels is not None else 0,
            "validation_geomean_ratio": score,
            "norm": float(np.linalg.norm(theta)),
            "elapsed_s": time.perf_counter() - began,
            "weights": json.dumps([round(float(x), 6) for x in theta]),
        }


class PolicyIterationMethod(TrainerMethod):
    """Policy iteration of the residual: a lookahead over perturbed residuals, distilled back into it.

    Tuned: the perturbation scale, the ridge and the number of directions; the best selection
    score is reported once, at the end.
    """

    config_type = PolicyIterationConfig
    trainer = PolicyIteration

    def sample(self, trial: optuna.trial.BaseTrial) -> dict[str, Any]:
        """sigma and ridge log-uniform, pairs 1..4."""
        return {
            "sigma": trial.suggest_float("sigma", 0.05, 1.0, log=True),
            "ridge": trial.suggest_float("ridge", 0.01, 10.0, log=True),
            "pairs": trial.suggest_int("pairs", 1, 4),
        }

    def objective(self, config: PolicyIterationConfig, out: Path, report: Report, progress: bool = False) -> float:
        """Train into ``out``; the best round's selection score."""
        weights = PolicyIteration(config, out).run(progress=progress)
        score = float(weights.trained["validation_geomean_ratio"])
        report(int(weights.trained["round"]), score)
        return score


#: ``arena-gym train --method`` / ``tune --target`` policy-iteration: see :data:`arena_gym.harness.trainers.METHODS`.
POLICY_ITERATION = PolicyIterationMethod()
