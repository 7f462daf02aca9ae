"""The built-in model families, one module each (``gpt``, ``moe``, ``wide_resnet``).

Each module of this package builds one :class:`arena_gym.families.ModelFamily` named ``FAMILY``;
:func:`register` (called by the ``estimator`` catalogue) finds the modules and adds their families
to the family catalogue, so a new built-in family is one new module here and nothing else. A
family of your own, outside this package, is a module that calls
:func:`arena_gym.families.register_family` (docs/architecture.md, "Where to add what").
"""

from __future__ import annotations

import importlib
import pkgutil

from arena_gym.families import ModelFamily, register_family


def builtin() -> tuple[ModelFamily, ...]:
    """The ``FAMILY`` of every module of this package, by module name; a module without one is an error."""
    found = []
    for name in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        family = getattr(importlib.import_module(f"{__name__}.{name}"), "FAMILY", None)
        if not isinstance(family, ModelFamily):
            raise TypeError(f"{__name__}.{name} defines no FAMILY (a ModelFamily)")
        found.append(family)
    return tuple(found)


def register() -> None:
    """Register the built-in families (idempotent)."""
    for family in builtin():
        register_family(family)
