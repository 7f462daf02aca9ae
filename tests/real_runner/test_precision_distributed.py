"""Every plan kind trains in bf16 (with and without recomputation) and fp16, and keeps the fp32 loss
trajectory within the precision's tolerance; checkpoints resume across precisions and plans.

One spawn of 4 persistent processes runs all cases (see ``precision_cases``), about 70 s.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from real_runner.progress import read_progress  # noqa: E402
from tests.real_runner.distributed_cases import ORACLE_STEPS, max_diff, spawn  # noqa: E402
from tests.real_runner.precision_cases import MODE_PLANS, MODES, PRECISION_CHAIN, precision_case, reference  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(600)]

#: bf16 keeps 8 mantissa bits (relative rounding 2^-9 per operation); the mean loss over 512 tokens
#: averages much of it out: observed at most 1.1e-3 from fp32 over 6 steps of gpt__tiny, allowed 5e-3.
BF16_TOL = 5e-3
#: fp16 keeps 11 mantissa bits (8x finer than bf16): observed at most 1e-4, allowed 1e-3.
FP16_TOL = 1e-3
TOLERANCE = {"fp32": 1e-5, "bf16": BF16_TOL, "fp16": FP16_TOL}
#: Recomputation repeats the same forward operations, so it leaves the losses unchanged to fp32 rounding.
REMAT_TOL = 1e-6


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("precision")
    fp32 = reference("fp32", False, sum(steps for _, _, steps in PRECISION_CHAIN))
    spawn(precision_case, 4, (4, str(work)), timeout_s=540)
    return work, fp32


def test_every_plan_kind_keeps_the_fp32_losses_within_the_precision_tolerance(run):
    work, fp32 = run
    oracle = json.loads((work / "precision_oracle.json").read_text())
    assert set(oracle) == set(MODES)
    for label, (precision, _) in MODES.items():
        assert set(oracle[label]) == set(MODE_PLANS[label]), label
        for name, losses in oracle[label].items():
            diff = max_diff(losses, fp32[:ORACLE_STEPS])
            assert 0 < diff <= TOLERANCE[precision], (label, name, diff)  # > 0: the mode really ran in half precision


def test_recomputation_leaves_the_losses_unchanged(run):
    work, _ = run
    oracle = json.loads((work / "precision_oracle.json").read_text())
    for name, losses in oracle["bf16"].items():
        assert max_diff(oracle["bf16 remat"][name], losses) <= REMAT_TOL, name


def test_single_process_half_precision_with_and_without_remat():
    fp32 = reference("fp32", False, 4)
    for precision in ("bf16", "fp16"):
        plain, remat = reference(precision, False, 4), reference(precision, True, 4)
        assert max_diff(plain, remat) <= REMAT_TOL, precision
        assert 0 < max_diff(plain, fp32) <= TOLERANCE[precision], precision


def test_checkpoints_resume_across_precisions_and_plans(run):
    work, fp32 = run
    losses, done = {}, 0
    for j, (precision, plan, steps) in enumerate(PRECISION_CHAIN):
        records = read_progress(work / f"precision_chain{j}.jsonl")
        start, last = records[0], records[-1]
        assert start.event == "start" and start.step == done, j
        assert start.info["resumed_from"] == (done if j else None)
        assert (start.info["precision"], start.info["remat"]) == (precision, bool(j % 2))
        assert start.info["world_size"] == plan.num_gpus
        done += steps
        assert (last.event, last.step, last.ckpt_step) == ("done", done, done), j
        losses.update({r.step: r.loss for r in records if r.event == "step"})
    assert sorted(losses) == list(range(1, done + 1))
    assert max_diff([losses[s] for s in sorted(losses)], fp32) <= BF16_TOL
