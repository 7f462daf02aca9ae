"""Benchmark the gym env: random-masked-agent steps/s, the env's share of MaskablePPO training time, VecEnv kinds.

    python benchmarks/bench_env.py [--perf SPEC] [--steps N] [--warmup N] [--ppo-steps N] [--vec-steps N]

Prints, for ArenaGym/Testbed64-v1 (target >= 5,000 steps/s), ArenaGym/Testbed64Real-v1 (real
trace windows; skipped without ../shared/data) and ArenaGym/Arena1280-v1 (Philly-like
workload), the steps per second of a uniformly random agent over the valid
actions (wall clock and process CPU time, after ``--warmup`` untimed steps that fill the
performance model's lazily built tables, a one-off cost per job configuration), then the share
of a short MaskablePPO ``learn()`` (n_steps=256, one env, one torch thread, after the same
warm-up) spent inside env.step / env.reset / action_masks (target < 20%).

spent inside env.step / env.reset / action_masks (target < 20%). Last, MaskablePPO training
throughput on ArenaGym/Testbed64Real-v1 (or Testbed64-v1 without the data) with 2 envs in a
DummyVecEnv and in a SubprocVecEnv (fork and forkserver start), wall clock and per CPU-second of
this process and its children: which VecEnv ``arena-gym train --vec`` should default to here.

``--perf`` is a perf spec (default ``estimator``, the calibrated AP estimator).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import envs  # noqa: F401  (registers the ids)
from arena_gym.cluster import load_cluster
from arena_gym.protocols import PerfModel
from arena_gym.registry import make_perf

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def fresh_perf(spec: str, cluster: str) -> PerfModel:
    """A fresh PerfModel of ``spec`` for a preset cluster (its lazy tables start empty)."""
    return make_perf(spec, load_cluster(cluster))


def random_steps(
    env: gym.Env, rng: np.random.Generator, info: dict[str, Any], steps: int
) -> tuple[dict[str, Any], int]:
    """Play ``steps`` uniformly random valid actions (resetting at episode ends); (last info, episodes ended)."""
    episodes = 0
    for _ in range(steps):
        _, _, terminated, truncated, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        if terminated or truncated:
            episodes += 1
            _, info = env.reset()
    return info, episodes


def random_agent_rate(
    env_id: str, perf: PerfModel, steps: int, warmup: int, overrides: dict[str, Any] | None = None, seed: int = 0
) -> dict[str, float]:
    """Steps/s of a uniformly random masked agent (made env, so gymnasium's wrappers are included)."""
    env = gym.make(env_id, perf=perf, **(overrides or {}))
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


def _cpu_with_children() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def vec_rate(
    env_id: str, overrides: dict[str, Any], vec: str, start_method: str | None, steps: int
) -> dict[str, float]:
    """MaskablePPO learn(steps) with 2 envs of ``vec`` kind: steps/s wall and per CPU-second (children included).

    Runs in a forked child process so that the CPU time of SubprocVecEnv workers is counted.
    """
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        import torch
        from sb3_contrib import MaskablePPO

        from agents.rl.env_factory import make_training_vec_env

        torch.set_num_threads(1)
        venv = make_training_vec_env(env_id, overrides, 2, vec, 0, start_method)
        model = MaskablePPO("MultiInputPolicy", venv, n_steps=256, batch_size=128, seed=0, device="cpu", verbose=0)
        wall, cpu = time.perf_counter(), _cpu_with_children()
        model.learn(total_timesteps=steps)
        venv.close()
        wall, cpu = time.perf_counter() - wall, _cpu_with_children() - cpu
        os.write(write, f"{model.num_timesteps} {wall} {cpu}".encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        done, wall, cpu = (float(x) for x in pipe.read().split())
    os.waitpid(pid, 0)
    return {"steps": done, "wall_steps_s": done / wall, "cpu_steps_s": done / cpu}


def main() -> None:
    """Run the benchmarks and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--perf", default="estimator", help="perf spec (default: estimator)")
    parser.add_argument("--steps", type=int, default=20_000, help="random-agent steps per env")
    parser.add_argument("--ppo-steps", type=int, default=2048, help="MaskablePPO timesteps (whole rollouts of 256)")
    parser.add_argument("--vec-steps", type=int, default=4096, help="MaskablePPO timesteps per VecEnv kind")
    parser.add_argument(
        "--warmup",
        type=int,
        default=5000,
        help="untimed random steps first, filling the perf model's lazy tables (one-off cost)",
    )
    args = parser.parse_args()

    real = {"data_dir": str(DATA)}
    cases = [("ArenaGym/Testbed64-v1", "testbed-64", 5000.0, {}), ("ArenaGym/Arena1280-v1", "arena-1280", None, {})]
    if DATA.is_dir():
        cases.insert(1, ("ArenaGym/Testbed64Real-v1", "testbed-64", None, real))
    for env_id, cluster, target, overrides in cases:
        print(f"{env_id}:")
        r = random_agent_rate(env_id, fresh_perf(args.perf, cluster), args.steps, args.warmup, overrides)
        goal = f" (target >= {target:,.0f}: {'met' if r['cpu_steps_s'] >= target else 'NOT met'})" if target else ""
        print(
            f"  random masked agent, perf {args.perf}: {r['wall_steps_s']:,.0f} steps/s wall, "
            f"{r['cpu_steps_s']:,.0f} steps/s CPU over {r['steps']:,} steps, {r['episodes']} episodes{goal}"
        )

    s = ppo_share("ArenaGym/Testbed64-v1", fresh_perf(args.perf, "testbed-64"), args.ppo_steps, args.warmup)
    print(
        f"MaskablePPO learn({s['steps']}) on ArenaGym/Testbed64-v1 (n_steps=256, 1 env, 1 thread, perf {args.perf}): "
        f"{s['learn_s']:.2f} s, env {s['env_s']:.2f} s = {100 * s['share']:.1f}% of training time "
        f"(target < 20%: {'met' if s['share'] < 0.2 else 'NOT met'})"
    )

    env_id, overrides = ("ArenaGym/Testbed64Real-v1", real) if DATA.is_dir() else ("ArenaGym/Testbed64-v1", {})
    print(f"MaskablePPO on {env_id}, 2 envs, n_steps=256, 1 torch thread, {args.vec_steps} steps:")
    for vec, method in (("dummy", None), ("subproc", "fork"), ("subproc", "forkserver")):
        r = vec_rate(env_id, overrides, vec, method, args.vec_steps)
        # forkserver workers are children of the fork server, not of this process: their CPU is not counted
        cpu = "CPU not countable" if method == "forkserver" else f"{r['cpu_steps_s']:7,.0f} steps per CPU-second"
        print(f"  {vec:8s}{'/' + method if method else '':12s} {r['wall_steps_s']:7,.0f} steps/s wall, {cpu}")


if __name__ == "__main__":
    main()
