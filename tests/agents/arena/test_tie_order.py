"""Arena's tie rule (the lowest job id among equally ranked victims and moves) and the skip of known failed fits.

Where no two victims or moves rank equally, the tie rule decides nothing: on workloads whose jobs
all differ in (model, global batch), the event logs are those the code before the tie rule wrote.
"""

from __future__ import annotations

import dataclasses

import pytest

from agents.arena import failures
from agents.arena.config import ArenaConfig
from agents.arena.index import ShrinkIndex, halved
from agents.arena.oracle import ThroughputOracle
from agents.arena.search import ArenaSearch
from agents.common import Workspace
from arena_gym.harness.cli.common import DEFAULT_TRACE
from arena_gym.harness.experiment import RunConfig, run
from arena_gym.records import EpisodeRecord
from arena_gym.types import JobId, Placement
from tests.agents.arena.test_event_log_identity import OVERLOADED, _jobs, _truth, event_log_digest
from tests.agents.arena.test_index import running_snapshot

#: case -> (trace, cluster, SHA-256 of Arena's event log written by the code before the tie rule).
TIE_FREE = {
    "make-run": (DEFAULT_TRACE, "testbed-64", "c9f9f6ab69a05b0b1e6f7e700e70c2deb104ea7720d337258f8c683039c0ccf2"),
    "overloaded": (OVERLOADED, "arena-1280", "045a107df5262f2d28f182fa0c97cf00e0193cb1bfef6def8b9bc02aed0f3919"),
}


def arena_run(trace: str, cluster: str, distinct_batches: bool) -> EpisodeRecord:
    """Arena on the workload as ``arena-gym compare`` runs it; with ``distinct_batches`` job i's batch grows by i."""
    jobs = _jobs(trace, cluster)
    if distinct_batches:
        jobs = tuple(dataclasses.replace(j, global_batch=j.global_batch + i) for i, j in enumerate(jobs))
    return run(RunConfig(policy="arena", trace=trace, cluster=cluster), jobs=jobs, truth=_truth(cluster)).record


@pytest.mark.parametrize("case", sorted(TIE_FREE))
def test_workloads_without_ties_keep_the_event_logs_of_the_code_before_the_tie_rule(case):
    trace, cluster, digest = TIE_FREE[case]
    assert event_log_digest([arena_run(trace, cluster, distinct_batches=True)]) == digest


def test_skipping_known_failed_fits_leaves_the_event_log_as_searching_them_does(monkeypatch):
    known = failures.FailedFits.known
    hits = []

    def counted(self: failures.FailedFits, *args: object) -> bool:
        found = known(self, *args)  # type: ignore[arg-type]
        hits.append(found)
        return found

    monkeypatch.setattr(failures.FailedFits, "known", counted)
    skipping = event_log_digest([arena_run(OVERLOADED, "arena-1280", distinct_batches=False)])
    assert any(hits)  # some fits were skipped
    monkeypatch.setattr(failures.FailedFits, "known", lambda self, *args: False)
    assert event_log_digest([arena_run(OVERLOADED, "arena-1280", distinct_batches=False)]) == skipping


def test_equal_halvings_go_to_the_lowest_job_id_whatever_order_the_jobs_took_their_placements():
    snapshot = running_snapshot()
    ws = Workspace(snapshot, index=True)
    index = ShrinkIndex(ws, lambda job, placement: -1.0)  # every halving ranks the same
    gpu_type = "a40"
    eligible = sorted(j for j, p in ws.placement.items() if p.gpu_type == gpu_type and p.num_gpus >= 2)
    assert len(eligible) >= 2
    assert index.best(gpu_type, 0) == (-1.0, eligible[0])
    for job in reversed(eligible):  # each edit and its rollback sends the job to the back of every order
        mark = ws.checkpoint()
        ws.set(job, halved(ws.placement[job]))
        ws.rollback(mark)
        assert index.best(gpu_type, 0) == (-1.0, eligible[0])
    held = ws.placement[eligible[0]]
    ws.set(eligible[0], None)
    assert index.best(gpu_type, 0) == (-1.0, eligible[1])
    ws.set(eligible[0], held)
    assert index.best(gpu_type, 0) == (-1.0, eligible[0])


def test_equally_bounded_moves_are_tried_lowest_job_id_first():
    snapshot = running_snapshot()
    config = ArenaConfig()
    oracle = ThroughputOracle(config)
    oracle.bind(snapshot)
    ws = Workspace(snapshot, index=True)
    search = ArenaSearch(config, ws, oracle, ws.views)
    tried: list[JobId] = []
    place = search.place

    def traced(job, gpu_type, num_gpus):  # type: ignore[no-untyped-def]
        tried.append(job.job_id)
        return place(job, gpu_type, num_gpus)

    search.place = traced  # type: ignore[method-assign]
    # movers with one placement shape and one model: every move they can make is bounded alike
    by_shape: dict[tuple[Placement, object, int], list[JobId]] = {}
    for j, p in ws.placement.items():
        spec = ws.views[j].spec
        by_shape.setdefault((p.shape, spec.model, spec.global_batch), []).append(j)
    alike = max(by_shape.values(), key=len)
    assert len(alike) >= 2
    for movers in (alike, alike[::-1]):
        tried.clear()
        search._best_move(list(movers), exclude_type=None)
        assert tried and tried[0] == min(movers)
