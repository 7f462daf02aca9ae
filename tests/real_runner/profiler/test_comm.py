"""The send/recv table times the transfer, not a late peer: its skew is the pipeline simulation's (2 gloo ranks)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from real_runner.profiler.settings import ProfileJob, ProfilerSettings  # noqa: E402
from tests.real_runner.distributed_cases import process_group, spawn  # noqa: E402

pytestmark = [pytest.mark.distributed, pytest.mark.timeout(300)]

LATE_S = 0.3  # the echo side finishes each gap this much later than the pinging side: later than its half gap
SETTINGS = ProfilerSettings(
    comm_ops=("send_recv",),
    comm_min_exp=10,
    comm_max_exp=10,
    comm_step_exp=4,
    comm_rounds=5,
    comm_warmup=1,
    # half a gap (0.1 s) is shorter than the peer's lateness: only its "ready" message keeps the wait out of the time
    gap_s=0.2,
)


def _table(rank: int, work: str) -> None:
    import time

    from real_runner.profiler import comm

    torch.set_num_threads(1)
    if rank == 1:
        gap = comm._Gap.__call__

        def late(self, fraction=1.0):
            gap(self, fraction)
            time.sleep(LATE_S)

        comm._Gap.__call__ = late
    job = ProfileJob(("gpt__tiny",), SETTINGS, "cpu-2", 1, 2, (0, 1), work)
    with process_group(Path(work), "comm", rank, 2, "gloo"):
        rows = comm.profile_comm(job, rank, torch.device("cpu"), lambda *a: None)
    if rank == 0:
        (Path(work) / "comm.json").write_text(json.dumps(rows))


def test_a_late_peer_does_not_count_into_the_send_recv_time(tmp_path):
    spawn(_table, 2, (str(tmp_path),), timeout_s=240)
    (row,) = json.loads((tmp_path / "comm.json").read_text())
    assert row["op"] == "send_recv" and row["ranks"] == [0, 1] and row["bytes"] == [1024]
    # pinging after the half gap alone would wait for the late peer: half the round trip >= (LATE_S - 0.1) / 2
    for rounds in row["seconds"]:
        assert len(rounds) == 5 and statistics.median(rounds) < LATE_S / 4, rounds
