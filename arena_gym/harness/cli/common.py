"""Arguments shared by the subcommands: checked types (parse-time errors) and the RunConfig they give."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_origin

from arena_gym.fields import describe, from_text
from arena_gym.harness.experiment import RunConfig, ScenarioOptions
from arena_gym.harness.names import cluster_help, perf_help
from arena_gym.harness.out_dirs import KINDS, check_out_dir, check_out_file
from arena_gym.scenario import scaled_overhead

#: The built-in workload: a synthetic trace shaped like the artifact's real-testbed trace
#: (``arena/traces/testbed.csv``: 244 jobs in 5.7 h, i.e. ~42 jobs/h; the testbed model/GPU mix;
#: iterations log-normal with the file's log-mean 5.06 and log-std 0.89, 6..500 iterations).
DEFAULT_TRACE = (
    "synthetic:mix=testbed,n_jobs=240,rate_per_h=42,iter_log_mean=5.06,iter_log_sigma=0.89,iter_min=6,iter_max=500"
)
#: Folder of the performance tables inside the cache directory.
TABLES_SUBDIR = "perf-tables"
#: Seeds are 0 .. 2**32 - 1 (what numpy's SeedSequence takes without surprise).
MAX_SEED = 2**32 - 1


def text_type(
    hint: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    above: float | None = None,
    finite: bool = False,
    check: Callable[[Any], Any] | None = None,
) -> Callable[[str], Any]:
    """argparse type: option text read by :func:`arena_gym.fields.from_text` as ``hint``, within bounds.

    ``tuple[X, ...]`` takes comma-separated ``X`` items, each bounded and checked. Bounds: ``low`` and
    ``high`` inclusive, ``above`` exclusive, ``finite``; ``check`` (a value's own rule, the value
    returned) may refuse one with a ValueError. Errors are one line: ``not an integer: '1.5'``,
    ``must be in 1..256: '0'``, or ``check``'s message.
    """
    item = get_args(hint)[0] if get_origin(hint) is tuple else None
    kind = hint if item is None else item
    what = describe(hint) if item is None else "comma-separated " + describe(hint).removeprefix("a tuple of ")
    words = ["finite"] if finite else []
    if low is not None and high is not None:
        words.append(f"in {low}..{high}")
    else:
        words += [f"{op} {bound}" for op, bound in ((">", above), (">=", low), ("<=", high)) if bound is not None]
    rule = " and ".join(words)

    def one(text: str, whole: str) -> Any:
        try:
            value = from_text(text, kind)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {whole!r}") from None
        if not (
            (not finite or math.isfinite(value))
            and (above is None or value > above)
            and (low is None or value >= low)
            and (high is None or value <= high)
        ):
            raise argparse.ArgumentTypeError(f"must be {rule}: {text!r}")
        if check is None:
            return value
        try:
            return check(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    def parse(text: str) -> Any:
        if item is None:
            return one(text, text)
        try:
            items = from_text(text, tuple[str, ...], sep=",")
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None
        return tuple(one(x, text) for x in items)

    return parse


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """argparse type: an integer in ``low..high``."""
    return text_type(int, low, high)


#: argparse types: a float > 0 (``inf`` allowed), a finite float > 0, a finite float >= 0, a seed.
positive_float = text_type(float, above=0)
finite_positive_float = text_type(float, above=0, finite=True)
finite_nonnegative_float = text_type(float, 0, finite=True)
seed_int = bounded_int(0, MAX_SEED)


def key_values(values: list[str], flag: str, parse: Callable[[str, str], Any]) -> dict[str, Any]:
    """The ``KEY=VALUE`` pairs of a repeated option, each value given by ``parse(key, value)``;
    a one-line ValueError naming the flag and the malformed pair."""
    out: dict[str, Any] = {}
    for pair in values:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag}: {pair!r} is not KEY=VALUE")
        out[key.strip()] = parse(key.strip(), value.strip())
    return out


def out_dir(text: str) -> Path:
    """argparse type: a results directory that can be written without destroying anything."""
    try:
        check_out_dir(text, flag="")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Path(text)


def add_replace_argument(parser: argparse.ArgumentParser, kind: str, flag: str = "--out") -> None:
    """--replace: let the command replace its own finished results of ``kind`` in ``flag``'s directory."""
    parser.add_argument(
        "--replace",
        action="store_true",
        help=f"replace {KINDS[kind]} already in {flag}, once the new one is complete "
        "(without it such a directory is refused; another command's results always are)",
    )


def out_file(text: str) -> Path:
    """argparse type: a file that can be written atomically."""
    try:
        check_out_file(text, flag="")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return Path(text)


def model_spec_file(text: str) -> str:
    """argparse type: a JSON file of user-defined models, checked (read and built) at parse time."""
    from arena_gym.harness.experiment import user_models

    try:
        user_models(text, allow_shadowing=True)  # a zoo name is refused after parsing, unless --allow-shadowing
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{text}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--model-spec ")) from None
    return text


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model-spec: user-defined models the estimator knows besides its zoo; --allow-shadowing."""
    parser.add_argument(
        "--model-spec",
        type=model_spec_file,
        default=None,
        metavar="FILE",
        help="JSON file of user-defined models (a transformer, MoE or Wide-ResNet spec, or a list)",
    )
    parser.add_argument(
        "--allow-shadowing",
        action="store_true",
        help="let a --model-spec model, a trace file or a cluster file take a built-in name (refused otherwise)",
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """--trace, --cluster, the scenario options (:func:`add_scenario_arguments`), --strict, --cache-dir, --no-cache."""
    parser.add_argument(
        "--trace",
        default=DEFAULT_TRACE,
        help="trace file (canonical, Arena CSV, ITP CSV) or synthetic[:k=v,...]; default: a testbed-like synthetic trace",
    )
    parser.add_argument("--cluster", default="testbed-64", help=f"{cluster_help()} (default: testbed-64)")
    add_scenario_arguments(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="a job requesting a GPU type the cluster lacks is an error (default: a warning)",
    )
    add_cache_arguments(parser)


def add_scenario_arguments(parser: argparse.ArgumentParser, inherited: str | None = None) -> None:
    """--perf, --belief, --horizon, --round, --no-event-decisions, --overhead-scale, --model-spec and
    --allow-shadowing: the :class:`ScenarioOptions` of ``compare``, ``simulate`` and ``evaluate``
    (:func:`scenario_options`). ``inherited`` says, for the help, what an option left out keeps
    (``evaluate``: "the suite's"; None: the defaults of a run)."""

    def default(own: str) -> str:
        return inherited or own

    parser.add_argument(
        "--perf", default=None, help=perf_help(f"ground-truth performance model (default: {default('estimator')})")
    )
    parser.add_argument(
        "--belief",
        default=None,
        help=perf_help(f"the model policies plan with (default: {default('the truth')}; e.g. noisy:0.2)"),
    )
    parser.add_argument(
        "--horizon",
        type=positive_float,
        default=None,
        help=f"stop after this many seconds (default: {default('none')})",
    )
    parser.add_argument(
        "--round",
        type=finite_positive_float,
        default=None,
        help=f"also decide every ROUND seconds (Arena: 300; default: {default('none')})",
    )
    parser.add_argument("--no-event-decisions", action="store_true", help="decide only on rounds (needs a round)")
    parser.add_argument(
        "--overhead-scale",
        type=finite_nonnegative_float,
        default=None,
        help=f"multiply every reconfiguration overhead (0: none; default: {default('1')})",
    )
    add_model_arguments(parser)


def scenario_options(args: argparse.Namespace) -> ScenarioOptions:
    """The scenario options the parsed arguments give (:func:`add_scenario_arguments`)."""
    return ScenarioOptions(
        perf=args.perf,
        belief=args.belief,
        horizon_s=args.horizon,
        round_s=args.round,
        event_decisions=not args.no_event_decisions,
        overhead=None if args.overhead_scale is None else scaled_overhead(args.overhead_scale),
        model_spec=args.model_spec,
        allow_shadowing=args.allow_shadowing,
    )


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """--cache-dir and --no-cache: where the estimator keeps its performance tables between runs."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="performance-table cache (default: $XDG_CACHE_HOME/arena-gym or ~/.cache/arena-gym)",
    )
    group.add_argument("--no-cache", action="store_true", help="plan every performance table afresh, write no cache")


def default_cache_dir() -> Path:
    """The user's cache directory for arena-gym: ``$XDG_CACHE_HOME/arena-gym``, else ``~/.cache/arena-gym``."""
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".cache") / "arena-gym"


def cache_dir(args: argparse.Namespace) -> Path | None:
    """The performance-table directory the parsed arguments ask for (None: ``--no-cache``)."""
    if args.no_cache:
        return None
    return (args.cache_dir or default_cache_dir()) / TABLES_SUBDIR


def run_config(args: argparse.Namespace, policy: str, seed: int) -> RunConfig:
    """The RunConfig the parsed arguments describe (:func:`scenario_options` on ``--trace`` and ``--cluster``)."""
    return scenario_options(args).run_config(policy, args.trace, args.cluster, seed)


def plot_modules(args: argparse.Namespace) -> tuple[str, ...]:
    """The modules a command with ``--no-plots`` will import for its plots (the ``preload`` of
    :func:`arena_gym.harness.cli.main`, loaded before the program freezes its code)."""
    return () if args.no_plots else ("arena_gym.harness.plots",)
