"""The chaos soak's fault schedule: a function of the seed, every kind, within the run."""

from __future__ import annotations

import pytest

from real_runner.live.chaos import KINDS, ChaosConfig, fault_schedule, pick


def test_the_schedule_is_the_same_for_a_seed_and_differs_between_seeds() -> None:
    config = ChaosConfig(duration_s=1800)
    first = fault_schedule(config, 7)
    assert first == fault_schedule(config, 7)
    assert first != fault_schedule(config, 8)
    times = [f.t for f in first]
    assert times == sorted(times) and times[0] == config.warmup_s and times[-1] < config.duration_s
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert all(config.min_gap_s - 1e-3 <= g <= config.max_gap_s + 1e-3 for g in gaps)
    # kinds come in shuffled rounds of all four
    for i in range(0, len(first) - len(KINDS) + 1, len(KINDS)):
        assert sorted(f.kind for f in first[i : i + len(KINDS)]) == sorted(KINDS)
    for f in first:
        lo, hi = {"rank_stop": config.stop_s, "disk_full": config.full_s}.get(f.kind, (0.0, 0.0))
        assert lo <= f.hold_s <= hi and 0 <= f.pick < 1


def test_a_three_minute_schedule_holds_every_kind() -> None:
    faults = fault_schedule(ChaosConfig(duration_s=180), 0)
    assert {f.kind for f in faults} == set(KINDS)


def test_kinds_can_be_left_out_and_bad_configs_are_refused() -> None:
    kinds = ("rank_kill", "rank_stop")
    assert {f.kind for f in fault_schedule(ChaosConfig(600, kinds=kinds), 1)} == set(kinds)
    with pytest.raises(ValueError, match="kinds"):
        ChaosConfig(60, kinds=("meteor",))
    with pytest.raises(ValueError, match="gaps"):
        ChaosConfig(60, min_gap_s=10, max_gap_s=5)


def test_pick_maps_a_fraction_onto_the_candidates() -> None:
    assert pick([], 0.5) is None
    assert [pick([1, 2, 3], u) for u in (0.0, 0.34, 0.99)] == [1, 2, 3]
