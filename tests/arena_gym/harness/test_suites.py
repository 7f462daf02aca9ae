"""Suites: whole-trace parts (compare's grid) beside the window parts of the registered suites; the frozen test
suite's design and the traces held out for it and for ``shift``."""

from __future__ import annotations

import pytest

from arena_gym.harness.experiment import load_jobs
from arena_gym.harness.suites import (
    FROZEN_SUITES,
    FROZEN_TRACES,
    SHIFT_CLUSTER,
    SUITE_NAMES,
    Suite,
    TracePart,
    get_suite,
    spaced_windows,
)
from arena_gym.harness.trainers.windows import TRAIN_TRACES
from arena_gym.scenario import Scenario, build_scenario
from envs import ENV_CONFIGS, REAL_TRACES
from envs.workload import trace_label
from tests.conftest import REPO

TRACES = ("synthetic:n_jobs=12", "synthetic:n_jobs=8,arrival=bursty")


@pytest.fixture(scope="module")
def tiny() -> Scenario:
    return build_scenario("tiny")


def test_a_trace_part_holds_every_trace_at_every_seed_as_loaded(tiny) -> None:
    part = TracePart("grid", TRACES, (3, 4), {3: tiny, 4: tiny})
    workloads = part.workloads()
    assert [(w.trace, w.window) for w in workloads] == [(t, s) for t in TRACES for s in (3, 4)]
    assert [w.label for w in workloads] == [f"{t}@seed{s}" for t in TRACES for s in (3, 4)]
    assert {(w.cluster, w.split, w.load, w.factor) for w in workloads} == {("tiny", "all", 1.0, 1.0)}
    for w in workloads:
        assert w.jobs == load_jobs(w.trace, tiny.cluster, tiny.truth, w.window)
    assert workloads[0].jobs != workloads[1].jobs  # the seed draws the generator's jobs


def test_a_suite_of_several_parts_names_each_workload_by_its_part(tiny) -> None:
    suite = Suite(
        "two",
        "two grids",
        (TracePart("a", TRACES[:1], (0,), {0: tiny}), TracePart("b", TRACES[1:], (0,), {0: tiny})),
    )
    assert [w.label for w in suite.workloads()] == [f"a/{TRACES[0]}@seed0", f"b/{TRACES[1]}@seed0"]


def test_a_window_part_keeps_its_limit_evenly_spaced() -> None:
    part = get_suite("synthetic").parts[0]
    every = part.workloads()
    assert len(every) == 20
    kept = type(part)(part.name, part.config, part.split, part.seeds, part.cluster, limit=3).workloads()
    assert [w.label for w in kept] == [every[0].label, every[10].label, every[19].label]


# ---------------------------------------------------------------- frozen-test, shift and the held-out data
# These tests build the suites' workload lists (counts, labels, jobs) and never run a policy on them:
# frozen-test is read only to report a finished result (its runs go into the committed ledger).

HELD_OUT = {"cluster05", "cluster06", "cluster07", "cluster09"}
FROZEN = {"cluster07", "cluster09"}
SHIFT = {"cluster05", "cluster06"}
#: The frozen design's windows per trace (window k of the whole trace; load 0.6 / 0.9 / 1.2 by k mod 3).
FROZEN_WINDOWS = {
    "cluster07": [0, 13, 26, 39, 52, 68, 81, 94, 107, 120, 133, 146, 159, 172, 185, 201, 214, 227, 240, 253],
    "cluster09": [0, 13, 23, 36, 46, 59, 69, 82, 92, 105, 118, 128, 141, 151, 164, 174, 187, 200, 210, 220],
}


def _labels(specs) -> set[str]:
    return {trace_label(s) for s in specs}


def test_spaced_windows_keep_the_load_cycle_in_trace_order() -> None:
    assert spaced_windows(list(range(10)), 4, 3) == [0, 4, 5, 9]  # targets 0, 3, 6, 9; positions 0, 1, 2, 0 mod 3
    assert spaced_windows(list(range(10)), 4, 1) == [0, 3, 6, 9]
    assert spaced_windows(list(range(3)), 4, 3) == [0, 1, 2]
    with pytest.raises(ValueError, match="cannot keep 6 of 8 windows in order with 3 load levels cycling"):
        spaced_windows(list(range(8)), 6, 3)


def test_the_frozen_suite_is_the_stated_design(shared_data) -> None:
    suite = get_suite("frozen-test", str(shared_data))
    (part,) = suite.parts
    real = get_suite("real-test", str(shared_data)).parts[0].config
    assert part.config == real.replace(trace=FROZEN_TRACES, split="all") and part.split == "all"
    assert part.config == ENV_CONFIGS["ArenaGym/Testbed64Real-v1"].replace(
        data_dir=str(shared_data), trace=FROZEN_TRACES, split="all"
    )
    assert "frozen-test" in FROZEN_SUITES and suite.needs_data
    for stated in ("cluster07 and cluster09", "20 of its disjoint 50-job windows", "0.6 / 0.9 / 1.2", "weights"):
        assert stated in suite.description
    workloads = suite.workloads()
    assert len(workloads) == 40 and len({w.label for w in workloads}) == 40
    assert {(w.cluster, w.split, w.basis) for w in workloads} == {("testbed-64", "all", "offered")}
    by_trace: dict[str, list] = {}
    for w in workloads:
        by_trace.setdefault(trace_label(w.trace), []).append(w)
    assert {t: [w.window for w in ws] for t, ws in by_trace.items()} == FROZEN_WINDOWS
    for name, ws in by_trace.items():
        loads = [(0.6, 0.9, 1.2)[i % 3] for i in range(20)]
        assert [w.load for w in ws] == loads
        assert [w.label for w in ws] == [f"{name}:all[{k}]@rho{x:g}" for k, x in zip(FROZEN_WINDOWS[name], loads)]
        ids = [j.job_id for w in ws for j in w.jobs]
        assert len(ids) == len(set(ids)) and all(25 <= len(w.jobs) <= 50 for w in ws)


def test_no_other_suite_env_or_trainer_reads_the_held_out_traces(shared_data) -> None:
    for name in SUITE_NAMES:
        specs = [s for part in get_suite(name, str(shared_data)).parts for s in part.config.traces]
        held = _labels(specs) & HELD_OUT
        assert held == {"frozen-test": FROZEN, "shift": SHIFT}.get(name, set()), name
    for env_id, config in ENV_CONFIGS.items():
        assert not _labels(config.traces) & HELD_OUT, env_id
    assert not _labels(TRAIN_TRACES) & HELD_OUT  # the residual's training windows (and its tuning's)
    assert not _labels(REAL_TRACES) & HELD_OUT


def test_no_code_names_the_frozen_or_shift_traces_but_the_suites() -> None:
    allowed = REPO / "arena_gym" / "harness" / "suites.py"
    found = []
    for folder in ("arena_gym", "envs", "agents", "traces", "estimator", "real_runner", "scripts", "benchmarks"):
        for path in sorted((REPO / folder).rglob("*.py")):
            if path != allowed and any(t in path.read_text(encoding="utf-8") for t in HELD_OUT):
                found.append(str(path.relative_to(REPO)))
    assert not found, f"code outside the suites names a held-out ITP trace: {found}"


def test_shift_reuses_no_test_window(shared_data) -> None:
    shift = get_suite("shift", str(shared_data)).workloads()
    parts: dict[str, list] = {}
    for w in shift:
        parts.setdefault(w.label.partition("/")[0], []).append(w)
    assert {p: len(ws) for p, ws in parts.items()} == {"cluster": 20, "load": 20, "bursty": 20}
    assert {trace_label(w.trace) for w in parts["cluster"] + parts["load"]} == SHIFT
    assert {w.split for w in parts["cluster"] + parts["load"]} == {"all"} and {w.load for w in parts["load"]} == {1.6}
    assert {w.cluster for w in parts["cluster"]} == {SHIFT_CLUSTER}

    def jobs(workloads) -> set[tuple[str, str]]:
        """(trace file or generator, job id) of every job."""
        return {(w.trace.partition("?")[0], j.job_id) for w in workloads for j in w.jobs}

    tests = (
        get_suite("real-test", str(shared_data)).workloads() + get_suite("frozen-test", str(shared_data)).workloads()
    )
    assert not jobs(shift) & jobs(tests)
    assert not {(w.trace, w.window) for w in shift} & {(w.trace, w.window) for w in tests}
    assert not {w.trace for w in shift if not w.trace.startswith("synthetic")} & {w.trace for w in tests}
