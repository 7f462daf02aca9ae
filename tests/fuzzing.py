"""Shared pieces of the fuzz suites: example budgets that scale with the hypothesis profile, a
per-case timeout (a hang fails the case instead of the whole run) and the error contract.

Contract for every generated input: a correct result, or a ValueError/TypeError whose message
is one line and names the problem (the CLI: exit code 2 and one line on stderr). Never another
exception, never a hang.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import HealthCheck, settings

#: hypothesis's own default ``max_examples``; the ``long`` profile (tests/conftest.py) has 10x.
BASE_EXAMPLES = 100


def examples(n: int) -> int:
    """``n`` under the default profile, scaled like the active profile's ``max_examples``."""
    return max(1, n * settings.default.max_examples // BASE_EXAMPLES)


def fuzz(n: int) -> settings:
    """Settings of a fuzz test with ``n`` cases under the default profile."""
    return settings(
        max_examples=examples(n),
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
    )


def fuzz_budget(small: int, deep: int = 1000) -> settings:
    """Settings of a fuzz test whose cases are slow: ``small`` cases under the default profile (``make test``),
    ``deep`` under ``long`` (or any profile of 1,000 examples or more)."""
    return fuzz(
        small if settings.default.max_examples < 1000 else deep * BASE_EXAMPLES // settings.default.max_examples
    )


class CaseTimeout(BaseException):
    """A generated case ran past its time limit (a hang). A BaseException: no ``except Exception`` hides it."""


@contextmanager
def case_timeout(seconds: float) -> Iterator[None]:
    """Fail with :class:`CaseTimeout` if the block runs longer than ``seconds`` (SIGALRM; the
    timer and handler in place before, e.g. pytest-timeout's, are restored after)."""

    def on_alarm(signum: int, frame: object) -> None:
        raise CaseTimeout(f"a generated case ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 0.001))


def assert_one_line(exc: BaseException, *needles: str) -> str:
    """``exc`` is a ValueError/TypeError with a non-empty one-line message containing every needle."""
    assert isinstance(exc, (ValueError, TypeError)), f"{type(exc).__name__}: {exc}"
    message = str(exc)
    assert message.strip() and "\n" not in message and "\r" not in message, repr(message)
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    return message
