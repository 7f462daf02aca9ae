"""The experiment harness: policies x traces x seeds, in parallel processes, into one leaderboard."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from arena_gym.harness.experiment import RunConfig, RunResult, run
from arena_gym.harness.flags import flag
from arena_gym.harness.gpu_types import check_requested_types
from arena_gym.harness.out_dirs import check_out_dir, staged_dir
from arena_gym.harness.results import PADDED_COLUMN, leaderboard, to_markdown, write_run
from arena_gym.harness.suites import Suite, TracePart
from arena_gym.harness.sweep import connect_ray, run_tasks
from arena_gym.outputs import code_version, write_csv, write_json
from arena_gym.scenario import Scenario
from arena_gym.types import JobSpec
from envs import Workload

log = logging.getLogger(__name__)

#: The kind of results directory ``compare`` writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "compare"


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    """A grid of runs sharing everything but policy, trace and seed.

    ``strict`` makes a job requesting a GPU type the cluster lacks an error (else a warning,
    counted in ``jobs_unplaceable_type``). The runs go to ``workers`` local processes, or, with
    ``ray`` (a cluster address or ``auto``), are Ray tasks on that cluster. With ``reference``
    every policy is also compared with that one, paired over the workloads (trace x seed), as
    ``evaluate`` compares (:func:`arena_gym.harness.stats.summary_table`).
    """

    policies: tuple[str, ...]
    traces: tuple[str, ...]
    seeds: tuple[int, ...]
    base: RunConfig
    workers: int = 1
    pad_reference: str | None = None
    strict: bool = False
    ray: str | None = None
    reference: str | None = None

    def __post_init__(self) -> None:
        for name in ("policies", "traces", "seeds"):
            values = getattr(self, name)
            if not values:
                raise ValueError(f"compare needs at least one of {name}")
            twice = [v for v, n in Counter(values).items() if n > 1]
            if twice:
                raise ValueError(f"{name} lists {twice[0]!r} twice")
        if self.workers < 1:
            raise ValueError(f"{flag('workers')} must be >= 1, got {self.workers}")
        if self.ray is not None and self.workers > 1:
            raise ValueError(f"give {flag('workers')} (local processes) or {flag('ray')} (a cluster), not both")
        if self.pad_reference not in (None, "max") and self.pad_reference not in self.policies:
            raise ValueError(
                f"{flag('pad_reference')}: padding reference policy {self.pad_reference!r} is not among {', '.join(self.policies)} (or 'max')"
            )
        if self.reference is not None and self.reference not in self.policies:
            raise ValueError(
                f"{flag('reference')}: reference policy {self.reference!r} is not among {', '.join(self.policies)}"
            )

    @property
    def metric(self) -> str:
        """The leaderboard's ranking metric, the one the paired comparison is of."""
        return PADDED_COLUMN if self.pad_reference else "avg_jct_s"

    def scenarios(self, cache_dir: Path | None = None) -> dict[int, Scenario]:
        """Each seed's scenario (cluster, models, simulator settings), built once and shared by its runs."""
        return {seed: dataclasses.replace(self.base, seed=seed).scenario(cache_dir) for seed in self.seeds}

    def suite(self, scenarios: Mapping[int, Scenario]) -> Suite[TracePart]:
        """The grid as a suite: every trace at every seed, on that seed's scenario (:meth:`scenarios`)."""
        part = TracePart("compare", self.traces, self.seeds, scenarios, self.base.allow_shadowing)
        return Suite("compare", f"{', '.join(self.traces)} x seeds {', '.join(map(str, self.seeds))}", (part,))

    def runs(self, workload: Workload) -> list[RunConfig]:
        """The run config of every policy on one of :meth:`suite`'s workloads."""
        return [
            dataclasses.replace(self.base, policy=p, trace=workload.trace, seed=workload.window) for p in self.policies
        ]


def paired_summary(board: pd.DataFrame, metric: str, reference: str, policies: Sequence[str]) -> pd.DataFrame:
    """Per policy (in the order of ``policies``): ``metric`` compared with ``reference``'s on every
    (trace, seed) of a leaderboard, paired; the columns of ``evaluate``'s summary
    (:func:`arena_gym.harness.stats.summary_table`)."""
    from arena_gym.harness.stats import summary_table  # scipy only when a reference is given

    table = board.assign(workload=[f"{t}@seed{s}" for t, s in zip(board["trace"], board["seed"])])
    summary = summary_table(table, metric, reference)
    return summary.set_index("policy").loc[list(policies)].reset_index()


def slug(text: str) -> str:
    """A file-name-safe version of a trace or policy spec."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(text).stem if "/" in text else text).strip("_.") or "run"


def unique_slugs(specs: Sequence[str]) -> dict[str, str]:
    """Spec -> directory name: :func:`slug`, plus a short hash of the spec where two slugs collide
    (two traces ``a/x.csv`` and ``b/x.csv``; names differing only in case)."""
    base = {s: slug(s) for s in specs}
    clash = Counter(v.lower() for v in base.values())
    return {
        s: v if clash[v.lower()] == 1 else f"{v}-{hashlib.sha1(s.encode()).hexdigest()[:8]}" for s, v in base.items()
    }


#: One run for a worker: its config, its jobs, its workload's scenario and whether it shows its finished jobs.
Task = tuple[RunConfig, tuple[JobSpec, ...], Scenario, bool]


def _run_one(task: Task) -> RunResult:
    config, jobs, scenario, progress = task
    return run(config, progress, jobs=jobs, scenario=scenario)


def compare(
    config: CompareConfig,
    out_dir: Path,
    progress: bool = True,
    plots: bool = True,
    cache_dir: Path | None = None,
    replace: bool = False,
) -> tuple[list[RunResult], pd.DataFrame]:
    """Run every config, write per-run directories, plots per trace (unless ``plots`` is False) and the leaderboard.

    ``out_dir`` is written complete or not at all (built under a temporary name, then renamed);
    it may hold a finished comparison only with ``replace`` (:mod:`arena_gym.harness.out_dirs`).
    ``cache_dir`` is the estimator's performance-table cache (None: none). With ``config.ray``
    the cluster is connected to first, before any work.
    """
    check_out_dir(out_dir, kind=KIND, replace=replace)
    if config.ray is not None:
        connect_ray(config.ray)
    with staged_dir(out_dir, kind=KIND, replace=replace) as staging:
        scenarios = config.scenarios(cache_dir)
        workloads = config.suite(scenarios).workloads()
        unplaceable = {
            w.label: check_requested_types(w.jobs, scenarios[w.window].cluster, strict=config.strict, source=w.trace)
            for w in workloads
        }
        # runs in this process show their finished jobs below the runs' bar (the simulator's delayed bar)
        inner = progress and config.ray is None and config.workers == 1
        tasks = [(c, w.jobs, scenarios[w.window], inner) for w in workloads for c in config.runs(w)]
        labels = [w.label for w in workloads for _ in config.policies]
        results = [
            dataclasses.replace(r, metrics={**r.metrics, "jobs_unplaceable_type": float(unplaceable[label])})
            for r, label in zip(
                run_tasks(_run_one, tasks, config.workers, progress, unit="run", ray=config.ray), labels
            )
        ]
        trace_dirs, policy_dirs = unique_slugs(config.traces), unique_slugs(config.policies)
        for r in results:
            write_run(
                staging / trace_dirs[r.config.trace] / f"{policy_dirs[r.config.policy]}-seed{r.config.seed}",
                r,
                plots=False,
            )
        if plots:
            from arena_gym.harness.plots import plot_all  # matplotlib only when plots are drawn
        for trace in config.traces if plots else ():
            for seed in config.seeds:
                group = [r.record for r in results if r.config.trace == trace and r.config.seed == seed]
                plot_dir = staging / trace_dirs[trace] / ("" if len(config.seeds) == 1 else f"seed{seed}")
                plot_dir.mkdir(parents=True, exist_ok=True)
                plot_all(group, plot_dir)
        board = leaderboard(results, config.pad_reference)
        write_csv(staging / "leaderboard.csv", board.assign(code_version=code_version()))
        (staging / "leaderboard.md").write_text(to_markdown(board))
        if config.reference is not None:
            paired = paired_summary(board, config.metric, config.reference, config.policies)
            write_csv(staging / "paired.csv", paired)
            (staging / "paired.md").write_text(to_markdown(paired))
        write_json(
            staging / "config.json",
            {
                "kind": KIND,
                "compare": config,
                "code_version": code_version(),
                "run_dirs": {"traces": trace_dirs, "policies": policy_dirs},
            },
        )
    log.info("wrote %d runs to %s", len(results), out_dir)
    return results, board
