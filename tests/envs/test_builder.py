"""DecisionBuilder masks: exact against a brute-force reference, never rejected, invalid = no-op."""

from __future__ import annotations

import logging
import math

import gymnasium as gym
import numpy as np
import pytest

import envs  # noqa: F401  (registers the ids)
from arena_gym.placement import place_shape
from arena_gym.types import Grid
from envs.builder import DecisionBuilder
from envs.codec import PREEMPT

TRACE = "synthetic:n_jobs=30,arrival=poisson,rate_per_h=40,max_gpus=8,iter_log_mean=7"


def reference_mask(builder: DecisionBuilder) -> np.ndarray:
    """The mask rebuilt slot by slot with place_shape and direct PerfModel queries."""
    codec, perf = builder.codec, builder.snapshot.perf
    mask = np.zeros(codec.n_actions, dtype=bool)
    mask[-1] = True
    for s, view in enumerate(builder.slots):
        if view is None or builder.touched[s]:
            continue
        own = view.allocation
        if own is not None:
            mask[codec.encode(s, PREEMPT)] = True
        for cell, shapes in zip(codec.cells, codec.shapes):
            if own is not None and codec.cell_of(own) == cell:
                continue
            free = builder.free_of(cell[0]).copy()
            if own is not None and own.placement.gpu_type == cell[0]:
                for node in own.placement.nodes:
                    free[node] += own.placement.gpus_per_node
            for shape in shapes:
                if cell[2] is None:
                    t = perf.iter_time(view.spec.model, view.spec.global_batch, shape)
                else:
                    t = perf.grid_iter_time(view.spec.model, view.spec.global_batch, Grid(shape, cell[2]))
                if math.isfinite(t) and place_shape(free, shape) is not None:
                    mask[codec.encode(s, cell)] = True
                    break
    return mask


@pytest.mark.parametrize(
    ("env_id", "fold"), [("ArenaGym/Tiny-v1", True), ("ArenaGym/Testbed64-v1", True), ("ArenaGym/Testbed64-v1", False)]
)
def test_mask_is_exact_and_never_rejected(perf, env_id, fold, caplog):
    env = gym.make(env_id, perf=perf, trace=TRACE, fold_stages=fold, max_running=24)
    base = env.unwrapped
    rng = np.random.default_rng(7)
    _, info = env.reset(seed=11)
    checked = 0
    with caplog.at_level(logging.WARNING, logger="envs.arena_env"):
        for _ in range(400):
            builder = base.builder
            assert np.array_equal(builder.mask(), reference_mask(builder))
            checked += 1
            action = int(rng.choice(np.flatnonzero(info["action_mask"])))
            if action != base.codec.done_action:
                assert builder.preview(action) is not None
            _, _, terminated, truncated, info = env.step(action)
            assert not info["invalid"]
            base.backend.check_invariants()
            if terminated or truncated:
                _, info = env.reset()
    assert checked == 400
    assert not [r for r in caplog.records if "rejected" in r.getMessage()]


def test_invalid_action_is_a_penalised_no_op(perf):
    env = gym.make("ArenaGym/Tiny-v1", perf=perf, invalid_action_penalty=0.25)
    base = env.unwrapped
    env.reset(seed=0)
    masked = np.flatnonzero(~env.unwrapped.action_masks())
    assert len(masked)
    builder, substeps = base.builder, base.builder.substeps
    before = builder.decision()
    obs, reward, terminated, truncated, info = env.step(int(masked[0]))
    assert info["invalid"] and reward == -0.25 and not (terminated or truncated)
    assert base.builder is builder and builder.decision() == before
    assert builder.substeps == substeps + 1
    assert obs["jobs"][:, 3].sum() == 0  # nothing touched
    for action in (-1, base.codec.n_actions + 5):  # outside the action space: refused, nothing changes
        with pytest.raises(ValueError, match="out of range"):
            env.step(action)
        assert builder.substeps == substeps + 1


def test_each_job_is_touched_once_and_decision_is_valid(perf):
    env = gym.make("ArenaGym/Testbed64-v1", perf=perf, trace=TRACE)
    base = env.unwrapped
    _, info = env.reset(seed=2)
    builder = base.builder
    rng = np.random.default_rng(0)
    applied = 0
    while builder.has_choice() and applied < 10:
        action = int(rng.choice(np.flatnonzero(builder.mask()[:-1])))
        slot = action // base.codec.width
        assert builder.apply(action)
        applied += 1
        assert (
            builder.touched[slot] and not builder.mask()[slot * base.codec.width : (slot + 1) * base.codec.width].any()
        )
    decision = builder.decision()
    jobs = [j for j, _ in decision.allocations] + list(decision.preemptions)
    assert len(jobs) == len(set(jobs)) == applied
    base.backend.apply(decision)  # raises InvalidDecision if the builder let anything invalid through
    base.backend.check_invariants()


def _stall_env(perf, **overrides):
    return gym.make("ArenaGym/Tiny-v1", perf=perf, **overrides).unwrapped


def test_done_masked_while_it_would_idle_the_cluster_for_good(perf):
    from tests.helpers import job

    env = _stall_env(perf)
    _, info = env.reset(options={"jobs": [job("a", 0, 100, "a40", 1), job("b", 0, 100, "a40", 1)]})
    assert not info["action_mask"][-1] and info["action_mask"][:-1].any()
    _, _, _, _, info = env.step(env.codec.encode(0, ("a40", 1, None)))
    assert info["action_mask"][-1]


def test_preempting_the_last_running_job_is_masked_when_nothing_could_replace_it(perf):
    from tests.helpers import job

    env = _stall_env(perf)
    codec = env.codec
    _, info = env.reset(options={"jobs": [job("long", 0, 100_000, "a40", 1), job("short", 10, 10, "a10", 1)]})
    _, _, _, _, info = env.step(codec.encode(0, ("a40", 1, None)))  # start "long"; no choice left -> t=10
    assert env.snapshot.now == 10 and info["action_mask"][codec.encode(codec.config.max_pending, PREEMPT)]
    env.step(codec.encode(0, ("a10", 1, None)))
    _, _, _, _, info = env.step(codec.done_action)  # -> "short" finishes; nothing left to arrive
    assert [v.job_id for v in env.snapshot.running] == ["long"] and not env.snapshot.pending
    running_slot = codec.config.max_pending
    assert not info["action_mask"][codec.encode(running_slot, PREEMPT)]
    assert info["action_mask"][codec.encode(running_slot, ("a40", 2, None))]  # resizing stays allowed


def test_forced_commit_in_a_stall_starts_the_lowest_valid_choice(perf):
    from tests.helpers import job

    env = _stall_env(perf, max_substeps=1)
    env.reset(options={"jobs": [job("a", 0, 100, "a40", 1), job("b", 0, 100, "a40", 1)]})
    env.step(env.codec.done_action)  # masked: counts as the only sub-step, forcing the commit
    starts = [e.job_id for e in env.backend.events if e.kind.value == "allocate"]
    assert starts == ["a"]
