"""ElasticFlow-LS: minimum satisfactory share, progressive filling by marginal gain, DP feasibility."""

from __future__ import annotations

import pytest

from agents.elasticflow import ElasticFlowLS
from arena_gym.records import EventKind
from arena_gym.sim import SimBackend
from arena_gym.types import ClusterSpec, GpuType, ModelRef, NodeGroup
from estimator.measured import ARTIFACT_GPU_MEMORY_GB, DpMemoryTable, MeasuredPerfModel, MeasuredTable
from tests.agents.baseline_cases import FREE, SMALL, check_random_traces, run_checked
from tests.helpers import GPT, MOE, job

ONE_NODE = ClusterSpec("one-node", (NodeGroup(GpuType("a40"), 1, 4),))
WRN = ModelRef("wide_resnet", "1B")
# seconds per iteration on 1, 2, 4 GPUs of one node; batch 128 -> samples/s = 128 / time
TIMES = {GPT: (2.0, 1.9, 1.8), MOE: (2.0, 1.0, 0.5), WRN: (2.0, 1.5, 1.2)}


def perf(dp_need_gb=None):
    """Measured-style model over TIMES; ``dp_need_gb``: {(model, gpus): GB} for the DP memory rule."""
    table = MeasuredTable(
        {(m.family, m.size, 128, "a40", 1, n): t for m, ts in TIMES.items() for n, t in zip((1, 2, 4), ts)}
    )
    dp = DpMemoryTable({(m.family, m.size, 128, n): gb for (m, n), gb in (dp_need_gb or {}).items()})
    return MeasuredPerfModel(table, dp, ARTIFACT_GPU_MEMORY_GB)


def first_decision(policy, jobs, model):
    backend = SimBackend(ONE_NODE, model, config=FREE)
    snapshot = backend.reset(jobs)
    policy.reset()
    return snapshot, {j: a.num_gpus for j, a in policy.decide(snapshot).allocations}


def test_extra_gpu_goes_to_the_highest_marginal_gain():
    # Minimum shares: 1 GPU each, 1 GPU left. Gain per added GPU (samples/s): GPT 64 -> 67.4 (+3.4),
    # MoE 64 -> 128 (+64), WRN 64 -> 85.3 (+21.3): MoE gets it.
    jobs = [job("A", 0, 100, "a40", 1), job("B", 0, 100, "a40", 1, model=MOE), job("C", 0, 100, "a40", 1, model=WRN)]
    _, counts = first_decision(ElasticFlowLS(), jobs, perf())
    assert counts == {"A": 1, "B": 2, "C": 1}


def test_never_chooses_a_dp_infeasible_configuration():
    # GPT needs 40 GB per GPU on 1 GPU (40 * 1.2 > 0.8 * 48: infeasible) and 4 GPUs are marked OOM:
    # only 2 GPUs are DP-feasible, although the AP table runs it on 1, 2 or 4.
    model = perf({(GPT, 1): 40.0, (GPT, 2): 20.0, (GPT, 4): float("inf")})
    _, counts = first_decision(ElasticFlowLS(), [job("A", 0, 100, "a40", 1)], model)
    assert counts == {"A": 2}
    record = run_checked(
        ElasticFlowLS(min_remaining_s=0.0),
        [job("A", 0, 100, "a40", 1), job("B", 50, 100, "a40", 1)],
        cluster=ONE_NODE,
        perf=model,
    )
    assert {e.num_gpus for e in record.events if e.kind is EventKind.ALLOCATE} == {2}


def test_running_job_shrinks_to_admit_a_new_one():
    # A alone fills the node (4 GPUs: each doubling of MoE adds 64 samples/s per GPU). B arrives:
    # A shrinks to its next smaller count (2), B gets its minimum share (1), and the last idle GPU
    # goes to B (1 -> 2 GPUs adds 21.3 samples/s; A would need 2 more GPUs to double).
    jobs = [job("A", 0, 10_000, "a40", 1, model=MOE), job("B", 100, 100, "a40", 1, model=WRN)]
    record = run_checked(ElasticFlowLS(min_remaining_s=0.0), jobs, cluster=ONE_NODE, perf=perf(), config=SMALL)
    allocs = [(e.time, e.job_id, e.num_gpus) for e in record.events if e.kind is EventKind.ALLOCATE]
    assert allocs[:3] == [(0, "A", 4), (100, "A", 2), (100, "B", 2)]


def test_minimum_share_meets_the_deadline():
    # 100 iterations of MoE: 200 s on 1 GPU, 100 s on 2, 50 s on 4.
    a = job("A", 0, 100, "a40", 1, model=MOE)
    for slack, share in ((1e9, 1), (150.0, 2), (60.0, 4), (10.0, 4)):  # none meets 10 s: the fastest count
        policy = ElasticFlowLS(deadline_slack_s=slack)
        snapshot, _ = first_decision(policy, [a], perf())
        assert policy.min_share(snapshot, snapshot.pending[0], "a40") == share


def test_keeps_requested_type_invariants_and_determinism():
    check_random_traces(lambda: ElasticFlowLS(min_remaining_s=0.0), same_type=True)


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="deadline_slack_s"):
        ElasticFlowLS(deadline_slack_s=0.0)
