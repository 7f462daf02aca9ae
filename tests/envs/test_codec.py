"""ActionCodec: layout, round trips, folded and unfolded grids."""

from __future__ import annotations

import pytest

from arena_gym.cluster import PRESETS
from envs.codec import PREEMPT, ActionCodec, grid_cells
from envs.config import EnvConfig


def test_layout_and_round_trip():
    config = EnvConfig(max_pending=3, max_running=2)
    codec = ActionCodec(PRESETS["tiny"], config)
    # tiny: a40 and a10 with 4 GPUs each -> counts 1, 2, 4 per type
    assert codec.cells == (
        ("a40", 1, None),
        ("a40", 2, None),
        ("a40", 4, None),
        ("a10", 1, None),
        ("a10", 2, None),
        ("a10", 4, None),
    )
    assert codec.width == 7 and codec.n_slots == 5
    assert codec.n_actions == 5 * 7 + 1 and codec.done_action == 35
    assert codec.decode(codec.done_action) is None
    seen = set()
    for slot in range(codec.n_slots):
        for cell in codec.cells + (PREEMPT,):
            a = codec.encode(slot, cell)
            assert codec.decode(a) == (slot, cell)
            seen.add(a)
    assert seen == set(range(codec.n_actions - 1))
    assert codec.is_pending_slot(2) and not codec.is_pending_slot(3)


def test_unfolded_cells_never_have_more_stages_than_gpus():
    cells = grid_cells(PRESETS["testbed-64"], fold_stages=False)
    assert all(stages is not None and stages <= n for _, n, stages in cells)
    assert ("a40", 16, 16) in cells and ("a10", 1, 1) in cells
    assert len(cells) == 2 * (1 + 2 + 3 + 4 + 5)  # counts 1..16 with log2(n)+1 stage choices


def test_counts_limited_to_the_type_size():
    cells = grid_cells(PRESETS["arena-1280"], fold_stages=True)
    assert len(cells) == 4 * 5
    assert max(n for t, n, _ in grid_cells(PRESETS["tiny"], True)) == 4


def test_bad_actions_and_cells_raise_clear_errors():
    codec = ActionCodec(PRESETS["tiny"], EnvConfig())
    with pytest.raises(ValueError, match="out of range"):
        codec.decode(codec.n_actions)
    with pytest.raises(ValueError, match="not in the grid"):
        codec.encode(0, ("h100", 1, None))
    with pytest.raises(ValueError, match="slot"):
        codec.encode(codec.n_slots, PREEMPT)
