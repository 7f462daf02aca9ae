"""Reward options integrate their rate exactly over hand-made event logs."""

from __future__ import annotations

import pytest

from arena_gym.records import Event, EventKind
from arena_gym.types import JobId
from envs.rewards import JctReward, SlowdownReward, ThroughputReward, reward_registry
from tests.helpers import job

A, B = JobId("a"), JobId("b")
FIRST = [
    Event(0.0, EventKind.SUBMIT, A),
    Event(10.0, EventKind.SUBMIT, B),
    Event(10.0, EventKind.ALLOCATE, A),
    Event(20.0, EventKind.RUN, A, samples_per_s=100.0),
]
SECOND = [
    Event(50.0, EventKind.FINISH, A),
    Event(55.0, EventKind.ALLOCATE, B),
    Event(60.0, EventKind.RUN, B, samples_per_s=40.0),
]
JOBS = [job("a", 0, 100, "a40", 1), job("b", 10, 200, "a40", 1)]


def best_time(spec):
    return {"a": 0.5, "b": 0.25}[spec.job_id]


def test_jct_counts_jobs_in_system():
    r = JctReward()
    r.reset(JOBS, 0.0, best_time)
    assert r.accrue(FIRST, 30.0) == -(1 * 10 + 2 * 20)
    assert r.accrue(SECOND, 70.0) == -(2 * 20 + 1 * 20)


def test_slowdown_weights_each_job_by_its_ideal_time():
    r = SlowdownReward()
    r.reset(JOBS, 0.0, best_time)
    wa, wb = 1 / (100 * 0.5), 1 / (200 * 0.25)
    assert r.accrue(FIRST + SECOND, 70.0) == pytest.approx(-(wa * 50 + wb * 60))


def test_throughput_integrates_running_samples():
    r = ThroughputReward()
    r.reset(JOBS, 0.0, best_time)
    assert r.accrue(FIRST, 30.0) == 100.0 * 10
    assert r.accrue(SECOND, 70.0) == 100.0 * 20 + 40.0 * 10


def test_registry_names():
    assert reward_registry().names() == ["jct", "slowdown", "throughput"]
    assert isinstance(reward_registry().make("jct"), JctReward)
