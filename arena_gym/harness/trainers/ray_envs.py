"""A stable-baselines3 VecEnv whose envs live in Ray actors, so a trainer's rollouts step on a Ray cluster.

Each env is built by its factory inside an actor and keeps SB3's step semantics there:
a finished episode is reset at once, its last observation in the info as ``terminal_observation``
and ``TimeLimit.truncated`` set. The envs of a step run in parallel; the learner stays in the
driver. The actors take Ray's default resources (a CPU to be placed, none held while they run), so
Ray tasks the trainer starts beside them (its validations) are never left without a CPU, however
small the cluster. The factories must pickle (module-level functions or partials of them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.env_util import is_wrapped
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn

from arena_gym.harness.sweep import connect_ray


class EnvActor:
    """One env, held by a Ray actor."""

    def __init__(self, make_env: Callable[[], gym.Env]) -> None:
        self.env = make_env()

    def spaces(self) -> tuple[spaces.Space, spaces.Space]:
        """The env's observation and action spaces."""
        return self.env.observation_space, self.env.action_space

    def reset(self, seed: int | None, options: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        """``env.reset`` with the seed and options SB3 set for the next reset."""
        return self.env.reset(seed=seed, **({"options": options} if options else {}))

    def step(self, action: np.ndarray) -> tuple[Any, float, bool, dict[str, Any], dict[str, Any]]:
        """One step in SB3's form: (observation, reward, done, info, the reset's info when the episode ended)."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["TimeLimit.truncated"] = truncated and not terminated
        reset_info: dict[str, Any] = {}
        if terminated or truncated:
            info["terminal_observation"] = obs
            obs, reset_info = self.env.reset()
        return obs, float(reward), bool(terminated or truncated), info, reset_info

    def call(self, name: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        """A method of the env (or of a wrapper's)."""
        return self.env.get_wrapper_attr(name)(*args, **kwargs)

    def get(self, name: str) -> Any:
        """An attribute of the env (or of a wrapper's)."""
        return self.env.get_wrapper_attr(name)

    def set(self, name: str, value: Any) -> None:
        """Set an attribute of the outermost wrapper."""
        setattr(self.env, name, value)

    def wrapped(self, wrapper: type[gym.Wrapper]) -> bool:
        """Whether a wrapper of that class is in the env's stack."""
        return is_wrapped(self.env, wrapper)

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def stack(observations: Sequence[Any], space: spaces.Space) -> VecEnvObs:
    """One observation per env stacked on a first axis (a dict space: per key)."""
    if isinstance(space, spaces.Dict):
        return {key: np.stack([o[key] for o in observations]) for key in space.spaces}
    return np.stack(observations)


class RayVecEnv(VecEnv):
    """``len(env_fns)`` envs, each in an actor on the Ray cluster at ``address`` (or ``auto``)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], address: str) -> None:
        connect_ray(address)
        import ray

        self._ray = ray
        actor = ray.remote(EnvActor)  # Ray's default: a CPU to be placed, none held while it runs (tasks still fit)
        self.actors: list[Any] = [actor.remote(fn) for fn in env_fns]
        observation_space, action_space = ray.get(self.actors[0].spaces.remote())
        super().__init__(len(env_fns), observation_space, action_space)
        self._stepping: list[Any] | None = None

    def reset(self) -> VecEnvObs:
        """Reset every env (with the seeds and options set since the last reset)."""
        calls = [a.reset.remote(self._seeds[i], self._options[i]) for i, a in enumerate(self.actors)]
        observations, infos = zip(*self._ray.get(calls), strict=True)
        self.reset_infos = list(infos)
        self._reset_seeds()
        self._reset_options()
        return stack(observations, self.observation_space)

    def step_async(self, actions: np.ndarray) -> None:
        """Start a step of every env."""
        self._stepping = [a.step.remote(x) for a, x in zip(self.actors, actions, strict=True)]

    def step_wait(self) -> VecEnvStepReturn:
        """The step's results, in env order."""
        assert self._stepping is not None, "step_wait before step_async"
        results, self._stepping = self._ray.get(self._stepping), None
        observations, rewards, dones, infos, resets = zip(*results, strict=True)
        self.reset_infos = list(resets)
        return (
            stack(observations, self.observation_space),
            np.array(rewards, dtype=np.float32),
            np.array(dones),
            list(infos),
        )

    def close(self) -> None:
        """Close the envs and end their actors."""
        self._ray.get([a.close.remote() for a in self.actors])
        for actor in self.actors:
            self._ray.kill(actor)
        self.actors = []

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """An attribute of each env of ``indices``."""
        return self._ray.get([self.actors[i].get.remote(attr_name) for i in self._get_indices(indices)])

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set an attribute of each env of ``indices``."""
        self._ray.get([self.actors[i].set.remote(attr_name, value) for i in self._get_indices(indices)])

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """A method's results on each env of ``indices``."""
        calls = [
            self.actors[i].call.remote(method_name, method_args, method_kwargs) for i in self._get_indices(indices)
        ]
        return self._ray.get(calls)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        """Whether each env of ``indices`` is wrapped by ``wrapper_class``."""
        return self._ray.get([self.actors[i].wrapped.remote(wrapper_class) for i in self._get_indices(indices)])
