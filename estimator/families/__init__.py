"""The built-in model families, one module each (``gpt``, ``moe``, ``wide_resnet``).

Each module builds one :class:`arena_gym.families.ModelFamily`; :func:`register` (called by the
``estimator`` catalogue) adds them to the family catalogue. A family of your own is a module like
these that calls :func:`arena_gym.families.register_family` (docs/architecture.md, "Where to add what").
"""

from __future__ import annotations

from arena_gym.families import register_family
from estimator.families import gpt, moe, wide_resnet

BUILTIN = (gpt.FAMILY, moe.FAMILY, wide_resnet.FAMILY)


def register() -> None:
    """Register the built-in families (idempotent)."""
    for family in BUILTIN:
        register_family(family)
