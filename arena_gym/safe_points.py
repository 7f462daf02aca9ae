"""Ctrl-C and SIGTERM held where a stop would leave something half done, and delivered at the next safe point.

Python runs a signal's handler between any two instructions, also inside code an extension calls back
(pybind11 then aborts the whole process) or inside a library's bookkeeping (optuna then leaves a trial
running). :class:`SafePoints` holds the two signals outside the stretches it opens; :func:`signals_held`
holds them for a whole block.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any


class SafePoints:
    """Ctrl-C and SIGTERM held while :meth:`installed`, except in :meth:`open` stretches.

    Inside :meth:`open` a signal is delivered at once: the handler that was installed before runs (and
    raises). Elsewhere, and in :meth:`closed` stretches inside an open one, it is held and delivered where
    the next open stretch begins or goes on, or at :meth:`deliver_held`. Only signals whose handler is
    Python code are held; outside the main thread nothing is.
    """

    def __init__(self) -> None:
        self._inside = False
        self._held: tuple[int, Any] | None = None
        self._previous: dict[int, Callable[[int, Any], Any]] = {}

    @contextlib.contextmanager
    def installed(self) -> Iterator[SafePoints]:
        """Hold the signals while the body runs; the handlers before it after."""
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                if callable(handler := signal.getsignal(signum)):
                    self._previous[signum] = handler
                    signal.signal(signum, self._on_signal)
        try:
            yield self
        finally:
            for held, before in self._previous.items():
                if signal.getsignal(held) == self._on_signal:  # the handler may have replaced itself (SIGTERM)
                    signal.signal(held, before)

    @contextlib.contextmanager
    def open(self) -> Iterator[None]:
        """A stretch where a signal is delivered at once (and a held one first)."""
        self._inside = True
        try:
            self.deliver_held()
            yield
        finally:
            self._inside = False

    @contextlib.contextmanager
    def closed(self) -> Iterator[None]:
        """A stretch inside :meth:`open` where signals are held again (a write to the study)."""
        inside, self._inside = self._inside, False
        try:
            yield
        finally:
            self._inside = inside
        if inside:
            self.deliver_held()

    def deliver_held(self) -> None:
        """Deliver a held signal now (its handler raises)."""
        if self._held is not None:
            signum, frame = self._held
            self._held = None
            self._previous[signum](signum, frame)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._inside:
            self._previous[signum](signum, frame)
        elif self._held is None:
            self._held = (signum, frame)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while the body runs; one that came meanwhile is delivered after it (it raises there)."""
    with SafePoints().installed() as stops:
        try:
            yield
        finally:
            stops.deliver_held()
