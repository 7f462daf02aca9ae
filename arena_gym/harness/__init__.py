"""The harness: every command and what runs experiments above the library layers.

``arena_gym.harness.cli`` (the ``arena-gym`` command line), :mod:`~arena_gym.harness.experiment`
(one simulated run from a ``RunConfig``), :mod:`~arena_gym.harness.compare` and
:mod:`~arena_gym.harness.evaluate` (scoring policies on workloads), :mod:`~arena_gym.harness.trainers`
(training runs of learned agents), :mod:`~arena_gym.harness.deploy` (a policy on a live testbed),
results, plots and tracking. It sits on top of ``agents`` | ``real_runner``, ``envs``,
``estimator`` | ``traces`` and the core; nothing below imports it (docs/architecture.md).

The names below load their module on first use, so ``import arena_gym.harness`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: Public name -> ``module:attr`` it is loaded from on first use.
_EXPORTS: dict[str, str] = {
    "RunConfig": "arena_gym.harness.experiment:RunConfig",
    "run": "arena_gym.harness.experiment:run",
    "load_jobs": "arena_gym.harness.experiment:load_jobs",
    "CompareConfig": "arena_gym.harness.compare:CompareConfig",
    "compare": "arena_gym.harness.compare:compare",
    "EvalConfig": "arena_gym.harness.evaluate:EvalConfig",
    "evaluate": "arena_gym.harness.evaluate:evaluate",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from arena_gym.harness.compare import CompareConfig, compare
    from arena_gym.harness.evaluate import EvalConfig, evaluate
    from arena_gym.harness.experiment import RunConfig, load_jobs, run


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562)."""
    from arena_gym.registry import resolve

    if name not in _EXPORTS:
        raise AttributeError(f"module 'arena_gym.harness' has no attribute {name!r}")
    value = globals()[name] = resolve(_EXPORTS[name])
    return value


def __dir__() -> list[str]:
    """The module's names, the lazily loaded ones included."""
    return sorted({*globals(), *__all__})
