"""The evaluation protocol: every policy on the same suite of workloads, paired statistics against a reference.

``evaluate(config)`` runs the policies (registered heuristics and ``sb3:PATH`` models) on the
suite's workloads and writes into ``config.out_dir``:

- ``per_workload.csv``: one row per (workload, policy): avg / median / p95 JCT, padded JCT,
  queueing, makespan, jobs finished, utilisation, reconfigurations, preemptions, the
  policy's ``clairvoyant`` flag and restart ``overhead_class``, and (``bounds``) the
  workload's lower bounds ``lb1_avg_jct_s`` and ``lp_avg_jct_s`` (:mod:`arena_gym.harness.bounds`);
- ``jobs.csv``: the JCT of every finished job;
- ``summary.csv`` / ``summary.md``: per policy the mean of ``metric`` with its bootstrap 95%
  interval, win / tie / loss counts against the reference, the mean paired difference with
  its bootstrap 95% interval, the mean per-workload ratio, Wilcoxon / paired t-test p-values,
  the interquartile mean of the score ``reference / policy`` and the probability of
  improvement over the reference with stratified-bootstrap intervals
  (:mod:`arena_gym.harness.aggregates`, rliable), and with bounds the mean ratios to LB1 and
  the LP and the share of the reference's gap to the LP the policy closes; then, traces
  weighted equally, the number of traces and the mean difference and mean ratio
  (``mean_diff_trace``, ``mean_ratio_trace``) with hierarchical bootstrap intervals that
  resample traces, then windows within each drawn trace (``diff_ci_trace_low`` / ``_high``,
  ``ratio_ci_trace_low`` / ``_high``; :mod:`arena_gym.harness.stats`). Pooled figures weight
  windows equally;
- ``by_trace.csv``: per (trace, policy) the windows, mean, the reference's mean, the mean
  difference and ratio, and wins / ties / losses (also in ``summary.md``);
- ``vs_reference.png`` (per-workload scatter), ``cdf.png`` (ratio and per-job JCT CDFs) and
  ``performance_profile.png`` (rliable's score distributions);
- ``config.json`` (the config, the suite's workloads, seed and code version).

The directory is written complete or not at all (:func:`arena_gym.outputs.staged_dir`). The
tables and plots follow from ``per_workload.csv`` and ``jobs.csv`` alone (:func:`write_summaries`,
which ``scripts/regenerate_results.py --tables-only`` also calls). A run on a frozen suite
(``frozen-test``) is first recorded in the committed ledger (:mod:`arena_gym.harness.ledger`).

With ``wandb_mode`` other than ``disabled`` the two tables and the plots go to a wandb run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import pandas as pd

from agents.rl.config import WANDB_MODES
from arena_gym import REAL_DATA_DIR
from arena_gym.cluster import resolve_cluster
from arena_gym.fields import Problems, build, check_fields
from arena_gym.harness.aggregates import AggregateConfig, aggregate
from arena_gym.harness.eval_plots import plot_cdfs, plot_vs_reference
from arena_gym.harness.experiment import NO_OPTIONS, ScenarioOptions, check_trace_name
from arena_gym.harness.flags import flag
from arena_gym.harness.ledger import append_row, check_ledger, default_ledger, ledger_row, repository_root
from arena_gym.harness.out_dirs import check_out_dir, shown_path, staged_dir
from arena_gym.harness.results import arena_version, to_markdown
from arena_gym.harness.scoring import Evaluator, baseline_policies, parse_policy_spec
from arena_gym.harness.stats import TRACE_COLUMNS, by_trace_table, summary_table
from arena_gym.harness.suites import (
    FROZEN_SUITES,
    MODEL_SUITE,
    SUITE_CHOICES,
    SUITE_NAMES,
    WEIGHTS,
    Suite,
    SuitePart,
    custom_suite,
    env_suite,
    get_suite,
    with_options,
)
from arena_gym.harness.sweep import connect_ray
from arena_gym.outputs import atomic_write, code_version, write_csv, write_json
from arena_gym.protocols import Policy
from arena_gym.types import ClusterSpec
from envs import EnvConfig, ObservationPolicy, Workload
from envs.codec import ActionCodec
from envs.config import LOAD_BASES

log = logging.getLogger(__name__)

#: The kind of results directory ``evaluate`` writes (:mod:`arena_gym.harness.out_dirs`).
KIND = "evaluate"

#: Metrics the summary can rank by (lower is better).
METRICS: tuple[str, ...] = ("padded_jct_s", "avg_jct_s", "p95_jct_s", "makespan_s")


@dataclass(frozen=True)
class EvalConfig:
    """One evaluation: policies (``LABEL=SPEC`` or ``SPEC``), a suite, the reference policy and the statistics.

    ``suite`` is a registered name (:data:`arena_gym.harness.suites.SUITE_NAMES`) or ``custom`` with
    ``traces`` (trace specs; their ``split`` windows of ``window_jobs`` jobs on ``cluster`` at
    ``loads``, offered loads or factors of the recorded rate per ``load_basis``). ``limit`` > 0
    keeps that many workloads, evenly spaced. ``scenario`` holds the options ``compare`` takes too
    (perf, belief, horizon, rounds, overheads, user models), laid over every suite part's own
    settings, the workloads cut under them (:func:`arena_gym.harness.suites.with_options`; unset:
    the suite's). ``ledger`` is the ledger a run on a frozen suite is recorded in (None: the
    repository's, :func:`arena_gym.harness.ledger.default_ledger`).
    """

    policies: tuple[str, ...]
    suite: str = "synthetic"
    out_dir: str = "results/evaluate"
    data_dir: str = REAL_DATA_DIR
    reference: str = "arena"
    metric: str = "padded_jct_s"
    seed: int = 0
    resamples: int = 10_000
    limit: int = 0
    traces: tuple[str, ...] = ()
    cluster: str = "testbed-64"
    split: str = "test"
    window_jobs: int = 50
    loads: tuple[float, ...] = (0.9,)
    load_basis: str = "offered"
    wandb_mode: str = "disabled"
    progress: bool = True
    workers: int = 1
    bounds: bool = True
    ray: str | None = None
    ledger: str | None = None
    scenario: ScenarioOptions = NO_OPTIONS

    def __post_init__(self) -> None:
        check_fields(self)
        problems = Problems()
        problems.require(self.workers >= 1, f"{flag('workers')} must be >= 1, got {self.workers}")
        problems.require(
            self.ray is None or self.workers <= 1,
            f"give {flag('workers')} (local processes) or {flag('ray')} (a cluster), not both",
        )
        problems.require(bool(self.policies), f"{flag('policies')} must name at least one policy")
        problems.require(
            self.suite in SUITE_CHOICES,
            f"{flag('suite')}: unknown suite {self.suite!r}; valid: {', '.join(SUITE_CHOICES)}",
        )
        if self.suite == "custom":
            problems.require(bool(self.traces), f"{flag('suite')} custom needs at least one {flag('traces')}")
        else:
            problems.require(not self.traces, f"{flag('traces')} goes with {flag('suite')} custom only")
        problems.require(
            self.load_basis in LOAD_BASES,
            f"{flag('load_basis')}: unknown basis {self.load_basis!r}; valid: {', '.join(LOAD_BASES)}",
        )
        problems.require(
            self.metric in METRICS, f"{flag('metric')}: unknown metric {self.metric!r}; valid: {', '.join(METRICS)}"
        )
        problems.require(self.seed >= 0, f"{flag('seed')} must be >= 0, got {self.seed}")
        problems.require(self.resamples >= 100, f"{flag('resamples')} must be >= 100, got {self.resamples}")
        for name in ("limit", "window_jobs"):
            problems.require(getattr(self, name) >= 0, f"{flag(name)} must be >= 0, got {getattr(self, name)}")
        problems.require(
            self.wandb_mode in WANDB_MODES,
            f"{flag('wandb_mode')}: unknown mode {self.wandb_mode!r}; valid: {', '.join(WANDB_MODES)}",
        )
        problems.raise_if_any()

    def build_suite(self, policies: Mapping[str, Policy] | None = None) -> Suite[SuitePart]:
        """The suite this config names (the data folder is checked for suites that need it).

        ``model`` is the test split of the env the learned ``policies`` were trained on (they must
        share it)."""
        if self.suite == "custom":
            traces = tuple(check_trace_name(t, self.scenario.allow_shadowing) for t in self.traces)
            return custom_suite(traces, self.cluster, self.split, self.window_jobs, self.loads, self.load_basis)
        if self.suite == MODEL_SUITE:
            configs = {repr(p.config): p.config for p in (policies or {}).values() if isinstance(p, ObservationPolicy)}
            if len(configs) != 1:
                raise ValueError(
                    f"suite {MODEL_SUITE!r} needs learned policies (sb3:PATH) trained on one env; got {len(configs)} envs"
                )
            return env_suite(next(iter(configs.values())))
        suite = get_suite(self.suite, self.data_dir)
        if suite.needs_data and not Path(self.data_dir).is_dir():
            raise ValueError(
                f"suite {self.suite!r} needs the real traces: data folder {self.data_dir} does not exist "
                "(give --data-dir)"
            )
        return suite


@dataclass(frozen=True)
class EvalResult:
    """An evaluation's tables and where they were written."""

    per_workload: pd.DataFrame
    summary: pd.DataFrame
    out_dir: Path
    wall_s: float


def evaluate(config: EvalConfig, suite: Suite[SuitePart] | None = None, replace: bool = False) -> EvalResult:
    """Run the protocol (see the module docstring) and write its files; ``suite`` replaces ``config.suite``
    (``config.scenario`` goes on top of its parts either way).

    ``config.out_dir`` may hold a finished evaluation only with ``replace``, checked first
    (:mod:`arena_gym.harness.out_dirs`). On a frozen suite the ledger is checked first and the
    run recorded in it before any policy runs. With ``config.ray`` the cluster is connected to
    before any other work.
    """
    start = time.perf_counter()
    check_out_dir(config.out_dir, kind=KIND, replace=replace)
    frozen = (suite.name if suite is not None else config.suite) in FROZEN_SUITES
    ledger = check_ledger(config.ledger or default_ledger(config.out_dir)) if frozen else None
    if config.ray is not None:
        connect_ray(config.ray)
    policies = baseline_policies(config.policies, config.seed)  # built once: the labels, the unavailable skipped
    suite = with_options(suite or config.build_suite(policies), config.scenario)
    check_models_fit(policies, suite, config.data_dir)
    specs = {label: spec for label, spec in map(parse_policy_spec, config.policies) if label in policies}
    if config.reference not in policies:
        raise ValueError(
            f"{flag('reference')}: reference policy {config.reference!r} is not among the policies ({', '.join(policies)})"
        )
    parts = suite.part_workloads()  # cut under the options: a bad one fails here, before the ledger records the run
    if 0 < config.limit < len(parts):
        step = len(parts) / config.limit
        parts = [parts[int(i * step)] for i in range(config.limit)]
    workloads = [w for _, w in parts]
    if ledger is not None:
        root = repository_root() or Path.cwd()
        row = ledger_row(
            suite.name,
            config.policies,
            shown_path(Path(config.out_dir), root),
            config,
            len(workloads),
            code_version(),
        )
        append_row(ledger, row)
    log.info("suite %s: %d workloads x %d policies", suite.name, len(workloads), len(policies))
    jct_rows: list[dict[str, Any]] = []
    table = score_parts(parts, specs, config, jct_rows)
    jobs = pd.DataFrame(jct_rows, columns=["workload", "policy", "jct_s"])
    out = Path(config.out_dir)
    with staged_dir(out, kind=KIND, replace=replace) as staging:
        write_csv(staging / "per_workload.csv", table)
        write_csv(staging / "jobs.csv", jobs)
        summary = write_summaries(staging, table, jobs, config, suite.name, suite.description)
        wall = time.perf_counter() - start
        write_json(
            staging / "config.json",
            {
                "kind": KIND,
                "evaluate": config,
                "suite": {"name": suite.name, "description": suite.description},
                "workloads": [w.label for w in workloads],
                "seed": config.seed,
                "code_version": code_version(),
                "arena_version": arena_version(),
                "wall_s": wall,
            },
        )
    if config.wandb_mode != "disabled":
        _log_wandb(out, config, table, summary)
    return EvalResult(table, summary, out, wall)


def score_parts(
    parts: Sequence[tuple[SuitePart, Workload]],
    specs: Mapping[str, str],
    config: EvalConfig,
    jct_rows: list[dict[str, Any]],
) -> pd.DataFrame:
    """The per-workload table of ``specs`` on the workloads, each scored under its own part's settings and
    options (consecutive workloads of a part together), in order; ``jct_rows`` receives the finished jobs."""
    tables = [
        Evaluator(part.config, [w for _, w in group], bounds=config.bounds, options=part.options).score_specs(
            specs, config.seed, config.workers, config.progress, jct_rows, config.ray
        )
        for part, group in groupby(parts, key=lambda pair: pair[0])
    ]
    return tables[0] if len(tables) == 1 else pd.concat(tables, ignore_index=True)


def _observed(config: EnvConfig, cluster: str | ClusterSpec) -> tuple[Any, ...]:
    """What fixes a learned policy's spaces on ``cluster``: the GPU types and the grid cells under ``config``."""
    spec = resolve_cluster(cluster)
    return spec.gpu_types, ActionCodec(spec, config).cells


def _suite_clusters(suite: Suite[SuitePart]) -> list[str | ClusterSpec]:
    return list(dict.fromkeys(c for part in suite.parts for c in (part.cluster or part.config.cluster,)))


def check_models_fit(policies: Mapping[str, Policy], suite: Suite[SuitePart], data_dir: str = REAL_DATA_DIR) -> None:
    """ValueError (one line) unless every learned policy can observe every cluster of ``suite``; it names
    the suites that fit the model (``model``: the test split of its own env, always)."""
    for label, policy in policies.items():
        if not isinstance(policy, ObservationPolicy):
            continue
        trained = _observed(policy.config, policy.config.cluster)
        if all(_observed(policy.config, c) == trained for c in _suite_clusters(suite)):
            continue
        fits = [
            name
            for name in SUITE_NAMES
            if all(_observed(policy.config, c) == trained for c in _suite_clusters(get_suite(name, data_dir)))
        ]
        cluster = policy.config.cluster if isinstance(policy.config.cluster, str) else policy.config.cluster.name
        raise ValueError(
            f"policy {label} was trained on cluster {cluster}, whose GPU types and grid differ from suite "
            f"{suite.name}'s; suites that fit it: {', '.join([*fits, MODEL_SUITE])} (model: its own env's test split)"
        )


def recorded_config(out_dir: str | Path) -> EvalConfig:
    """The :class:`EvalConfig` an evaluation directory's ``config.json`` records (to re-run it at the current code).

    A directory that holds no evaluation, or a config with unknown or missing fields or values of the
    wrong type or meaning, is a one-line ``ValueError`` naming the file.
    """
    path = Path(out_dir) / "config.json"
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))["evaluate"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not the config of an evaluation ({err})") from None
    context = f"{path}: evaluate"
    readers = {"scenario": lambda v: ScenarioOptions.read(v, f"{context}: scenario")}
    try:
        return build(EvalConfig, recorded, context, readers)
    except ValueError as err:
        message = str(err)
        raise ValueError(message if message.startswith(context) else f"{context}: {message}") from None


def write_summaries(
    folder: Path, table: pd.DataFrame, jobs: pd.DataFrame | None, config: EvalConfig, suite: str, description: str
) -> pd.DataFrame:
    """From a per-workload table (and ``jobs``' per-job JCTs): write the summaries and plots into ``folder``.

    ``summary.csv``, ``summary.md``, ``by_trace.csv``, ``vs_reference.png``,
    ``performance_profile.png`` and, with ``jobs``, ``cdf.png``, with ``config``'s metric,
    reference, resamples and seed; the bound columns when the table has the bounds. Returns
    the summary.
    """
    summary = summary_table(table, config.metric, config.reference, config.resamples, config.seed)
    lp = dict(zip(table["workload"], table["lp_avg_jct_s"])) if "lp_avg_jct_s" in table.columns else None
    if lp is not None:
        summary = summary.merge(bound_columns(table, config.metric, config.reference), on="policy", how="left")
    rl = aggregate(
        table,
        lp,
        AggregateConfig(config.reference, config.metric, seed=config.seed),
        folder / "performance_profile.png",
    )
    summary = summary.merge(rl.table.drop(columns=["workloads"]), on="policy", how="left")
    summary = summary[[c for c in summary.columns if c not in TRACE_COLUMNS] + list(TRACE_COLUMNS)]
    by_trace = by_trace_table(table, config.metric, config.reference)
    write_csv(folder / "summary.csv", summary)
    write_csv(folder / "by_trace.csv", by_trace)
    text = summary_markdown(summary, config.metric, suite, description) + by_trace_markdown(by_trace, config.metric)
    atomic_write(folder / "summary.md", lambda tmp: tmp.write_text(text, encoding="utf-8"))
    plot_vs_reference(table, config.metric, config.reference, folder / "vs_reference.png")
    if jobs is not None:
        plot_cdfs(table, jobs, config.metric, config.reference, folder / "cdf.png")
    return summary


def bound_columns(table: pd.DataFrame, metric: str, reference: str) -> pd.DataFrame:
    """Per policy: the mean ratio of its metric to each lower bound, and the share of the reference's gap to the LP it closes.

    ``gap_closed`` averages ``(J_ref - J_p) / (J_ref - LP)`` over the workloads: 0 is the
    reference's level, 1 the bound (unreachable in general: the LP relaxes the cluster).
    """
    wide = table.pivot(index="workload", columns="policy", values=metric)
    lb1 = table.groupby("workload")["lb1_avg_jct_s"].first().reindex(wide.index)
    lp = table.groupby("workload")["lp_avg_jct_s"].first().reindex(wide.index)
    rows = []
    for policy in dict.fromkeys(table["policy"]):
        values = wide[policy]
        rows.append(
            {
                "policy": policy,
                "mean_ratio_to_lb1": float((values / lb1).mean()),
                "mean_ratio_to_lp": float((values / lp).mean()),
                "gap_closed": float(((wide[reference] - values) / (wide[reference] - lp)).mean()),
            }
        )
    return pd.DataFrame(rows)


def summary_markdown(summary: pd.DataFrame, metric: str, suite: str, description: str) -> str:
    """The summary as a Markdown table in hours, with the suite named above it."""
    rows = []
    bounds = "mean_ratio_to_lp" in summary.columns
    for r in summary.itertuples(index=False):
        row = {
            "policy": r.policy,
            "clairvoyant": "yes" if r.clairvoyant else "no",
            "overhead": r.overhead_class,
            f"mean {metric} (h)": f"{r.mean / 3600:.2f} [{r.mean_ci_low / 3600:.2f}, {r.mean_ci_high / 3600:.2f}]",
            "wins/ties/losses": f"{r.wins}/{r.ties}/{r.losses}",
            "mean diff (h)": f"{r.mean_diff / 3600:+.2f} [{r.diff_ci_low / 3600:+.2f}, {r.diff_ci_high / 3600:+.2f}]",
            "mean ratio": f"{r.mean_ratio:.3f}",
            "Wilcoxon p": f"{r.wilcoxon_p:.2g}",
            "IQM score": f"{r.iqm_score:.3f} [{r.iqm_score_lo:.3f}, {r.iqm_score_hi:.3f}]",
            "P(improvement)": f"{r.poi:.2f} [{r.poi_lo:.2f}, {r.poi_hi:.2f}]",
        }
        if bounds:
            row.update(
                {
                    "ratio to LP": f"{r.mean_ratio_to_lp:.2f}",
                    "ratio to LB1": f"{r.mean_ratio_to_lb1:.2f}",
                    "gap closed": f"{r.gap_closed:+.3f}",
                }
            )
        row.update(
            {
                "mean diff by trace (h)": f"{r.mean_diff_trace / 3600:+.2f} "
                f"[{r.diff_ci_trace_low / 3600:+.2f}, {r.diff_ci_trace_high / 3600:+.2f}]",
                "mean ratio by trace": f"{r.mean_ratio_trace:.3f} "
                f"[{r.ratio_ci_trace_low:.3f}, {r.ratio_ci_trace_high:.3f}]",
            }
        )
        rows.append(row)
    head = (
        f"Suite `{suite}` ({description}); {int(summary['workloads'].max())} workloads of "
        f"{int(summary['traces'].max())} trace(s); 95% bootstrap intervals; differences are policy - reference; "
        f"IQM of the per-workload score reference / policy and the probability of improvement over the reference "
        f"(rliable, stratified bootstrap); ratios to the lower bounds (LB1: each job alone on its best grid; LP: the "
        f"relaxation of the cluster's capacity) and the share of the reference's gap to the LP closed. "
        f"Weights: {WEIGHTS}.\n\n"
    )
    return head + to_markdown(pd.DataFrame(rows))


def by_trace_markdown(by_trace: pd.DataFrame, metric: str) -> str:
    """The per-trace table as a Markdown section in hours (``by_trace.csv``)."""
    rows = [
        {
            "trace": r.trace,
            "policy": r.policy,
            "windows": r.windows,
            f"mean {metric} (h)": f"{r.mean / 3600:.2f}",
            "mean diff (h)": f"{r.mean_diff / 3600:+.2f}",
            "mean ratio": f"{r.mean_ratio:.3f}",
            "wins/ties/losses": f"{r.wins}/{r.ties}/{r.losses}",
        }
        for r in by_trace.itertuples(index=False)
    ]
    head = "\n## By trace\n\nEach trace's windows alone (windows weighted equally within a trace).\n\n"
    return head + to_markdown(pd.DataFrame(rows))


def _log_wandb(out: Path, config: EvalConfig, table: pd.DataFrame, summary: pd.DataFrame) -> None:
    import wandb

    from arena_gym.harness.tracking import finish_run, start_run

    run = start_run(out, config, "evaluate", config.wandb_mode)
    run.log(
        {
            "per_workload": wandb.Table(dataframe=table),
            "summary": wandb.Table(dataframe=summary),
            "vs_reference": wandb.Image(str(out / "vs_reference.png")),
            "cdf": wandb.Image(str(out / "cdf.png")),
        }
    )
    finish_run(run)
