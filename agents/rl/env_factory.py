"""Building the training environments: an env id plus overrides -> EnvConfig, single envs and VecEnvs."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from envs import ENV_IDS, EnvConfig

#: ``TrainConfig.vec`` name -> SB3 VecEnv class.
VEC_ENVS: Mapping[str, type[VecEnv]] = {"dummy": DummyVecEnv, "subproc": SubprocVecEnv}


def env_config(env_id: str, overrides: Mapping[str, Any]) -> EnvConfig:
    """The EnvConfig a registered env id has once ``overrides`` replace some fields."""
    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        raise ValueError(f"unknown env {env_id!r}; registered: {', '.join(ENV_IDS)}") from None
    base = spec.kwargs.get("config")
    if not isinstance(base, EnvConfig):
        raise ValueError(f"env {env_id!r} is not an arena-gym env (no EnvConfig in its registration)")
    return base.replace(**dict(overrides))


def make_env(env_id: str, overrides: Mapping[str, Any]) -> gym.Env:
    """One env, as ``gymnasium.make(env_id, **overrides)`` builds it (importable in subprocesses,
    where importing this module registers the ids through ``envs``)."""
    return gym.make(env_id, **dict(overrides))


def make_training_vec_env(
    env_id: str, overrides: Mapping[str, Any], n_envs: int, vec: str, seed: int, start_method: str | None = None
) -> VecEnv:
    """``n_envs`` monitored copies in a Dummy/Subproc VecEnv; env ``i`` is first reset with ``seed + i``.

    Later resets continue each env's own generator, so every episode draws a fresh workload
    (trace seed or window, and load level). SubprocVecEnv needs a ``__main__`` guard in scripts.
    """
    if vec not in VEC_ENVS:
        raise ValueError(f"unknown vec {vec!r}; valid: {', '.join(VEC_ENVS)}")
    vec_kwargs = {"start_method": start_method} if vec == "subproc" and start_method else None
    return make_vec_env(
        functools.partial(make_env, env_id, dict(overrides)),
        n_envs=n_envs,
        seed=seed,
        vec_env_cls=VEC_ENVS[vec],
        vec_env_kwargs=vec_kwargs,
    )
