"""``arena-gym tune``: a hyperparameter study (Optuna) of a learned agent's trainer; the work is in :mod:`arena_gym.harness.tune`."""

from __future__ import annotations

import argparse
import json

from arena_gym.harness.cli.common import bounded_int, key_values, seed_int
from arena_gym.harness.names import tune_help
from arena_gym.harness.runlock import RunLock


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``tune`` arguments and the handler."""
    parser.add_argument(
        "--target",
        default="es",
        help=f"{tune_help()} (default: es)",
    )
    parser.add_argument(
        "--trials", type=bounded_int(1, 100_000), default=20, help="finished trials the study holds at the end"
    )
    parser.add_argument(
        "--workers", type=bounded_int(1, 256), default=2, help="worker processes running trials (default: 2)"
    )
    parser.add_argument("--seed", type=seed_int, default=0, help="sampler seed and every trial's seed")
    parser.add_argument("--study", default="", help="the study's name in its storage (default: the target's)")
    parser.add_argument(
        "--storage",
        default=None,
        metavar="URL",
        help="SQLAlchemy URL of a storage several machines share (default: sqlite in --out)",
    )
    parser.add_argument(
        "--set",
        dest="base",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field of every trial and of the best config (repeatable)",
    )
    parser.add_argument(
        "--trial-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field of the trials only: their budget, e.g. iterations=3 (repeatable)",
    )
    parser.add_argument(
        "--startup-trials", type=bounded_int(0, 100_000), default=5, help="random trials before TPE and pruning"
    )
    parser.add_argument(
        "--warmup-steps", type=bounded_int(0, 100_000), default=1, help="steps a trial runs before it may be pruned"
    )
    parser.add_argument("--out", default="results/tune", help="study directory (new, empty, or this study's)")
    parser.add_argument(
        "--replace",
        action="store_true",
        help="take --out's results as this study's although they record no kind (results written before kinds "
        "were recorded; a tuning study's own directory is continued without it, another command's is refused)",
    )
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    parser.set_defaults(handler=handle)


def _pairs(values: list[str], flag: str, config_type: type) -> dict[str, object]:
    from arena_gym.harness.tune import coerce

    return key_values(values, flag, lambda key, value: coerce(config_type, key, value))


def handle(args: argparse.Namespace) -> int:
    """Check the settings, the target and its data, then run the study and print the best trial."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ValueError("tune needs Optuna: pip install 'arena-gym[tune]'") from None
    from arena_gym.harness.tune import Tuner, TuneSettings, get_target

    config_type = get_target(args.target).config_type
    settings = TuneSettings(
        target=args.target,
        out=args.out,
        trials=args.trials,
        workers=args.workers,
        seed=args.seed,
        study=args.study,
        storage=args.storage,
        base=_pairs(args.base, "--set", config_type),
        trial_set=_pairs(args.trial_set, "--trial-set", config_type),
        startup_trials=args.startup_trials,
        warmup_steps=args.warmup_steps,
    )
    tuner = Tuner(settings, replace=args.replace)
    with RunLock(tuner.out, "tune"):
        best = tuner.run(progress=args.progress)
    print(f"best trial {best['trial']}: {best['value']:.4f} ({json.dumps(best['params'], sort_keys=True)})")
    print(f"trials: {', '.join(f'{n} {state.lower()}' for state, n in sorted(best['trials'].items()))}")
    print(f"best config: {tuner.out / 'best_config.json'}")
    return 0
