"""What the env refuses: non-integer actions, stepping before reset, unknown reset options, badly typed config."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import envs
from envs.config import EnvConfig
from tests.helpers import job


@pytest.fixture
def env(perf):
    return gym.make("ArenaGym/Tiny-v1", perf=perf)


@pytest.mark.parametrize("action", [3.7, "3", np.float32(2.9), np.float64(3.0), True, None, [3]])
def test_non_integer_actions_are_refused(env, action):
    env.reset(seed=0)
    substeps = env.unwrapped.builder.substeps
    with pytest.raises(TypeError, match="action must be an integer"):
        env.step(action)
    assert env.unwrapped.builder.substeps == substeps  # nothing happened


@pytest.mark.parametrize("action", [np.int64(0), np.int32(0), np.array(0), 0])
def test_integer_actions_of_any_integer_type_are_accepted(env, action):
    env.reset(seed=0)
    _, _, _, _, info = env.step(action)
    assert "invalid" in info


def test_step_before_reset_raises(perf):
    raw = envs.ArenaSchedEnv(EnvConfig(perf=perf))
    with pytest.raises(gym.error.ResetNeeded):
        raw.step(0)
    with pytest.raises(gym.error.ResetNeeded):
        gym.make("ArenaGym/Tiny-v1", perf=perf).step(0)


def test_unknown_reset_options_are_refused_with_the_valid_list(env):
    with pytest.raises(ValueError, match=r"unknown option\(s\) foo; valid: jobs, workload, cluster"):
        env.reset(options={"foo": 1})


@pytest.mark.parametrize(
    "jobs, error, message",
    [
        ([1, 2, 3], TypeError, r"options\['jobs'\]\[0\] must be a JobSpec, got 1"),
        ("abc", TypeError, "must be a sequence of JobSpec"),
        (5, TypeError, "must be a sequence of JobSpec"),
        ([], ValueError, "is empty"),
    ],
)
def test_bad_jobs_option_is_a_clear_error(env, jobs, error, message):
    with pytest.raises(error, match=message):
        env.reset(options={"jobs": jobs})


def test_cluster_option_names_one_of_the_envs_clusters(env):
    with pytest.raises(ValueError, match="must name one of tiny"):
        env.reset(options={"jobs": [job("a", 0, 10, "a40", 1)], "cluster": "mars"})
    env.reset(options={"jobs": [job("a", 0, 10, "a40", 1)], "cluster": "tiny"})


@pytest.mark.parametrize(
    "field, value, error",
    [
        ("fold_stages", "no", TypeError),
        ("oracle_remaining", 1, TypeError),
        ("max_pending", "8", TypeError),
        ("max_pending", 8.0, TypeError),
        ("max_running", True, TypeError),
        ("reward_scale", "1e-3", TypeError),
        ("reward_scale", math.nan, ValueError),
        ("reward_scale", -1.0, ValueError),
        ("load_levels", (1.0, "2"), TypeError),
        ("load_levels", (), ValueError),
        ("window_jobs", 2.5, TypeError),
        ("split", "holdout", ValueError),
        ("split_fractions", (0.5, 0.5, 0.5), ValueError),
        ("load_basis", "jobs", ValueError),
        ("pending_order", "random", ValueError),
        ("round_s", 0.01, ValueError),
        ("trace", 3, TypeError),
        ("cluster", 64, TypeError),
        ("seed", "0", TypeError),
    ],
)
def test_badly_typed_or_valued_config_names_the_field(perf, field, value, error):
    with pytest.raises(error, match=field):
        gym.make("ArenaGym/Tiny-v1", perf=perf, **{field: value})


def test_config_that_is_not_an_envconfig_is_refused():
    with pytest.raises(TypeError, match="config must be an EnvConfig"):
        envs.ArenaSchedEnv({"cluster": "tiny"})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"max_pending": 10**9}, r"^EnvConfig: max_pending must be in \[1, 1024\], got 1000000000$"),
        ({"max_pending": 0}, r"^EnvConfig: max_pending must be in \[1, 1024\], got 0$"),
        ({"max_running": 10**9}, r"^EnvConfig: max_running must be in \[0, 1024\], got 1000000000$"),
        ({"max_running": -1}, r"^EnvConfig: max_running must be in \[0, 1024\], got -1$"),
        ({"seed": -1}, r"^EnvConfig: seed must be >= 0, got -1$"),
    ],
)
def test_out_of_range_slots_and_seed_are_one_line_value_errors(overrides, message):
    with pytest.raises(ValueError, match=message) as caught:
        EnvConfig(**overrides)
    assert "\n" not in str(caught.value)


def test_slot_bound_is_inclusive(perf):
    config = EnvConfig(perf=perf, max_pending=envs.config.MAX_SLOTS, max_running=0)
    env = envs.ArenaSchedEnv(config)
    assert env.action_space.n > envs.config.MAX_SLOTS
