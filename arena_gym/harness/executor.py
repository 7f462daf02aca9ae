"""Running independent tasks of a sweep: in this process, or in local worker processes, in order, with a progress bar."""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


def _ignore_sigint() -> None:
    """Worker initialiser: Ctrl-C is the parent's to handle (it then terminates the workers)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_tasks(
    fn: Callable[[Any], T], tasks: Sequence[Any], workers: int = 1, progress: bool = False, unit: str = "task"
) -> list[T]:
    """``[fn(task) for task in tasks]``, in ``workers`` processes when more than one (results in task order).

    A failed task or Ctrl-C stops the others at once and propagates.
    """
    bar = tqdm(total=len(tasks), desc=f"{unit}s", unit=unit, disable=not progress, leave=False)
    results: list[T] = []
    try:
        if workers > 1 and len(tasks) > 1:
            pool = multiprocessing.get_context().Pool(min(workers, len(tasks)), initializer=_ignore_sigint)
            try:
                for result in pool.imap(fn, tasks):
                    results.append(result)
                    bar.update()
                pool.close()
            except BaseException:
                pool.terminate()
                raise
            finally:
                pool.join()
        else:
            for task in tasks:
                results.append(fn(task))
                bar.update()
    finally:
        bar.close()
    return results
