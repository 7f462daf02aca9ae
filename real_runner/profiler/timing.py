"""Timing on one device: a stopwatch (CUDA events on GPUs, ``perf_counter`` on CPU) and interleaved rounds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch

#: CPU clocks: the calling thread's CPU time (a busy machine's pauses do not count) or wall time.
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.thread_time, "wall": time.perf_counter}


class Stopwatch:
    """Marks points in time on one device; :meth:`laps` returns the seconds between consecutive marks.

    On CUDA the marks are events on the current stream (read after one synchronisation); on CPU
    readings of ``clock``: ``cpu`` (the thread's CPU time: what the computation costs on a
    dedicated core, however busy the machine) or ``wall`` (``perf_counter``).
    """

    def __init__(self, device: torch.device, clock: str = "wall") -> None:
        self.cuda = device.type == "cuda"
        self._now = CLOCKS[clock]
        self._marks: list = []

    def mark(self) -> None:
        """Record the current point."""
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(self._now())

    def laps(self) -> list[float]:
        """Seconds between consecutive marks since the last call (then forgets them)."""
        marks, self._marks = self._marks, []
        if self.cuda:
            marks[-1].synchronize()
            return [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:])]
        return [b - a for a, b in zip(marks, marks[1:])]


#: A timed item: runs once, marking the watch, and returns its own laps.
Item = Callable[[Stopwatch], list[float]]


def interleaved(
    items: Sequence[Item],
    watch: Stopwatch,
    rounds: int,
    warmup: int,
    on_round: Callable[[int, int], None] | None = None,
) -> list[list[list[float]]]:
    """Run every item once per round, ``warmup + rounds`` rounds; per item the laps of each timed round.

    Interleaving spreads slow periods of a shared machine over all items instead of a few.
    """
    out: list[list[list[float]]] = [[] for _ in items]
    total = warmup + rounds
    for r in range(total):
        for i, item in enumerate(items):
            laps = item(watch)
            if r >= warmup:
                out[i].append(laps)
        if on_round is not None:
            on_round(r + 1, total)
    return out


def per_model_interleaved(
    models: Sequence[str],
    build: Callable[[str], Sequence[Item]],
    watch: Stopwatch,
    rounds: int,
    warmup: int,
    on_round: Callable[[int, int], None],
) -> dict[str, list[list[list[float]]]]:
    """Per model, the laps of its items (built by ``build`` when its rounds start), interleaved in rounds of their
    own; ``on_round(done, total)`` counts rounds over all models.

    A training rank runs one model: another model's items between its rounds would evict its weights and activations
    from the caches a step keeps warm.
    """
    out = {}
    for m, name in enumerate(models):

        def counted(r: int, t: int, m: int = m) -> None:
            on_round(m * t + r, len(models) * t)

        out[name] = interleaved(build(name), watch, rounds, warmup, counted)
    return out


#: How a list of timed rounds is summarised: the mean keeps the share of time a busy machine takes
#: from every item (a step of training loses it too); the median drops it for short items.
STATISTICS: dict[str, Callable[[Sequence[float]], float]] = {"mean": statistics.fmean, "median": statistics.median}


def summarise(rounds: list[list[float]], statistic: str = "mean") -> list[float]:
    """Per lap position, the ``statistic`` over rounds."""
    return [STATISTICS[statistic](col) for col in zip(*rounds)]


def paired_difference(wrapped: list[list[float]], plain: list[list[float]]) -> list[float]:
    """Per lap position, the median over rounds of ``wrapped - plain`` (both timed in the same round, so a slow
    period of the machine cancels; the median ignores a pause that hit only one of the two)."""
    return [statistics.median([a - b for a, b in zip(cw, cp)]) for cw, cp in zip(zip(*wrapped), zip(*plain))]
