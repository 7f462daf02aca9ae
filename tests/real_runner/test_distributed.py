"""Every plan reproduces the single-process run; checkpoints reshard across a chain of plans.

One spawn of 4 persistent processes runs all cases (see ``distributed_cases``), about 40 s.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from real_runner.checkpoint_files import read_pointer  # noqa: E402
from real_runner.progress import read_progress  # noqa: E402
from tests.real_runner.distributed_cases import (  # noqa: E402
    CHAIN,
    CHAIN_STEPS,
    CONTROL_STEPS,
    ORACLE,
    ORACLE_STEPS,
    chain_case,
    max_diff,
    reference_losses,
    spawn,
)

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(600)]
TOL = 1e-5


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("distributed")
    reference = reference_losses(CHAIN_STEPS + CONTROL_STEPS)
    spawn(chain_case, 4, (4, str(work)), timeout_s=480)
    return work, reference


def test_every_plan_reproduces_the_single_process_losses(run):
    work, reference = run
    oracle = json.loads((work / "oracle.json").read_text())
    assert set(oracle) == set(ORACLE)
    assert reference[ORACLE_STEPS - 1] < reference[0] - 0.3  # the run learns, so the comparison means something
    for name, losses in oracle.items():
        assert max_diff(losses, reference[:ORACLE_STEPS]) <= TOL, name


def test_a_chain_of_plans_continues_the_uninterrupted_trajectory(run):
    work, reference = run
    losses, done = {}, 0
    for j, seg in enumerate(CHAIN):
        records = read_progress(work / f"chain{j}.jsonl")
        start, last = records[0], records[-1]
        assert start.event == "start" and start.step == done, seg.name
        assert start.info["resumed_from"] == (done if j else None)
        assert start.info["world_size"] == seg.plan.num_gpus
        done += seg.steps
        assert (last.event, last.step, last.ckpt_step) == ("done", done, done), seg.name
        losses.update({r.step: r.loss for r in records if r.event == "step"})
    assert sorted(losses) == list(range(1, CHAIN_STEPS + 1))
    assert max_diff([losses[s] for s in sorted(losses)], reference[:CHAIN_STEPS]) <= TOL
    ckpts = sorted(p.name for p in (work / "ckpt").iterdir())
    assert ckpts == ["latest", f"step_{CHAIN_STEPS - CHAIN[-1].steps:08d}", f"step_{CHAIN_STEPS:08d}"]
    assert read_pointer(work / "ckpt") == f"step_{CHAIN_STEPS:08d}"


def test_without_the_optimizer_state_the_trajectory_diverges(run):
    work, reference = run
    control = json.loads((work / "control.json").read_text())
    expected = reference[CHAIN_STEPS : CHAIN_STEPS + CONTROL_STEPS]
    assert max_diff(control["restored"], expected) <= TOL
    assert max_diff(control["fresh optimizer"], expected) > 100 * TOL
