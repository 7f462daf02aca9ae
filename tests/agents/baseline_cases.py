"""Shared builders for the baseline-policy tests: random workloads and invariant-checked episodes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from arena_gym.cluster import PRESETS
from arena_gym.metrics import compute_metrics
from arena_gym.protocols import PerfModel, Policy
from arena_gym.records import EpisodeRecord, EventKind
from arena_gym.sim import SimConfig
from arena_gym.types import ClusterSpec, JobSpec, OverheadModel
from tests.helpers import GPT, MOE, checked_run, job, uniform_model

TINY = PRESETS["tiny"]  # a40: 2 nodes x 2 GPUs, a10: 2 nodes x 2 GPUs
#: Small baseline overheads keep hand-worked times readable: 5 s per GPU, at most 100 s.
SMALL = SimConfig(overhead=OverheadModel(full_per_gpu_s=5.0, full_cap_s=100.0), overhead_class="full")
#: No reconfiguration overhead at all.
FREE = SimConfig(overhead=OverheadModel(full_per_gpu_s=0.0, full_cap_s=0.0), overhead_class="full")


def random_workload(
    seed: int, n: int = 30, types: tuple[str, ...] = ("a40", "a10"), counts: tuple[int, ...] = (1, 2, 4)
) -> list[JobSpec]:
    """``n`` jobs with random arrivals, lengths, requested types and counts (GPT or MoE)."""
    rng = np.random.default_rng(seed)
    return [
        job(
            f"j{i}",
            float(t),
            int(rng.integers(10, 400)),
            str(rng.choice(types)),
            int(rng.choice(counts)),
            model=GPT if rng.random() < 0.5 else MOE,
        )
        for i, t in enumerate(np.sort(rng.integers(0, 3000, n)))
    ]


def run_checked(
    policy: Policy,
    jobs: list[JobSpec],
    cluster: ClusterSpec = TINY,
    perf: PerfModel | None = None,
    config: SimConfig = SMALL,
) -> EpisodeRecord:
    """Run an episode, checking the simulator's invariants after every apply and every advance."""
    return checked_run(policy, jobs, cluster, perf if perf is not None else uniform_model(), config)


def check_random_traces(
    make_policy: Callable[[], Policy],
    seeds: int = 4,
    same_type: bool = False,
    perf: PerfModel | None = None,
    config: SimConfig = SMALL,
) -> list[EpisodeRecord]:
    """Run each random workload twice: invariants hold, the event logs match, every job finishes.

    ``same_type``: also assert that every allocation is on the job's requested GPU type.
    """
    records = []
    for seed in range(seeds):
        jobs = random_workload(seed)
        a = run_checked(make_policy(), jobs, perf=perf, config=config)
        b = run_checked(make_policy(), jobs, perf=perf, config=config)
        assert a.events == b.events, f"seed {seed}: two runs of the same trace differ"
        assert finished(a) == len(jobs)
        if same_type:
            requested = {j.job_id: j.requested_gpu_type for j in jobs}
            assert all(e.gpu_type == requested[e.job_id] for e in a.events if e.kind is EventKind.ALLOCATE)
        records.append(a)
    return records


def finished(record: EpisodeRecord) -> int:
    """Jobs finished in an episode."""
    return int(compute_metrics(record)["jobs_finished"])
