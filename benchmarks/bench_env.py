"""Benchmark the gym env: random-masked-agent steps/s and the env's share of MaskablePPO training time.

    python benchmarks/bench_env.py [--perf SPEC] [--steps N] [--warmup N] [--ppo-steps N]

Prints, for ArenaGym/Testbed64-v0 (target >= 5,000 steps/s) and ArenaGym/Arena1280-v0
(Philly-like workload), the steps per second of a uniformly random agent over the valid
actions (wall clock and process CPU time, after ``--warmup`` untimed steps that fill the
performance model's lazily built tables, a one-off cost per job configuration), then the share
of a short MaskablePPO ``learn()`` (n_steps=256, one env, one torch thread, after the same
warm-up) spent inside env.step / env.reset / action_masks (target < 20%).

``--perf`` is a perf spec (default ``estimator``, the calibrated AP estimator).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the ids)
from arena_gym.cluster import load_cluster
from arena_gym.experiment import make_perf
from arena_gym.protocols import PerfModel

def resolve_perf(spec: str, cluster: str) -> PerfModel:
    """A fresh PerfModel of ``spec`` for a preset cluster (its lazy tables start empty)."""
    return make_perf(spec, load_cluster(cluster))


def random_steps(env: gym.Env, rng: np.random.Generator, info: dict[str, Any], steps: int) -> tuple[dict[str, Any], int]:
    """Play ``steps`` uniformly random valid actions (resetting at episode ends); (last info, episodes ended)."""
    episodes = 0
    for _ in range(steps):
        _, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if terminated or truncated:
            episodes += 1
            _, info = env.reset()
    return info, episodes


def random_agent_rate(env_id: str, perf: PerfModel, steps: int, warmup: int, seed: int = 0) -> dict[str, float]:
    """Steps/s of a uniformly random masked agent (made env, so gymnasium's wrappers are included)."""
    env = gym.make(env_id, perf=perf)
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    info, _ = random_steps(env, rng, info, warmup)
    wall, cpu = time.perf_counter(), time.process_time()
    _, episodes = random_steps(env, rng, info, steps)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"steps": steps, "wall_steps_s": steps / wall, "cpu_steps_s": steps / cpu, "episodes": episodes}


class EnvTimer(gym.Wrapper):
    """Accumulates the wall time spent inside step, reset and action_masks."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.seconds = 0.0

    def step(self, action: Any) -> Any:
        t0 = time.perf_counter()
        out = self.env.step(action)
        self.seconds += time.perf_counter() - t0
        return out

    def reset(self, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = self.env.reset(**kwargs)
        self.seconds += time.perf_counter() - t0
        return out

    def action_masks(self) -> np.ndarray:
        t0 = time.perf_counter()
        mask = self.env.unwrapped.action_masks()
        self.seconds += time.perf_counter() - t0
        return mask


def ppo_share(env_id: str, perf: PerfModel, steps: int, warmup: int, seed: int = 0) -> dict[str, float]:
    """Wall time of MaskablePPO.learn(steps) and the part spent inside the env.

    ``warmup`` random masked steps first fill the performance model's lazily built tables (a
    one-off cost per job configuration that a long training run amortises).
    """
    import torch
    from sb3_contrib import MaskablePPO

    torch.set_num_threads(1)
    env = EnvTimer(gym.make(env_id, perf=perf))
    _, info = env.reset(seed=seed)
    random_steps(env, np.random.default_rng(seed), info, warmup)
    env.seconds = 0.0
    model = MaskablePPO("MultiInputPolicy", env, n_steps=256, batch_size=64, seed=seed, device="cpu", verbose=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    total = time.perf_counter() - t0
    return {"learn_s": total, "env_s": env.seconds, "share": env.seconds / total, "steps": model.num_timesteps}


def main() -> None:
    """Run the benchmarks and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--perf", default="estimator", help="perf spec (default: estimator)")
    parser.add_argument("--steps", type=int, default=20_000, help="random-agent steps per env")
    parser.add_argument("--ppo-steps", type=int, default=2048, help="MaskablePPO timesteps (whole rollouts of 256)")
    parser.add_argument("--warmup", type=int, default=5000,
                        help="untimed random steps first, filling the perf model's lazy tables (one-off cost)")
    args = parser.parse_args()

    for env_id, cluster, target in (("ArenaGym/Testbed64-v0", "testbed-64", 5000.0), ("ArenaGym/Arena1280-v0", "arena-1280", None)):
        print(f"{env_id}:")
        r = random_agent_rate(env_id, resolve_perf(args.perf, cluster), args.steps, args.warmup)
        goal = f" (target >= {target:,.0f}: {'met' if r['cpu_steps_s'] >= target else 'NOT met'})" if target else ""
        print(f"  random masked agent, perf {args.perf}: {r['wall_steps_s']:,.0f} steps/s wall, "
              f"{r['cpu_steps_s']:,.0f} steps/s CPU over {r['steps']:,} steps, {r['episodes']} episodes{goal}")

    s = ppo_share("ArenaGym/Testbed64-v0", resolve_perf(args.perf, "testbed-64"), args.ppo_steps, args.warmup)
    print(f"MaskablePPO learn({s['steps']}) on ArenaGym/Testbed64-v0 (n_steps=256, 1 env, 1 thread, perf {args.perf}): "
          f"{s['learn_s']:.2f} s, env {s['env_s']:.2f} s = {100 * s['share']:.1f}% of training time "
          f"(target < 20%: {'met' if s['share'] < 0.2 else 'NOT met'})")


if __name__ == "__main__":
    main()
