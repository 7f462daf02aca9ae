"""Scoring policies on validation workloads: the env's own workloads, run through SimBackend + run_episode."""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from arena_gym.experiment import make_policy
from arena_gym.loop import run_episode
from arena_gym.metrics import compute_metrics
from arena_gym.protocols import Policy
from arena_gym.sim import SimBackend
from arena_gym.types import JobSpec
from envs import ArenaSchedEnv, EnvConfig, ObservationPolicy

from agents.rl.algos import greedy_action

log = logging.getLogger(__name__)

#: Per-run columns of an evaluation table (besides ``seed`` and ``policy``).
EVAL_COLUMNS = ("avg_jct_s", "median_jct_s", "p95_jct_s", "avg_queue_s", "makespan_s", "jobs_finished", "jobs_total",
                "gpu_util", "reconfigurations", "preemptions")


def model_policy(model: Any, config: EnvConfig, name: str = "agent") -> ObservationPolicy:
    """A trained SB3 model as a Policy: masked greedy actions through the env's encoder and codec."""
    return ObservationPolicy(name, lambda obs, mask: greedy_action(model, obs, mask), config, config.ap_search)


def baseline_policies(names: Sequence[str], seed: int = 0) -> dict[str, Policy]:
    """The registered heuristics among ``names`` that can be built here (a missing one is skipped with a warning)."""
    out: dict[str, Policy] = {}
    for name in names:
        try:
            out[name] = make_policy(name, seed)
        except ImportError as exc:
            log.warning("baseline %s unavailable (%s); evaluating without it", name, exc)
    return out


class Evaluator:
    """Fixed validation workloads of an env config and the scoring of policies on them.

    The workload of seed ``s`` is what ``env.reset(seed=s)`` draws (trace seed or window, and
    load level), so the agent is scored on the same distribution it trains on, on seeds it
    does not train on. Every policy runs the whole workload on a fresh :class:`SimBackend`
    with the env's ground truth and belief; its (re)starts pay its own ``ap_search`` overhead.
    """

    def __init__(self, config: EnvConfig, seeds: Sequence[int]) -> None:
        if not seeds:
            raise ValueError("evaluation needs at least one seed")
        env = ArenaSchedEnv(config)
        self.config = env.config
        self.seeds = tuple(int(s) for s in seeds)
        self._env = env
        self.workloads: dict[int, tuple[JobSpec, ...]] = {}
        for seed in self.seeds:
            env.reset(seed=seed)
            self.workloads[seed] = env.jobs

    def backend(self) -> SimBackend:
        """A fresh simulator with the env's cluster, ground truth, belief and settings."""
        return SimBackend(self._env.cluster, self._env.truth, self._env.belief, self.config.sim_config())

    def run(self, policy: Policy, label: str | None = None) -> pd.DataFrame:
        """One row per seed: the policy's metrics on that workload."""
        rows = []
        for seed, jobs in self.workloads.items():
            metrics = compute_metrics(run_episode(self.backend(), policy, jobs))
            rows.append({"seed": seed, "policy": label or policy.name, **{k: metrics.get(k, math.nan) for k in EVAL_COLUMNS}})
        return pd.DataFrame(rows)

    def score(self, policies: Mapping[str, Policy]) -> pd.DataFrame:
        """Rows for every (policy, seed), policies in the given order."""
        return pd.concat([self.run(p, label) for label, p in policies.items()], ignore_index=True)


def summarise(table: pd.DataFrame, reference: str = "fcfs") -> pd.DataFrame:
    """Per policy: mean avg JCT over seeds, its ratio to ``reference``, and whether every job finished."""
    grouped = table.groupby("policy", sort=False)
    summary = pd.DataFrame({
        "avg_jct_s": grouped["avg_jct_s"].mean(),
        "p95_jct_s": grouped["p95_jct_s"].mean(),
        "makespan_s": grouped["makespan_s"].mean(),
        "jobs_finished": grouped["jobs_finished"].sum(),
        "jobs_total": grouped["jobs_total"].sum(),
    })
    summary["all_finished"] = summary["jobs_finished"] == summary["jobs_total"]
    if reference in summary.index:
        summary[f"jct_vs_{reference}"] = summary["avg_jct_s"] / summary.loc[reference, "avg_jct_s"]
    return summary.reset_index()


def mean_avg_jct(table: pd.DataFrame, policy: str) -> float:
    """Mean over seeds of one policy's avg JCT; inf if some job of its workloads did not finish."""
    rows = table[table["policy"] == policy]
    if rows.empty:
        raise ValueError(f"policy {policy!r} not in the evaluation table")
    if bool((rows["jobs_finished"] < rows["jobs_total"]).any()):
        return math.inf
    return float(np.mean(rows["avg_jct_s"]))

