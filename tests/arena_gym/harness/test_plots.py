"""The standard plots, including runs whose span is far beyond any bin count."""

from __future__ import annotations

import math

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.harness import plots
from arena_gym.harness.plots import plot_all
from arena_gym.metrics import read_log
from arena_gym.records import EpisodeRecord, Event, EventKind
from arena_gym.types import MAX_TIME_S, JobId
from tests.helpers import job


def test_plots_of_a_huge_span_are_written(tmp_path):
    jobs = (job("A", 0, 10, "a40", 2), job("B", MAX_TIME_S, 10, "a40", 2))
    events = []
    for j, t0 in (("A", 0.0), ("B", MAX_TIME_S)):
        jid = JobId(j)
        events += [
            Event(t0, EventKind.SUBMIT, jid),
            Event(t0, EventKind.ALLOCATE, jid, "a40", 2),
            Event(t0 + 10, EventKind.RUN, jid, "a40", 2, "", 64.0),
            Event(t0 + 30, EventKind.FINISH, jid, "a40", 2),
        ]
    rec = EpisodeRecord("fcfs", PRESETS["tiny"], jobs, tuple(events), 0.0, MAX_TIME_S + 30, math.inf, 4, 0.1)
    paths = plot_all([rec], tmp_path)
    assert [p.name for p in paths] == ["jct_cdf.png", "throughput.png", "queue.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


def test_the_plots_of_plot_all_match_fresh_figures(tmp_path):
    """plot_all redraws one figure for every file; each PNG must be what a figure of its own draws."""
    np = pytest.importorskip("numpy")
    image = pytest.importorskip("PIL.Image")
    jobs = (job("A", 0, 10, "a40", 2), job("B", 50, 10, "a40", 2))
    events = []
    for j, t0, rate in (("A", 0.0, 64.0), ("B", 5000.0, 32.0)):
        jid = JobId(j)
        events += [
            Event(t0, EventKind.SUBMIT, jid),
            Event(t0, EventKind.ALLOCATE, jid, "a40", 2),
            Event(t0 + 100, EventKind.RUN, jid, "a40", 2, "", rate),
            Event(t0 + 9000, EventKind.FINISH, jid, "a40", 2),
        ]
    events.sort(key=lambda e: e.time)
    recs = [
        EpisodeRecord(name, PRESETS["tiny"], jobs, tuple(events), 0.0, 14000.0, math.inf, 4, 0.1)
        for name in ("fcfs", "srtf")  # two lines: the colour cycle must restart for the second plot
    ]
    shared, fresh = tmp_path / "shared", tmp_path / "fresh"
    shared.mkdir()
    fresh.mkdir()
    plot_all(recs, shared)
    reps = [read_log(rec) for rec in recs]
    fig = plots._figure(*plots.JCT_SIZE)
    plots._draw_jct_cdf(fig.add_subplot(), recs, reps)
    plots._save(fig, fresh / "jct_cdf.png")
    for name, series, ylabel, smooth in plots.SERIES_PLOTS:
        fig = plots._figure(*plots.SERIES_SIZE)
        plots._draw_series(fig.add_subplot(), recs, reps, series, ylabel, 300.0, smooth)
        plots._save(fig, fresh / name)
    for name in ("jct_cdf.png", "throughput.png", "queue.png"):
        ours, theirs = np.asarray(image.open(shared / name)), np.asarray(image.open(fresh / name))
        assert ours.shape == theirs.shape and (ours == theirs).all(), name
