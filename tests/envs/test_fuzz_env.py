"""Fuzz the gym env: generated action sequences (integers in and out of range, floats, strings,
numpy scalars, containers) and generated ``gym.make`` keyword arguments. An integer action in
range gives a well-formed transition; anything else is a TypeError/ValueError whose one-line
message names the action or the config field; nothing hangs."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import envs  # noqa: F401  (registers the ids)
from tests.envs.conftest import env_perf_model
from tests.fuzzing import assert_one_line, case_timeout, fuzz

TIMEOUT_S = 20.0


@pytest.fixture(scope="module")
def table_perf():
    return env_perf_model()


@pytest.fixture(scope="module")
def tiny_env(table_perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=table_perf)
    yield env
    env.close()


ACTION = st.one_of(
    st.integers(0, 112),
    st.integers(0, 112),
    st.integers(0, 112),
    st.integers(-(2**70), 2**70),
    st.integers(0, 112).map(np.int64),
    st.integers(0, 112).map(np.int32),
    st.integers(0, 112).map(np.array),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([True, False, None, "3", b"3", [3], (3,), {"a": 3}]),
    st.integers(0, 112).map(np.float32),
    st.integers(0, 112).map(lambda i: np.array([i])),
)


def _is_int(action: object) -> bool:
    if isinstance(action, (bool, np.bool_)):
        return False
    if isinstance(action, np.ndarray):
        return action.shape == () and np.issubdtype(action.dtype, np.integer)
    return isinstance(action, (int, np.integer))


@fuzz(600)
@given(actions=st.lists(ACTION, min_size=1, max_size=20), seed=st.integers(0, 2**16))
def test_generated_action_sequences(tiny_env, actions, seed):
    env = tiny_env
    n = env.action_space.n
    with case_timeout(TIMEOUT_S):
        env.reset(seed=seed)
        for action in actions:
            if not (_is_int(action) and 0 <= int(action) < n):
                event("refused action")
                with pytest.raises((TypeError, ValueError)) as info:
                    env.step(action)
                assert_one_line(info.value, "action")
                continue
            event("in-range action")
            obs, reward, terminated, truncated, info = env.step(action)
            assert env.observation_space.contains(obs)
            assert math.isfinite(reward) and isinstance(terminated, bool) and isinstance(truncated, bool)
            assert info["action_mask"].shape == (n,) and info["action_mask"].dtype == bool
            if terminated or truncated:
                env.reset(seed=seed)


#: gym.make keyword -> values that must be refused (type or range), and values that are fine.
BAD_CONFIG = {
    "max_pending": ["8", 0, -1, 2.5, None, True],
    "max_running": ["8", -1, 2.5, None],
    "fold_stages": ["no", 1, None, "true"],
    "reward_scale": [math.nan, math.inf, 0.0, -1.0, "1"],
    "horizon_s": [-1.0, 0.0, math.nan, "x"],
    "cluster": ["mars", "", 3],
    "trace": ["synthetic:n_jobs=0", "synthetic:bogus=1", "", 5],
    "pending_order": ["random", 3],
    "reward": ["nope", None],
    "max_substeps": [0, -3, "5", 1.5],
    "invalid_action_penalty": [math.nan, "0.1", math.inf],
    "foo": [1],
}
GOOD_CONFIG = {
    "max_pending": [1, 4, 16],
    "max_running": [0, 4],
    "fold_stages": [True, False],
    "reward_scale": [0.5, 2.0],
    "horizon_s": [3600.0, math.inf],
    "max_substeps": [4, 64],
}


@st.composite
def make_kwargs(draw) -> tuple[dict, str | None]:
    keys = draw(st.lists(st.sampled_from(sorted(GOOD_CONFIG)), max_size=3, unique=True))
    good = {k: draw(st.sampled_from(GOOD_CONFIG[k])) for k in keys}
    if draw(st.booleans()):
        return good, None
    key = draw(st.sampled_from(sorted(BAD_CONFIG)))
    return {**good, key: draw(st.sampled_from(BAD_CONFIG[key]))}, key


@fuzz(400)
@given(case=make_kwargs())
def test_generated_make_kwargs(table_perf, case):
    kwargs, bad_key = case
    event("refused config" if bad_key else "valid config")
    with case_timeout(TIMEOUT_S):
        try:
            env = gym.make("ArenaGym/Tiny-v1", perf=table_perf, **kwargs)
            env.reset(seed=0)
        except (TypeError, ValueError) as exc:
            assert bad_key is not None, f"valid config refused: {kwargs}: {exc}"
            message = assert_one_line(exc)
            assert bad_key in message or "trace spec" in message or "cluster" in message, (bad_key, message)
            return
    assert bad_key is None, f"{bad_key}={kwargs[bad_key]!r} accepted"
    for key, value in kwargs.items():
        assert getattr(env.unwrapped.config, key) == value
    env.close()
