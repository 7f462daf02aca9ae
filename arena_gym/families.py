"""The model-family catalogue: one :class:`ModelFamily` record per family, everything known about it.

A family (GPT, MoE, Wide-ResNet, or one of yours) is one module that builds one record and hands
it to :func:`register_family`; nothing else names it. The record says

* how to build a size's architecture (``build``, applied to ``sizes[size]``; the estimator's
  cost table comes from it),
* which efficiency class it belongs to (``kind``; a class the calibration does not know starts
  from ``efficiency``) and the optimizer state it keeps per parameter (``optimizer_bytes``),
* its part in the artifact's trace-sampling recipe (``trace``: sizes, batches, the fewest GPUs
  and a nominal iteration time per size), if any,
* which architecture of the live runner trains it (``live``; None: it runs in the simulator
  only, and ``deploy`` refuses it).

The built-in families live in ``estimator/families/`` and are registered by the installed
catalogues (``arena_gym.catalogues`` entry points), like the built-in policies. This module holds
plain data and callables handed in: it imports nothing above the core.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class TraceMix:
    """A family's part in the trace-sampling recipe (``traces.recipe``).

    ``sizes`` and ``batches`` are indexed by a mix's size and batch weights (index 0 first);
    ``min_gpus[size]`` is the fewest 40-48 GB GPUs a size runs on (a size without it is
    infeasible under the recipe's built-in rule); ``nominal_iter_s[size]`` is the seconds per
    iteration on one A40-equivalent at ``batches[0]``.
    """

    sizes: tuple[str, ...]
    batches: tuple[int, ...]
    min_gpus: Mapping[str, int] = field(default_factory=dict)
    nominal_iter_s: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.sizes or not self.batches or any(b < 1 for b in self.batches):
            raise ValueError("a trace mix needs at least one size and one positive batch")
        unknown = sorted((set(self.min_gpus) | set(self.nominal_iter_s)) - set(self.sizes))
        if unknown:
            raise ValueError(f"trace mix: size(s) {', '.join(unknown)} are not among its sizes")


@dataclass(frozen=True)
class ModelFamily:
    """One model family (see the module docstring).

    ``sizes`` maps a size name to the spec ``build`` takes (``estimator.zoo.TransformerSpec``,
    ``WideResNetSpec`` or a spec of your own); ``build(spec)`` returns the ``ModelArch``.
    ``efficiency`` (``eta_compute``, ``eta_memory``, ``tile_rows``, ``comm``) seeds a ``kind``
    that the calibrated parameters lack. ``aliases`` are other spellings trace files may use (e.g. the artifact's
    ``bert`` for ``gpt``; :func:`canonical_family` maps them).
    """

    name: str
    kind: str
    sizes: Mapping[str, Any]
    build: Callable[[Any], Any]
    optimizer_bytes: float
    trace: TraceMix | None = None
    live: str | None = None
    efficiency: Mapping[str, float] | None = None
    aliases: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower() or "__" in self.name:
            raise ValueError(f"model family name {self.name!r} must be a lower-case identifier without '__'")
        if not self.sizes:
            raise ValueError(f"model family {self.name}: at least one size is needed")
        if self.optimizer_bytes < 0:
            raise ValueError(f"model family {self.name}: optimizer_bytes must be >= 0")
        if self.trace is not None:
            missing = sorted(set(self.trace.sizes) - set(self.sizes))
            if missing:
                raise ValueError(f"model family {self.name}: trace size(s) {', '.join(missing)} are not its sizes")
        if self.efficiency is not None:
            keys = {"eta_compute", "eta_memory", "tile_rows", "comm"}
            if set(self.efficiency) - keys or not all(v > 0 for v in self.efficiency.values()):
                raise ValueError(f"model family {self.name}: efficiency takes positive {', '.join(sorted(keys))}")


_FAMILIES: dict[str, ModelFamily] = {}
_ALIASES: dict[str, str] = {}
_loaded: bool = False


def _ready() -> None:
    """Load the installed catalogues once (they register the built-in families)."""
    global _loaded
    if not _loaded:
        _loaded = True
        from arena_gym.registry import load_catalogues

        load_catalogues()


def register_family(family: ModelFamily, *, replace: bool = False) -> None:
    """Add ``family`` to the catalogue; the same record again is a no-op, another under a taken
    name needs ``replace=True``."""
    _ready()
    old = _FAMILIES.get(family.name)
    if old is not None and old is not family and old != family and not replace:
        raise ValueError(f"model family {family.name!r} is already registered; pass replace=True to change it")
    if family.name in _ALIASES:
        raise ValueError(f"model family name {family.name!r} is already an alias of {_ALIASES[family.name]!r}")
    for alias in family.aliases:
        taken = _ALIASES.get(alias, family.name)
        if alias != alias.lower() or "__" in alias:
            raise ValueError(f"model family {family.name}: alias {alias!r} must be lower case without '__'")
        if alias in _FAMILIES:
            raise ValueError(f"model family {family.name}: alias {alias!r} is the name of a registered family")
        if taken != family.name and not replace:
            raise ValueError(f"model family alias {alias!r} already names {taken!r}")
    if old is not None:
        _drop_aliases(old)
    _FAMILIES[family.name] = family
    _ALIASES.update(dict.fromkeys(family.aliases, family.name))


def _drop_aliases(family: ModelFamily) -> None:
    for alias in family.aliases:
        if _ALIASES.get(alias) == family.name:
            del _ALIASES[alias]


def unregister_family(name: str) -> None:
    """Remove a family (and its aliases); for tests and notebooks."""
    family = _FAMILIES.pop(name, None)
    if family is not None:
        _drop_aliases(family)


def canonical_family(name: str) -> str:
    """The family a spelling names, lower-cased: an alias (``bert``) gives its family (``gpt``); any
    other name is returned as it is, known or not (:func:`get_family` checks)."""
    _ready()
    name = name.lower()
    return _ALIASES.get(name, name)


def family_aliases() -> Mapping[str, str]:
    """Every registered alias and the family it names (read-only)."""
    _ready()
    return MappingProxyType(_ALIASES)


def families() -> Mapping[str, ModelFamily]:
    """Every registered family by name, in registration order (read-only)."""
    _ready()
    return MappingProxyType(_FAMILIES)


def get_family(name: str) -> ModelFamily:
    """The family called ``name`` (or an alias of it); ValueError listing the known ones otherwise."""
    _ready()
    found = _FAMILIES.get(canonical_family(name))
    if found is None:
        raise ValueError(f"unknown model family {name!r}; valid: {', '.join(_FAMILIES) or 'none registered'}")
    return found


def live_family(name: str) -> ModelFamily:
    """The family of ``name`` if the live runner can train it; ValueError (one line) otherwise."""
    family = get_family(name)
    if family.live is None:
        raise ValueError(f"model family {family.name!r} has no live model builder: it runs in the simulator only")
    return family
