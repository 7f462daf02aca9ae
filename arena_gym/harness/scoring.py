"""Scoring policies on fixed workloads: every policy runs the same jobs on a fresh SimBackend through run_episode.

The workloads are :class:`envs.Workload` objects: windows of a trace split or generator draws
at a load level, each with the cluster it runs on (see :mod:`envs.workload`). The table has one
row per (workload, policy) with the run's metrics, the padded average JCT across the policies
of the same call, what the policy knows (``clairvoyant``) and the restart overhead class it
paid (``overhead_class``); with ``bounds`` also the workload's lower bounds on the average JCT
(``lb1_avg_jct_s``: every job alone on its best grid; ``lp_avg_jct_s``: the LP relaxation of
the cluster's capacity; :mod:`arena_gym.harness.bounds`), charged Arena's pruned overhead class, so
they hold for every policy that pays at least it.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from agents.rl.algos import greedy_action
from arena_gym.core.information import is_clairvoyant
from arena_gym.harness.bounds import workload_bounds
from arena_gym.harness.experiment import NO_OPTIONS, ScenarioOptions, play
from arena_gym.harness.gpu_types import missing_types
from arena_gym.harness.results import PADDED_COLUMN, metric_row
from arena_gym.harness.suites import part_scenario, split_workloads
from arena_gym.harness.sweep import run_tasks
from arena_gym.metrics import finished_jcts, padded_mean_jcts
from arena_gym.protocols import Policy
from arena_gym.registry import make_policy
from arena_gym.scenario import Scenario
from arena_gym.sim import SimBackend
from arena_gym.types import OverheadClass
from envs import EnvConfig, ObservationPolicy, Workload

log = logging.getLogger(__name__)

#: Columns describing the workload of a row.
WORKLOAD_COLUMNS = ("workload", "trace", "split", "load", "load_basis", "cluster")


def model_policy(model: Any, config: EnvConfig, name: str = "agent") -> ObservationPolicy:
    """A trained SB3 model as a Policy: masked greedy actions through the env's encoder and codec."""
    return ObservationPolicy(name, lambda obs, mask: greedy_action(model, obs, mask), config, config.ap_search)


def parse_policy_spec(text: str) -> tuple[str, str]:
    """``LABEL=SPEC`` or ``SPEC`` -> (label, spec); an ``sb3:PATH`` without a label is labelled by its path."""
    label, sep, spec = text.partition("=")
    if sep and label and not label.startswith("sb3:"):
        return label.strip(), spec.strip()
    return text.strip(), text.strip()


def baseline_policies(names: Sequence[str], seed: int = 0) -> dict[str, Policy]:
    """Policies by registered name or ``sb3:PATH`` (``LABEL=SPEC`` relabels); a heuristic that cannot be imported is skipped."""
    out: dict[str, Policy] = {}
    for text in names:
        label, spec = parse_policy_spec(text)
        if label in out:
            raise ValueError(f"policy label {label!r} given twice")
        try:
            out[label] = make_policy(spec, seed)
        except ImportError as exc:
            log.warning("policy %s unavailable (%s); evaluating without it", spec, exc)
    return out


def policy_facts(policy: Policy) -> dict[str, Any]:
    """What a policy knows and pays: ``clairvoyant`` (sees true remaining work) and its restart ``overhead_class``."""
    return {"clairvoyant": is_clairvoyant(policy), "overhead_class": str(policy.ap_search)}


@functools.lru_cache(maxsize=16)
def cluster_scenario(config: EnvConfig, cluster: str, options: ScenarioOptions = NO_OPTIONS) -> Scenario:
    """The scenario of ``config`` on a cluster spec with the user's ``options`` on top
    (:func:`arena_gym.harness.suites.part_scenario`), built once per process.

    The models are pure functions of their points (their lazily filled tables only save work),
    so every evaluation and every task a worker process runs may share them.
    """
    return part_scenario(config, cluster, options)


#: One policy's row on a workload (without the padded JCT and the bounds) and its finished jobs' JCTs.
Scored = tuple[dict[str, Any], list[float]]


@dataclass(frozen=True)
class PolicyTask:
    """A sweep task: one workload under one policy, built by spec (seeded) in the process that runs it."""

    config: EnvConfig
    workload: Workload
    label: str
    spec: str
    seed: int
    options: ScenarioOptions = NO_OPTIONS

    def run(self) -> Scored:
        """The policy's row and JCTs."""
        return Evaluator(self.config, [self.workload], options=self.options).score_policy(
            self.workload, self.label, make_policy(self.spec, self.seed)
        )


@dataclass(frozen=True)
class BoundsTask:
    """A sweep task: the lower bounds (LB1, LP) of one workload."""

    config: EnvConfig
    workload: Workload
    options: ScenarioOptions = NO_OPTIONS

    def run(self) -> tuple[float, float]:
        """(LB1, LP) average-JCT bounds."""
        return Evaluator(self.config, [self.workload], options=self.options).bounds_of(self.workload)


def _run_task(task: PolicyTask | BoundsTask) -> Scored | tuple[float, float]:
    """Worker: one task."""
    return task.run()


class Evaluator:
    """Fixed workloads and the scoring of policies on them.

    ``config`` gives the ground truth (``perf``), the belief the policies plan with and the simulator
    settings, the user's ``options`` on top of them (:class:`arena_gym.harness.experiment.ScenarioOptions`;
    give the ones the workloads were cut under, :class:`arena_gym.harness.suites.SuitePart`). Each
    workload names its cluster (a preset, file or ``preset[type=nodes]`` variant). Every policy
    runs each workload on a fresh simulator of the workload's scenario (:func:`cluster_scenario`)
    and pays its own restart overhead class.
    """

    def __init__(
        self,
        config: EnvConfig,
        workloads: Sequence[Workload],
        bounds: bool = False,
        options: ScenarioOptions = NO_OPTIONS,
    ) -> None:
        if not workloads:
            raise ValueError("evaluation needs at least one workload")
        self.config = config
        self.workloads = tuple(workloads)
        self.bounds = bounds
        self.options = options

    @classmethod
    def for_split(
        cls, config: EnvConfig, split: str, seeds: Sequence[int] = (), cluster: str | None = None, limit: int = 0
    ) -> Evaluator:
        """The fixed workloads of a split of ``config``'s traces (:func:`arena_gym.harness.suites.split_workloads`)."""
        return cls(config, split_workloads(config, split, seeds, cluster, limit))

    def scenario(self, cluster: str) -> Scenario:
        """The scenario of a workload's cluster spec (:func:`cluster_scenario`)."""
        return cluster_scenario(self.config, cluster, self.options)

    def backend(self, workload: Workload, overhead_class: str) -> SimBackend:
        """A fresh simulator for a workload, charging ``overhead_class`` per (re)start."""
        return self.scenario(workload.cluster).backend(overhead_class)

    def run(self, policy: Policy, label: str | None = None) -> pd.DataFrame:
        """One row per workload: the policy's metrics on it (no padding)."""
        return self.score({label or policy.name: policy})

    def score(
        self, policies: Mapping[str, Policy], progress: bool = False, jct_rows: list[dict[str, Any]] | None = None
    ) -> pd.DataFrame:
        """Rows for every (workload, policy), workloads in order, with ``padded_jct_s`` across these policies.

        Padding (the Arena artifact's rule): on each workload every policy's finished JCTs are
        padded with the largest JCT any policy reached, up to the largest finished count.
        ``jct_rows``, when given, receives one dict per finished job (workload, policy, job, JCT).
        """
        rows: list[dict[str, Any]] = []
        bar = tqdm(total=len(self.workloads), desc="evaluate", unit="workload", disable=not progress, leave=False)
        for workload in self.workloads:
            scored, jobs = self.score_workload(workload, policies)
            rows.extend(scored)
            if jct_rows is not None:
                jct_rows.extend(jobs)
            bar.update()
        bar.close()
        return pd.DataFrame(rows)

    def score_specs(
        self,
        specs: Mapping[str, str],
        seed: int = 0,
        workers: int = 1,
        progress: bool = False,
        jct_rows: list[dict[str, Any]] | None = None,
        ray: str | None = None,
    ) -> pd.DataFrame:
        """:meth:`score` for policies given by spec (``label -> spec``), in ``workers`` local processes or on Ray.

        Each (workload, policy) is one task, and so are each workload's bounds; a task builds its
        policy by spec (seeded by ``seed``), so the table is the one a single process writes.
        ``ray`` is a Ray cluster's address (or ``auto``): the tasks become Ray tasks there.
        """
        if ray is None and workers <= 1:
            return self.score({label: make_policy(spec, seed) for label, spec in specs.items()}, progress, jct_rows)
        per_workload = len(specs) + (1 if self.bounds else 0)
        tasks: list[PolicyTask | BoundsTask] = []
        for w in self.workloads:
            tasks.extend(PolicyTask(self.config, w, label, spec, seed, self.options) for label, spec in specs.items())
            tasks.extend([BoundsTask(self.config, w, self.options)] if self.bounds else [])
        done = run_tasks(_run_task, tasks, workers, progress, unit="task", ray=ray)
        rows: list[dict[str, Any]] = []
        for i, workload in enumerate(self.workloads):
            results = done[i * per_workload : (i + 1) * per_workload]
            scored = {label: cast(Scored, r) for label, r in zip(specs, results)}
            found = cast("tuple[float, float]", results[-1]) if self.bounds else None
            workload_rows, jobs = self._finish(workload, scored, found)
            rows.extend(workload_rows)
            if jct_rows is not None:
                jct_rows.extend(jobs)
        return pd.DataFrame(rows)

    def score_workload(
        self, workload: Workload, policies: Mapping[str, Policy]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """One workload under every policy: its rows (padded across these policies) and its finished jobs' JCTs."""
        scored = {label: self.score_policy(workload, label, policy) for label, policy in policies.items()}
        return self._finish(workload, scored, self.bounds_of(workload) if self.bounds else None)

    def score_policy(self, workload: Workload, label: str, policy: Policy) -> Scored:
        """One workload under one policy: its row (no padded JCT, no bounds) and its finished jobs' JCTs."""
        scenario = self.scenario(workload.cluster)
        episode = play(policy, workload.jobs, scenario.backend(policy.ap_search))
        unplaceable = sum(map(len, missing_types(workload.jobs, scenario.cluster).values()))
        metrics = {**episode.metrics, "jobs_unplaceable_type": float(unplaceable)}
        row = {
            "workload": workload.label,
            "trace": workload.trace,
            "split": workload.split,
            "load": workload.load,
            "load_basis": workload.basis,
            "cluster": workload.cluster,
            "seed": workload.window,
            "policy": label,
            **policy_facts(policy),
            **metric_row(metrics),
        }
        return row, finished_jcts(episode.reading.outcomes)

    def bounds_of(self, workload: Workload) -> tuple[float, float]:
        """(LB1, LP) average-JCT bounds of a workload, charged Arena's pruned overhead class."""
        scenario = self.scenario(workload.cluster)
        found = workload_bounds(
            workload.jobs, scenario.cluster, scenario.truth, scenario.sim_config(OverheadClass.PRUNED)
        )
        return found.lb1_avg_jct_s, found.lp_avg_jct_s

    @staticmethod
    def _finish(
        workload: Workload, scored: Mapping[str, Scored], bounds: tuple[float, float] | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A workload's rows, padded across ``scored``'s policies (with the bounds), and its finished jobs' JCTs."""
        rows = [row for row, _ in scored.values()]
        jcts = {label: js for label, (_, js) in scored.items()}
        jobs = [{"workload": workload.label, "policy": label, "jct_s": j} for label, js in jcts.items() for j in js]
        for row, padded in zip(rows, padded_mean_jcts(jcts).values()):
            row[PADDED_COLUMN] = padded
            if bounds is not None:
                row.update(lb1_avg_jct_s=bounds[0], lp_avg_jct_s=bounds[1])
        return rows, jobs


def summarise(table: pd.DataFrame, reference: str = "fcfs") -> pd.DataFrame:
    """Per policy: mean avg JCT over workloads, its ratio to ``reference``, and whether every job finished."""
    grouped = table.groupby("policy", sort=False)
    summary = pd.DataFrame(
        {
            "avg_jct_s": grouped["avg_jct_s"].mean(),
            "p95_jct_s": grouped["p95_jct_s"].mean(),
            "makespan_s": grouped["makespan_s"].mean(),
            "jobs_finished": grouped["jobs_finished"].sum(),
            "jobs_total": grouped["jobs_total"].sum(),
        }
    )
    summary["all_finished"] = summary["jobs_finished"] == summary["jobs_total"]
    if reference in summary.index:
        summary[f"jct_vs_{reference}"] = summary["avg_jct_s"] / summary.loc[reference, "avg_jct_s"]
    return summary.reset_index()


def mean_avg_jct(table: pd.DataFrame, policy: str) -> float:
    """Mean over workloads of one policy's avg JCT; inf if some job of its workloads did not finish."""
    rows = table[table["policy"] == policy]
    if rows.empty:
        raise ValueError(f"policy {policy!r} not in the evaluation table")
    if bool((rows["jobs_finished"] < rows["jobs_total"]).any()):
        return math.inf
    return float(np.mean(rows["avg_jct_s"]))
