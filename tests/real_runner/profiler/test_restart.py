"""The restart probe on CPU: the runner's worker started fresh and resumed, for gpt__tiny and gpt__mini."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("torch")

from real_runner.profiler.restart import Launch, profile_restarts  # noqa: E402
from tests.conftest import REPO  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(300)]


def test_the_probe_measures_positive_costs_that_grow_with_the_model(tmp_path):
    costs = profile_restarts(
        ["gpt__tiny", "gpt__mini"],
        tmp_path,
        Launch(os.environ, sorted(os.sched_getaffinity(0))[0], cwd=REPO),
        steps=2,
        batch=2,
        device="cpu",
        timeout_s=240,
    )
    tiny, mini = costs["gpt__tiny"], costs["gpt__mini"]
    for cost in (tiny, mini):
        assert 0 < cost.held_s <= cost.start_s and cost.save_s > 0 and cost.load_s > 0
    # gpt__mini has 17x the parameters of gpt__tiny: its checkpoint takes longer to write and to read
    assert mini.save_s > tiny.save_s and mini.load_s > tiny.load_s
    assert (tmp_path / "gpt__mini" / "ckpt").is_dir()  # the runner's own checkpoint files, resumed from
