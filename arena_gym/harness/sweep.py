"""Running independent tasks of a sweep: in this process, in local worker processes, or as Ray tasks on a cluster.

Results always come back in task order, with a progress bar. On Ray (``ray`` an address, or
``auto``), each task is one Ray task; a task whose worker process or node dies before it
returns is submitted again (up to :data:`RAY_RERUNS` times), and a result is kept once per
task, so a node lost mid-sweep costs the tasks it was running and nothing is counted twice.
Ray is imported only when a sweep names a cluster (``pip install -e ".[ray]"``). While tasks run
in other processes the bar is redrawn every :data:`HEARTBEAT_S` seconds with how many are running
and for how long, so a sweep of long tasks never looks stalled.
"""

from __future__ import annotations

import importlib
import logging
import multiprocessing
import os
import signal
import socket
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
log = logging.getLogger(__name__)

#: Times a Ray task is submitted again after its worker or node died (a task that raises is not rerun).
RAY_RERUNS = 3
#: Seconds to wait for a TCP connection to a Ray cluster's address before calling it unreachable.
RAY_CONNECT_TIMEOUT_S = 5.0
#: Seconds between redraws of the bar while no task finishes.
HEARTBEAT_S = 2.0


def _beat(bar: Any, running: int, since: float, reruns: int = 0) -> None:
    """Redraw ``bar`` with the tasks running, the seconds since the last one finished (and Ray's reruns so far)."""
    rerun = f", {reruns} rerun" if reruns else ""
    bar.set_postfix_str(f"{running} running, {time.monotonic() - since:.0f} s{rerun}", refresh=True)


def _advance(bar: Any, reruns: int = 0) -> float:
    """One more task done: the bar advanced, its waiting note cleared (Ray's reruns kept); the time of it."""
    bar.set_postfix_str(f"{reruns} rerun" if reruns else "", refresh=False)
    bar.update()
    return time.monotonic()


def _worker_signals() -> None:
    """Worker initialiser: Ctrl-C is the parent's to handle (it then terminates the workers), and SIGTERM ends the
    worker at once. A Python handler inherited from the parent would run only once the worker is back in Python
    code, which a long C call (an LP bound, a numpy kernel) delays for minutes: the parent's terminate would wait
    on it, and a worker whose parent was killed would go on."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _import_ray() -> Any:
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise ValueError('--ray needs Ray: pip install -e ".[ray]"') from None


def _check_reachable(address: str) -> None:
    """Open (and close) a TCP connection to ``HOST:PORT`` (``ray://`` allowed); ValueError in one line if none opens."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"--ray {address!r}: expected HOST:PORT, ray://HOST:PORT or 'auto'")
    try:
        socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise ValueError(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc})") from None


def connect_ray(address: str) -> None:
    """Connect this process to the Ray cluster at ``address`` (``HOST:PORT``, ``ray://HOST:PORT`` or ``auto``).

    Nothing to do when already connected; the connection stays open for the process. ValueError
    in one line when Ray is not installed or no cluster answers at the address.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return
    if address != "auto":
        _check_reachable(address)
    try:
        ray.init(address=address, namespace="arena-gym", log_to_driver=False, logging_level=logging.WARNING)
    except ConnectionError as exc:
        raise ValueError(f"--ray {address}: {_one_line(exc).split('. ')[0]}") from None


def _in_directory(fn: Callable[[Any], T], task: Any, cwd: str) -> T:
    """Ray task body: ``fn(task)`` in the driver's working directory where this node has it (relative paths)."""
    if os.path.isdir(cwd):
        os.chdir(cwd)
    return fn(task)


def _run_on_ray(fn: Callable[[Any], T], tasks: Sequence[Any], address: str, bar: Any, unit: str) -> list[T]:
    """``[fn(task) for task in tasks]`` as Ray tasks (see the module docstring)."""
    connect_ray(address)
    ray = _import_ray()
    remote = ray.remote(num_cpus=1, max_retries=0)(_in_directory)
    cwd = os.getcwd()

    def submit(i: int) -> Any:
        return remote.options(name=f"{unit} {i}").remote(fn, tasks[i], cwd)

    pending = {submit(i): i for i in range(len(tasks))}
    results: dict[int, T] = {}
    reruns: Counter[int] = Counter()
    since = time.monotonic()
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=HEARTBEAT_S)
            if not done:
                _beat(bar, len(pending), since, reruns.total())
                continue
            ref = done[0]
            i = pending.pop(ref)
            try:
                results[i] = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:  # the task raised: as it would locally
                raise (exc.cause if isinstance(exc.cause, BaseException) else exc) from None
            except ray.exceptions.RayError as exc:  # its worker or node died, or its result was lost with the node
                if reruns[i] >= RAY_RERUNS:
                    raise ConnectionError(
                        f"{unit} {i} lost {reruns[i] + 1} times, last: {_one_line(exc)[:300]}"
                    ) from None
                reruns[i] += 1
                log.warning("%s %d lost (%s); rerunning it (%d/%d)", unit, i, type(exc).__name__, reruns[i], RAY_RERUNS)
                pending[submit(i)] = i
                bar.set_postfix_str(f"{reruns.total()} rerun")
                continue
            since = _advance(bar, reruns.total())
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    if reruns:
        log.info("%d %s(s) rerun after a lost worker or node: %d rerun(s) in all", len(reruns), unit, reruns.total())
    return [results[i] for i in range(len(tasks))]


def _from_pool(results: Any, total: int, workers: int, bar: Any) -> list[Any]:
    """The results of a pool's ``imap`` in order, the bar advanced per result and redrawn while none comes."""
    out: list[Any] = []
    since = time.monotonic()
    while len(out) < total:
        try:
            out.append(results.next(timeout=HEARTBEAT_S))
        except multiprocessing.TimeoutError:
            _beat(bar, min(workers, total - len(out)), since)
            continue
        since = _advance(bar)
    return out


def run_tasks(
    fn: Callable[[Any], T],
    tasks: Sequence[Any],
    workers: int = 1,
    progress: bool = False,
    unit: str = "task",
    ray: str | None = None,
) -> list[T]:
    """``[fn(task) for task in tasks]``: as Ray tasks on the cluster at ``ray``, else in ``workers`` local processes.

    Results come in task order. A failed task or Ctrl-C stops the others at once and propagates.
    ``fn`` and the tasks must pickle (``fn`` a module-level function).
    """
    bar = tqdm(total=len(tasks), desc=f"{unit}s", unit=unit, disable=not progress, leave=False)
    results: list[T] = []
    try:
        if ray is not None:
            results = _run_on_ray(fn, tasks, ray, bar, unit)
        elif workers > 1 and len(tasks) > 1:
            pool = multiprocessing.get_context().Pool(min(workers, len(tasks)), initializer=_worker_signals)
            try:
                results = _from_pool(pool.imap(fn, tasks), len(tasks), min(workers, len(tasks)), bar)
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
