"""The standard plots, including runs whose span is far beyond any bin count."""

from __future__ import annotations

import math

from arena_gym.cluster import PRESETS
from arena_gym.plots import plot_all
from arena_gym.records import EpisodeRecord, Event, EventKind
from arena_gym.types import JobId
from tests.helpers import job


def test_plots_of_a_huge_span_are_written(tmp_path):
    jobs = (job("A", 0, 10, "a40", 2), job("B", 1e15, 10, "a40", 2))
    events = []
    for j, t0 in (("A", 0.0), ("B", 1e15)):
        jid = JobId(j)
        events += [
            Event(t0, EventKind.SUBMIT, jid),
            Event(t0, EventKind.ALLOCATE, jid, "a40", 2),
            Event(t0 + 10, EventKind.RUN, jid, "a40", 2, "", 64.0),
            Event(t0 + 30, EventKind.FINISH, jid, "a40", 2),
        ]
    rec = EpisodeRecord("fcfs", PRESETS["tiny"], jobs, tuple(events), 0.0, 1e15 + 30, math.inf, 4, 0.1)
    paths = plot_all([rec], tmp_path)
    assert [p.name for p in paths] == ["jct_cdf.png", "throughput.png", "queue.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)
