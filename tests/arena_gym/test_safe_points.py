"""Ctrl-C and SIGTERM held outside open stretches and delivered at the next safe point, by the handler before."""

from __future__ import annotations

import os
import signal
import time

import pytest

from arena_gym.safe_points import SafePoints, signals_held


class _Stop(Exception):
    """What the SIGTERM handler under test raises."""


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop(signum)


@pytest.fixture
def sigterm_raises_stop(ctrl_c_raises):
    before = signal.signal(signal.SIGTERM, _raise_stop)
    yield
    signal.signal(signal.SIGTERM, before)


def _signal_self(signum: int) -> None:
    """Send ``signum`` to this process and give its handler the next instructions to run in."""
    os.kill(os.getpid(), signum)
    for _ in range(1000):
        time.sleep(0)


def test_a_signal_outside_an_open_stretch_waits_for_the_next_one(sigterm_raises_stop) -> None:
    steps = []
    with SafePoints().installed() as stops:
        _signal_self(signal.SIGTERM)
        steps.append("bookkeeping finished")
        with pytest.raises(_Stop), stops.open():
            steps.append("never")
        _signal_self(signal.SIGINT)
        with pytest.raises(KeyboardInterrupt):
            stops.deliver_held()
        stops.deliver_held()  # delivered once
    assert steps == ["bookkeeping finished"]
    assert signal.getsignal(signal.SIGTERM) is _raise_stop  # the handler before, after


def test_in_an_open_stretch_a_signal_is_delivered_at_once_and_a_closed_one_holds_it(sigterm_raises_stop) -> None:
    steps = []
    with SafePoints().installed() as stops:
        with pytest.raises(KeyboardInterrupt), stops.open():
            _signal_self(signal.SIGINT)
            steps.append("never")
        with pytest.raises(_Stop), stops.open():
            with stops.closed():
                _signal_self(signal.SIGTERM)
                steps.append("the write finished")
            steps.append("never")
        with stops.open():
            steps.append("nothing held")
    assert steps == ["the write finished", "nothing held"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_signals_held_delivers_after_the_block_and_keeps_the_blocks_own_error(sigterm_raises_stop) -> None:
    steps = []
    with pytest.raises(KeyboardInterrupt), signals_held():
        _signal_self(signal.SIGINT)
        steps.append("the block finished")
    assert steps == ["the block finished"]
    with pytest.raises(ValueError), signals_held():
        raise ValueError("its own error, no signal held")
    with pytest.raises(_Stop) as stopped, signals_held():
        _signal_self(signal.SIGTERM)
        raise ValueError("an error while the signal was held")
    assert isinstance(stopped.value.__context__, ValueError)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
