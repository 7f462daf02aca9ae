"""Probes of the information sets: policies and readers that try every door to the truth a policy might find.

None is registered: the deadline probes run as ``--policy tests.probes:DeadlineArena`` (from the
repository root), as a plug-in would. :func:`reachable` walks everything reachable from an object
by attribute access, as a curious policy could: public and private slots (read through the slot
descriptors themselves, past any property that hides them), ``__dict__``, closures and
defaults of functions, bound methods' ``__self__``, partials and containers. It stops at
classes, modules and functions' globals: they are code, not the episode.
"""

from __future__ import annotations

import enum
import functools
import math
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from agents.arena.policy import ArenaPolicy
from arena_gym.types import JobView, Snapshot


class DeadlinePriority:
    """Earliest deadline first (jobs without one after, in submission order); urgency 1 / time to the deadline.

    It reads no hidden field: only ``spec.deadline``, which a non-clairvoyant policy sees when declared.
    """

    clairvoyant = False

    def reset(self) -> None:
        """Nothing to forget."""

    def fork(self) -> DeadlinePriority:
        """Itself: it keeps no episode state."""
        return self

    def keys(self, snapshot: Snapshot) -> Callable[[JobView], tuple]:
        """(deadline or infinity, submit time, job id)."""

        def key(view: JobView) -> tuple:
            deadline = view.spec.deadline
            return (math.inf if deadline is None else deadline, view.spec.submit_time, view.job_id)

        return key

    def targets(self, snapshot: Snapshot) -> None:
        """No sizing targets: the config's ceiling."""
        return None

    def urgency(self, snapshot: Snapshot) -> Callable[[JobView], float]:
        """1 / seconds to the deadline (a tiny constant without one)."""
        now = snapshot.now

        def weight(view: JobView) -> float:
            deadline = view.spec.deadline
            return 1e-9 if deadline is None else 1.0 / max(deadline - now, 1.0)

        return weight


class DeadlineArena(ArenaPolicy):
    """Arena walking its queue by earliest deadline (declares itself non-clairvoyant)."""

    def __init__(self, name: str = "deadline-arena", **overrides: Any) -> None:
        super().__init__(name, priority=DeadlinePriority(), **overrides)


class WeightedDeadlineArena(ArenaPolicy):
    """DeadlineArena as ``arena-srpt-w`` is built: 32 GPUs a job, preempting, growing the most urgent first."""

    def __init__(self, name: str = "deadline-arena-w", **overrides: Any) -> None:
        settings = {"max_job_gpus": 32, "weighted_upgrades": True, "preempt_lower": True, **overrides}
        super().__init__(name, priority=DeadlinePriority(), **settings)


_LEAVES = (str, bytes, int, float, complex, bool, type(None), enum.Enum, type, types.ModuleType, np.ndarray, np.generic)


def _children(obj: Any) -> Iterator[Any]:
    if isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                yield cell.cell_contents
            except ValueError:  # an empty cell
                continue
        yield from obj.__defaults__ or ()
        yield from (obj.__kwdefaults__ or {}).values()
        return
    if isinstance(obj, (types.MethodType, types.BuiltinMethodType, types.MethodWrapperType)):
        yield getattr(obj, "__self__", None)
        yield getattr(obj, "__func__", None)
        return
    if isinstance(obj, functools.partial):
        yield obj.func
        yield from obj.args
        yield from obj.keywords.values()
    if isinstance(obj, dict):
        yield from obj.keys()
        yield from obj.values()
    elif isinstance(obj, (list, tuple, set, frozenset)):
        yield from obj
    elif isinstance(obj, types.MappingProxyType):
        yield from obj.values()
    state = getattr(obj, "__dict__", None)
    if isinstance(state, dict):
        yield from state.values()
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            descriptor = cls.__dict__.get(slot)
            if descriptor is None or not hasattr(descriptor, "__get__"):
                continue
            try:
                yield descriptor.__get__(obj, cls)
            except AttributeError:  # a slot never set (a hidden spec's iterations)
                continue


def reachable(root: Any, limit: int = 2_000_000) -> Iterator[Any]:
    """Every object reachable from ``root`` by attribute access (see the module docstring), each once."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if len(seen) > limit:
            raise RuntimeError(f"more than {limit} objects reachable")
        yield obj
        if not isinstance(obj, _LEAVES):
            stack.extend(_children(obj))
