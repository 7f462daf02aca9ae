"""PNG plots of episodes: JCT CDF, cluster throughput over time, queue length over time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

from arena_gym.metrics import LogReading, finished_jcts, read_once
from arena_gym.records import EpisodeRecord

#: At most this many points per line: longer runs are binned more coarsely (a plot is ~800 px wide).
PLOT_POINTS = 2000
#: Figure sizes (inches) of the JCT CDF and of the time series.
JCT_SIZE, SERIES_SIZE = (6.0, 4.0), (7.0, 4.0)
#: Tick spacings (times a power of ten) for the linear axes: round labels such as 0, 2000, 4000.
_STEPS = (1, 2, 5, 10)
#: Fixed margins (fractions of the figure) that fit the axis labels: no layout pass before drawing.
_MARGINS = {"left": 0.12, "right": 0.97, "bottom": 0.13, "top": 0.96}


def _smooth(values: np.ndarray, window: int) -> np.ndarray:
    if window <= 1 or len(values) < window:
        return values
    kernel = np.ones(window)
    # divide by the number of points actually under the window, so the edges are not pulled to 0
    return np.convolve(values, kernel, mode="same") / np.convolve(np.ones_like(values), kernel, mode="same")


def _figure(width: float, height: float) -> Figure:
    """A figure drawn by the Agg backend directly (no pyplot: no global figure registry to close)."""
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(**_MARGINS)
    return fig


def _save(fig: Figure, path: Path) -> Path:
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110, pil_kwargs={"compress_level": 1})  # fast zlib: ~15% larger, half the time
    tmp.replace(path)
    return path


def _readings(records: Sequence[EpisodeRecord], done: Sequence[LogReading] | None) -> list[LogReading]:
    known = list(done or ())
    return [read_once(rec, known[i] if i < len(known) else None) for i, rec in enumerate(records)]


def _draw_jct_cdf(ax: Axes, records: Sequence[EpisodeRecord], reps: Sequence[LogReading]) -> None:
    for rec, rep in zip(records, reps):
        jcts = np.sort(finished_jcts(rep.outcomes)) / 3600.0
        if len(jcts):
            ax.step(jcts, np.arange(1, len(jcts) + 1) / len(jcts), where="post", label=rec.policy)
    ax.set_xlabel("JCT (h)")
    ax.set_ylabel("fraction of finished jobs")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 0.1, 1, 10 (plain text, no mathtext)
    # no minor ticks (8 per decade on a log axis, each a set of artists); the grid marks the decades
    ax.xaxis.set_minor_locator(NullLocator())
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend()


def _draw_series(
    ax: Axes,
    records: Sequence[EpisodeRecord],
    reps: Sequence[LogReading],
    series: str,
    ylabel: str,
    bin_s: float,
    smooth: int,
) -> None:
    for rec, rep in zip(records, reps):
        tl = rep.timeline
        starts, means = tl.binned(getattr(tl, series), bin_s, max_bins=PLOT_POINTS)
        ax.plot((starts - rec.start_time) / 3600.0, _smooth(means, smooth), label=rec.policy, lw=1.2)
    ax.set_xlabel("time (h)")
    ax.set_ylabel(ylabel)
    for axis in (ax.xaxis, ax.yaxis):  # about 5 labelled ticks per axis (each tick is a set of artists)
        axis.set_major_locator(MaxNLocator(nbins=5, steps=_STEPS))
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend()


def _clear(ax: Axes) -> None:
    """Take the lines and legend off ``ax`` and give it linear axes, so that it draws the next plot as a fresh axes would."""
    for line in list(ax.lines):
        line.remove()
    legend = ax.get_legend()
    if legend is not None:
        legend.remove()
    ax.set_prop_cycle(None)  # the next plot starts at the first colour again
    ax.set_xscale("linear")  # also restores the default tick locators and formatters
    ax.relim()
    ax.autoscale_view()


#: The time-series plots: file name, timeline series, y label, smoothing window.
SERIES_PLOTS = (
    ("throughput.png", "throughput", "cluster throughput (samples/s)", 5),
    ("queue.png", "pending_jobs", "queued jobs", 1),
)


def plot_all(records: Sequence[EpisodeRecord], out_dir: Path, done: Sequence[LogReading] | None = None) -> list[Path]:
    """The three standard plots into ``out_dir`` (``done``: the records' log readings, if known).

    One figure is redrawn for each file (each PNG is what a figure of its own would show): its
    axes and tick artists are built once.
    """
    reps = _readings(records, done)
    fig = _figure(*JCT_SIZE)
    ax = fig.add_subplot()
    _draw_jct_cdf(ax, records, reps)
    paths = [_save(fig, out_dir / "jct_cdf.png")]
    fig.set_size_inches(*SERIES_SIZE)
    for name, series, ylabel, smooth in SERIES_PLOTS:
        _clear(ax)
        _draw_series(ax, records, reps, series, ylabel, 300.0, smooth)
        paths.append(_save(fig, out_dir / name))
    return paths
