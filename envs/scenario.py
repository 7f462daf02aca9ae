"""The scenario of an env config (:class:`arena_gym.scenario.Scenario`)."""

from __future__ import annotations

from arena_gym.scenario import Scenario, build_scenario
from arena_gym.types import ClusterSpec
from envs.config import EnvConfig


def env_scenario(config: EnvConfig, cluster: str | ClusterSpec | None = None) -> Scenario:
    """The scenario of ``config`` on ``cluster`` (default: the config's), charging the agent's overhead class."""
    return build_scenario(
        config.cluster if cluster is None else cluster, config.perf, config.belief, config.seed, config.sim_config()
    )
