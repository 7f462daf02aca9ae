"""Resume on fake generations: a new controller finds one job finished and another gone, and takes over."""

from __future__ import annotations

import pytest

from agents.fcfs import FCFS
from arena_gym.core import ClusterState
from arena_gym.core.oplog import replay
from arena_gym.records import EventKind
from arena_gym.sim import SimConfig
from arena_gym.types import ClusterSpec, GpuType, NodeGroup
from real_runner.launchers.fake import FakeClock
from real_runner.live.journal import Journal
from tests.fake_live import fake_live_backend
from tests.helpers import GPT, job, table_model

A40 = ClusterSpec("a40-2x2", (NodeGroup(GpuType("a40"), 2, 2),))
PERF = table_model({(GPT, 128, "a40", 1, 2): 2.0})  # two devices of a node: 2 s a step
NO_OVERHEAD = SimConfig(overhead_class="none")


def test_a_job_that_finished_while_no_controller_watched_departs_once_and_a_gone_one_is_relaunched(tmp_path) -> None:
    jobs = [job("a", 0, 30, "a40", 2), job("b", 0, 200, "a40", 2)]
    first_clock = FakeClock()
    first = fake_live_backend(
        A40, PERF, tmp_path, NO_OVERHEAD, first_clock, lambda: first_clock.t >= 60.0, checkpoint_every_steps=10
    )
    policy = FCFS()
    first.apply(policy.decide(first.reset(jobs)))  # both start at 0 (a on node 0, b on node 1)
    with pytest.raises(KeyboardInterrupt):  # the controller dies at 60 s, a's done record unread
        first.advance()
    assert first_clock.t == 60.0 and first.state.unfinished == 2
    first_clock.t = 70.0  # its generations go on without it: a is done at 60, b reaches step 35
    first.launcher.tick()  # type: ignore[attr-defined]
    clock = FakeClock(70.0)
    second = fake_live_backend(A40, PERF, tmp_path, NO_OVERHEAD, clock, checkpoint_every_steps=10)
    snap = second.reset(jobs)
    assert second.resumed and snap is not None and snap.now == 70.0
    assert snap.departures == ("a",) and [v.job_id for v in snap.running] == ["b"]
    while snap is not None:
        second.apply(policy.decide(snap))
        snap = second.advance()
    record = second.record(policy.name)
    finishes = {e.job_id: e.time for e in record.events if e.kind is EventKind.FINISH}
    fails = [(e.job_id, e.time) for e in record.events if e.kind is EventKind.FAIL]
    # a finished at 60 (its done record, read by the new controller); b had no process left at 70 and
    # resumed from its checkpoint of step 30: 170 steps more, 2 s each
    assert finishes == pytest.approx({"a": 60.0, "b": 70.0 + 170 * 2.0}) and fails == [("b", 70.0)]
    second.close()
    rebuilt = ClusterState(A40, PERF)
    rebuilt.load(jobs)
    replay(Journal(tmp_path / Journal.FILENAME).ops(), rebuilt)
    assert rebuilt.events == record.events
