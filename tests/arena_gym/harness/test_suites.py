"""Suites: whole-trace parts (compare's grid) beside the window parts of the registered suites."""

from __future__ import annotations

import pytest

from arena_gym.cluster import load_cluster
from arena_gym.harness.experiment import load_jobs
from arena_gym.harness.suites import Suite, TracePart, get_suite
from arena_gym.registry import make_perf

TRACES = ("synthetic:n_jobs=12", "synthetic:n_jobs=8,arrival=bursty")


@pytest.fixture(scope="module")
def tiny():
    cluster = load_cluster("tiny")
    return cluster, make_perf("estimator", cluster)


def test_a_trace_part_holds_every_trace_at_every_seed_as_loaded(tiny) -> None:
    cluster, truth = tiny
    part = TracePart("grid", TRACES, (3, 4), cluster, truth)
    workloads = part.workloads()
    assert [(w.trace, w.window) for w in workloads] == [(t, s) for t in TRACES for s in (3, 4)]
    assert [w.label for w in workloads] == [f"{t}@seed{s}" for t in TRACES for s in (3, 4)]
    assert {(w.cluster, w.split, w.load, w.factor) for w in workloads} == {("tiny", "all", 1.0, 1.0)}
    for w in workloads:
        assert w.jobs == load_jobs(w.trace, cluster, truth, w.window)
    assert workloads[0].jobs != workloads[1].jobs  # the seed draws the generator's jobs


def test_a_suite_of_several_parts_names_each_workload_by_its_part(tiny) -> None:
    cluster, truth = tiny
    suite = Suite(
        "two",
        "two grids",
        (TracePart("a", TRACES[:1], (0,), cluster, truth), TracePart("b", TRACES[1:], (0,), cluster, truth)),
    )
    assert [w.label for w in suite.workloads()] == [f"a/{TRACES[0]}@seed0", f"b/{TRACES[1]}@seed0"]


def test_a_window_part_keeps_its_limit_evenly_spaced() -> None:
    part = get_suite("synthetic").parts[0]
    every = part.workloads()
    assert len(every) == 20
    kept = type(part)(part.name, part.config, part.split, part.seeds, part.cluster, limit=3).workloads()
    assert [w.label for w in kept] == [every[0].label, every[10].label, every[19].label]
