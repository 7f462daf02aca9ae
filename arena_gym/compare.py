"""The experiment harness: policies x traces x seeds, in parallel processes, into one leaderboard."""

from __future__ import annotations

import dataclasses
import logging
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from arena_gym.cluster import load_cluster
from arena_gym.experiment import RunConfig, RunResult, load_jobs, make_perf, run
from arena_gym.plots import plot_all
from arena_gym.results import code_version, leaderboard, to_markdown, write_csv, write_json, write_run
from arena_gym.types import JobSpec

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CompareConfig:
    """A grid of runs sharing everything but policy, trace and seed."""

    policies: tuple[str, ...]
    traces: tuple[str, ...]
    seeds: tuple[int, ...]
    base: RunConfig
    workers: int = 1
    pad_reference: str | None = None

    def runs(self) -> list[RunConfig]:
        """Every (trace, seed, policy) run config, in a fixed order."""
        return [dataclasses.replace(self.base, policy=p, trace=t, seed=s)
                for t in self.traces for s in self.seeds for p in self.policies]


def slug(text: str) -> str:
    """A file-name-safe version of a trace or policy spec."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(text).stem if "/" in text else text).strip("_") or "run"


def _run_one(args: tuple[RunConfig, tuple[JobSpec, ...]]) -> RunResult:
    config, jobs = args
    return run(config, jobs=jobs)


def compare(config: CompareConfig, out_dir: Path, progress: bool = True) -> tuple[list[RunResult], pd.DataFrame]:
    """Run every config, write per-run directories, plots per trace and the leaderboard."""
    out_dir.mkdir(parents=True, exist_ok=True)
    cluster = load_cluster(config.base.cluster)
    truth = make_perf(config.base.perf, cluster)
    workloads = {(t, s): load_jobs(t, cluster, truth, s) for t in config.traces for s in config.seeds}
    runs = config.runs()
    tasks = [(c, workloads[(c.trace, c.seed)]) for c in runs]
    bar = tqdm(total=len(tasks), desc="runs", unit="run", disable=not progress)
    results: list[RunResult] = []
    if config.workers > 1 and len(tasks) > 1:
        with ProcessPoolExecutor(max_workers=config.workers) as pool:
            for result in pool.map(_run_one, tasks):
                results.append(result)
                bar.update()
    else:
        for task in tasks:
            results.append(_run_one(task))
            bar.update()
    bar.close()
    for r in results:
        write_run(out_dir / slug(r.config.trace) / f"{slug(r.config.policy)}-seed{r.config.seed}", r, plots=False)
    for trace in config.traces:
        for seed in config.seeds:
            group = [r.record for r in results if r.config.trace == trace and r.config.seed == seed]
            plot_all(group, (out_dir / slug(trace)).resolve() if len(config.seeds) == 1
                     else _mkdir(out_dir / slug(trace) / f"seed{seed}"))
    board = leaderboard(results, config.pad_reference)
    write_csv(out_dir / "leaderboard.csv", board)
    (out_dir / "leaderboard.md").write_text(to_markdown(board))
    write_json(out_dir / "config.json", {"compare": config, "code_version": code_version()})
    log.info("wrote %d runs to %s", len(results), out_dir)
    return results, board


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path
