"""Benchmark: PPO fine-tuning of the documented residual, plain against warm-start-keeping, on the same budget.

Protocol.

- Both runs start from the same warm start (``--warm-start``, the documented ES weights), the
  same seed, the same train windows and the same budget (``--steps`` environment steps, 2 envs,
  a PPO update every 512 steps per env), and are scored on the same validation windows (all 12
  of ``real-validation``) at the start and every ``--eval-every`` steps, as the geometric-mean
  ratio of their mean actor's padded average JCT to ``arena-gittins-32-f``'s.
- ``plain``: PPO as SB3 ships it (learning rate 3e-4, no warm-up). ``kept``: a learning rate of
  3e-5 and a critic warm-up of 3 updates with the actor frozen. ``anchored``: plain's learning
  rate after the same warm-up, with a penalty on the KL from the warm start's policy whose
  coefficient adapts towards 0.05 per decision point (the KL per decision point the warm start
  drifts to under plain PPO's learning rate is about 0.07-0.10, so the anchor binds).
  ``relative``: plain's learning rate after the same warm-up, every window's return relative to
  the base policy's on it.
- Goal (the issue's): the validation score never more than 1% worse than the warm start's.
  The four runs go in four processes side by side (on 2 cores: each at about half speed); the
  load average is recorded before and after.

Writes ``benchmarks/results/residual/finetune/{plain,kept,anchored,relative}/`` (each run's history, weights and
config), ``finetune.png`` (the curves) and ``finetune.json`` (the figures, config, code version).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_finetune.py [--steps 16384] [--eval-every 2048] [--replace]

An earlier run's folders are refused before any work unless ``--replace``; each is replaced only
once its new run is complete.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

from arena_gym import REAL_DATA_DIR
from arena_gym.harness.eval_plots import plot_finetune
from arena_gym.harness.out_dirs import check_out_dir, filled_dir, machine
from arena_gym.harness.trainers.residual_ppo import KIND, ResidualPPOConfig, ResidualPPOTrainer
from arena_gym.outputs import code_version, write_json

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "residual" / "finetune"
VARIANTS = {
    "plain": {"learning_rate": 3e-4, "critic_warmup": 0},
    "kept": {"learning_rate": 3e-5, "critic_warmup": 3},
    "anchored": {"learning_rate": 3e-4, "critic_warmup": 3, "kl_target": 0.05, "kl_coef": 0.1},
    "relative": {"learning_rate": 3e-4, "critic_warmup": 3, "returns": "relative"},
}
LABELS = {
    "plain": "plain PPO (lr 3e-4)",
    "kept": "kept: lr 3e-5, critic warm-up 3 updates",
    "anchored": "anchored: lr 3e-4, warm-up 3, adaptive KL to the warm start (target 0.05)",
    "relative": "relative: lr 3e-4, warm-up 3, returns relative to the base on the window",
}


def run(args: tuple[str, ResidualPPOConfig, Path]) -> tuple[str, float]:
    import logging

    logging.basicConfig(level=logging.INFO, format=f"%(levelname)s {args[0]}: %(message)s")
    for quiet in ("traces", "envs.workload"):
        logging.getLogger(quiet).setLevel(logging.WARNING)
    began = time.perf_counter()
    with filled_dir(args[2]) as work:
        ResidualPPOTrainer(args[1], work).run(progress=False)
    return args[0], time.perf_counter() - began


def summary(history: pd.DataFrame, wall_s: float) -> dict:
    scores = history["validation_geomean_ratio"]
    start = float(scores.iloc[0])
    return {
        "start": start,
        "best": float(scores.min()),
        "worst": float(scores.max()),
        "final": float(scores.iloc[-1]),
        "worst_vs_start": float(scores.max() / start),
        "kept_within_1pct": bool(scores.max() <= 1.01 * start),
        "validations": len(scores),
        "wall_s": wall_s,
    }


def check_outs(out: Path, replace: bool) -> None:
    """Refuse (one-line ValueError) a variant's folder that is not a residual-ppo run, or is one and not ``replace``."""
    for name in VARIANTS:
        check_out_dir(out / name, kind=KIND, replace=replace)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-start", default="benchmarks/results/residual/train-tuned/residual.json")
    parser.add_argument("--data-dir", default=REAL_DATA_DIR, help="relative to the repository root, where it runs")
    parser.add_argument("--steps", type=int, default=16_384)
    parser.add_argument("--eval-every", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--replace", action="store_true", help="replace an earlier run's folders")
    args = parser.parse_args()
    try:
        check_outs(args.out, args.replace)
    except ValueError as exc:
        raise SystemExit(f"bench_finetune: {exc}") from None
    base = ResidualPPOConfig(
        warm_start=args.warm_start,
        data_dir=args.data_dir,
        steps=args.steps,
        n_envs=2,
        n_steps=512,
        batch_size=256,
        n_epochs=5,
        eval_every=args.eval_every,
        seed=args.seed,
        workers=1,
    )
    jobs = [(name, dataclasses.replace(base, **change), args.out / name) for name, change in VARIANTS.items()]
    load_before = os.getloadavg()
    with ProcessPoolExecutor(len(jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        walls = dict(pool.map(run, jobs))
    histories = {name: pd.read_csv(args.out / name / "history.csv") for name in VARIANTS}
    plot_finetune({LABELS[n]: h for n, h in histories.items()}, args.out / "finetune.png")
    figures = {name: summary(histories[name], walls[name]) for name in VARIANTS}
    write_json(
        args.out / "finetune.json",
        {
            "code_version": code_version(),
            "seed": args.seed,
            "config": base,
            "variants": VARIANTS,
            "figures": figures,
            "machine": machine(load_before),
        },
    )
    for name, f in figures.items():
        print(
            f"{name:>8}: start {f['start']:.4f}, best {f['best']:.4f}, worst {f['worst']:.4f} "
            f"({100 * (f['worst_vs_start'] - 1):+.2f}% of the start), final {f['final']:.4f}, "
            f"within 1%: {f['kept_within_1pct']}, {f['wall_s']:.0f} s"
        )


if __name__ == "__main__":
    main()
