"""Registries of policies, performance models and traces: names resolved lazily to ``"module:attr"`` targets.

A spec given to :meth:`Registry.make` is, in this order:

1. a registered name (``arena``, ``estimator``; :meth:`Registry.register` adds one);
2. a ``prefix:ARGUMENT`` handler (``sb3:PATH``, ``measured:CSV``);
3. the name of an entry point in the registry's group, which installed packages declare in
   their ``pyproject.toml`` (``[project.entry-points."arena_gym.policies"]``, ``"arena_gym.perf_models"``,
   ``"arena_gym.traces"``);
4. any importable ``module:attr`` (``mypkg.mymodule:MyPolicy``).

The registries live at module level, so a ``register`` call is seen by every later ``make``.
Nothing is imported until a name is used: the core never imports the packages above it.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from arena_gym.safe_points import signals_held

if TYPE_CHECKING:  # the types only: the command line imports this module before numpy
    from arena_gym.protocols import Policy
    from arena_gym.types import ClusterSpec, PerfModel

#: ``package.module:attr`` (dotted names on both sides).
_MODULE_ATTR = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def resolve(target: str) -> Any:
    """Import ``"package.module:attr"`` and return the attribute."""
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"registry target {target!r} is not of the form 'module:attr'")
    if module in sys.modules:
        obj: Any = sys.modules[module]
    else:
        with signals_held():  # an extension's initialisation stopped by Ctrl-C aborts the process (pybind11)
            obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def is_module_attr(spec: str) -> bool:
    """Whether ``spec`` has the form ``package.module:attr``."""
    return _MODULE_ATTR.fullmatch(spec) is not None


@dataclass(frozen=True)
class Entry:
    """One registered name: its target (``module:attr``), default keyword arguments and a one-line description."""

    target: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class Prefix:
    """A registered ``prefix:ARGUMENT`` handler: its target (``module:attr``) and the argument's name in help."""

    target: str
    argument: str


class Registry:
    """Names -> :class:`Entry`, plus prefix handlers, an entry-point group and ``module:attr`` specs.

    ``group`` is the entry-point group searched for names that are not registered;
    ``name_param`` is the keyword through which a factory receives the name it is built under
    (policies take ``name``). The built-in names come from the installed catalogues
    (:data:`CATALOGUE_GROUP`), loaded before the first lookup: the packages that own the
    objects declare them, so this module names no package above it.
    """

    def __init__(
        self,
        kind: str,
        entries: Mapping[str, Entry] | None = None,
        prefixes: Mapping[str, str] | None = None,
        *,
        group: str | None = None,
        name_param: str | None = None,
        arguments: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.group = group
        self.name_param = name_param
        self._entries = dict(entries or {})
        self._prefixes = dict(prefixes or {})
        self._arguments = {p: (arguments or {}).get(p, "ARG") for p in self._prefixes}
        self._catalogues: int | None = None

    def _ready(self) -> None:
        """Load the installed catalogues once, before the first lookup or registration."""
        if self._catalogues is None:
            self._catalogues = 0
            self._catalogues = load_catalogues()

    @property
    def entries(self) -> Mapping[str, Entry]:
        """A read-only view of the registered names."""
        self._ready()
        return MappingProxyType(self._entries)

    def names(self) -> list[str]:
        """Registered names and the names of installed entry points, sorted."""
        self._ready()
        return sorted({*self._entries, *self._entry_points()})

    def prefixes(self) -> dict[str, Prefix]:
        """Every registered prefix (sorted) -> its handler and the name of its argument (``sb3`` -> ``PATH``)."""
        self._ready()
        return {p: Prefix(self._prefixes[p], self._arguments[p]) for p in sorted(self._prefixes)}

    def register_prefix(self, prefix: str, target: str, argument: str = "ARG") -> None:
        """Resolve ``prefix:ARGUMENT`` specs with ``target`` (``"module:attr"``, called with ``path=ARGUMENT``);
        ``argument`` names the argument in help (``PATH``, ``CSV``)."""
        if not prefix.isidentifier():
            raise ValueError(f"{self.kind} prefix {prefix!r} must be an identifier")
        if not is_module_attr(target):
            raise ValueError(f"{self.kind} prefix {prefix!r}: target {target!r} is not of the form 'module:attr'")
        old = self._prefixes.get(prefix)
        if old is not None and old != target:
            raise ValueError(f"{self.kind} prefix {prefix!r} is already registered ({old})")
        self._prefixes[prefix] = target
        self._arguments[prefix] = argument

    def register(
        self,
        name: str,
        target: str,
        kwargs: Mapping[str, Any] | None = None,
        description: str = "",
        *,
        replace: bool = False,
    ) -> None:
        """Register ``name`` for ``target`` (``"module:attr"``), built with the default keyword arguments ``kwargs``.

        Registering the same entry again is a no-op; a different entry under a taken name
        needs ``replace=True``. The target is imported only when the name is used.
        """
        self._ready()
        if not name or name != name.strip() or ":" in name:
            raise ValueError(f"{self.kind} name {name!r} must be non-empty, without ':' or surrounding spaces")
        if not isinstance(target, str) or not is_module_attr(target):
            raise ValueError(f"{self.kind} {name!r}: target {target!r} is not of the form 'module:attr'")
        entry = Entry(target, dict(kwargs or {}), description)
        old = self._entries.get(name)
        if old is not None and old != entry and not replace:
            raise ValueError(
                f"{self.kind} {name!r} is already registered ({old.target}); pass replace=True to change it"
            )
        self._entries[name] = entry

    def knows(self, spec: str) -> bool:
        """Whether :meth:`make` would resolve ``spec`` by a name, a prefix, an entry point or as ``module:attr``."""
        self._ready()
        prefix, sep, _ = spec.partition(":")
        return (
            spec in self._entries
            or bool(sep and prefix in self._prefixes)
            or is_module_attr(spec)
            or spec in self._entry_points()
        )

    def make(self, spec: str, **context: Any) -> Any:
        """Build the object ``spec`` stands for.

        ``context`` holds keyword arguments the caller offers (a seed, the cluster, ...): each is
        passed only if the factory's signature names it. The default keyword arguments of a
        registered entry are always passed, and one the factory does not accept is an error
        naming the valid ones (a factory with ``**kwargs`` checks them itself).
        """
        if not isinstance(spec, str):
            raise TypeError(f"{self.kind} spec must be a string, got {spec!r:.60}")
        self._ready()
        if self.name_param is not None:
            context = {self.name_param: spec, **context}
        entry = self._entries.get(spec)
        if entry is not None:
            return _call(self.kind, spec, _builtin(self.kind, spec, entry.target), entry.kwargs, context)
        prefix, sep, argument = spec.partition(":")
        if sep and prefix in self._prefixes:
            if not argument.strip():
                raise ValueError(f"{self.kind} spec {spec!r} needs an argument after '{prefix}:'")
            return _call(
                self.kind, spec, _builtin(self.kind, spec, self._prefixes[prefix]), {"path": argument}, context
            )
        found = self._entry_points().get(spec)
        if found is not None:
            return _call(self.kind, spec, found.load(), {}, context)
        if is_module_attr(spec):
            return _call(self.kind, spec, _import(self.kind, spec), {}, context)
        valid = ", ".join(self.names() + [f"{p}:..." for p in self._prefixes] + ["module:attr"])
        hint = "" if self._catalogues else " (no built-in names are installed: install arena-gym, pip install -e .)"
        raise ValueError(f"unknown {self.kind} {spec!r}; valid: {valid}{hint}")

    def _entry_points(self) -> dict[str, Any]:
        if self.group is None:
            return {}
        from importlib.metadata import entry_points  # only when a name is not registered

        return {ep.name: ep for ep in entry_points(group=self.group)}


#: The top-level packages of this distribution (generic names another distribution may also use).
OWN_PACKAGES = ("arena_gym", "agents", "envs", "estimator", "real_runner", "traces")


def shadowing_package(module: str) -> str | None:
    """Where the top-level package of ``module`` is found, when it is one of :data:`OWN_PACKAGES`
    but not this distribution's (another distribution's or a local ``agents.py`` earlier on sys.path)."""
    top = module.partition(".")[0]
    if top not in OWN_PACKAGES or top == "arena_gym":
        return None
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if found is None:
        return None
    ours = Path(__file__).resolve().parent.parent
    where = Path(found.origin) if found.origin else Path(next(iter(found.submodule_search_locations or []), ""))
    location = where.parent if where.name == "__init__.py" else where
    return None if location.resolve().parent == ours else str(location)


def own(target: str, what: str) -> Any:
    """Resolve ``module:attr`` of this distribution for ``what`` (a phrase naming the user's input); a one-line
    ValueError when a same-named package of another distribution, or a local file, shadows this one's (other
    import errors, e.g. a missing extra, propagate)."""
    try:
        return resolve(target)
    except (ImportError, AttributeError) as exc:
        module = target.partition(":")[0]
        other = shadowing_package(module)
        if other is None:
            raise
        top = module.partition(".")[0]
        raise ValueError(
            f"{what}: the {top!r} package imported is {other}, not arena-gym's; another "
            f"distribution or a local file named {top!r} comes first on sys.path ({exc})"
        ) from None


def load_catalogues() -> int:
    """Call every installed catalogue (:data:`CATALOGUE_GROUP`); each registers its package's built-in names.

    Returns how many were found (0 when the distribution's metadata is missing: not installed).
    """
    from importlib.metadata import entry_points

    found = entry_points(group=CATALOGUE_GROUP)
    for ep in found:
        own(ep.value, f"catalogue {ep.name!r}")()
    return len(found)


def _builtin(kind: str, spec: str, target: str) -> Any:
    """Resolve a built-in target of a registry (:func:`own`)."""
    return own(target, f"{kind} {spec!r}")


def _import(kind: str, spec: str) -> Any:
    """Resolve a user's ``module:attr`` spec; a one-line ValueError if it cannot be imported."""
    module, _, attr = spec.partition(":")
    try:
        return resolve(spec)
    except ModuleNotFoundError as exc:
        raise ValueError(f"{kind} {spec!r}: cannot import {module} ({exc})") from None
    except AttributeError:
        raise ValueError(f"{kind} {spec!r}: module {module} has no attribute {attr}") from None


def _call(
    kind: str, spec: str, factory: Callable[..., Any], defaults: Mapping[str, Any], context: Mapping[str, Any]
) -> Any:
    """``factory(**context it names, **defaults)``; defaults it cannot take are an error listing the valid ones."""
    if not callable(factory):
        raise ValueError(f"{kind} {spec!r} resolves to {factory!r:.60}, which is not callable")
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature to read (some builtins): pass only the defaults
        return factory(**defaults)
    named = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(set(defaults) - set(named))
        if unknown:
            raise ValueError(
                f"{kind} {spec!r}: unknown keyword argument(s) {', '.join(unknown)}; "
                f"valid: {', '.join(named) or 'none'}"
            )
    kwargs = {k: v for k, v in context.items() if k in named}
    kwargs.update(defaults)
    return factory(**kwargs)


#: Entry-point group of catalogues: ``name = "package.module:register"``, each a function that
#: registers a package's built-in names (policies, performance models, ...) with these registries.
CATALOGUE_GROUP = "arena_gym.catalogues"

#: The scheduling policies (``arena_gym.policies`` entry points; ``sb3:PATH`` loads a trained agent).
POLICIES = Registry("policy", group="arena_gym.policies", name_param="name")

#: Performance models (the estimator, ``measured:CSV``, ``profiled:PROFILE.json``, ``noisy:SIGMA``;
#: ``arena_gym.perf_models`` entry points).
PERF_MODELS = Registry(
    "performance model",
    prefixes={"noisy": "arena_gym.perf:noisy_perf_model"},
    group="arena_gym.perf_models",
    arguments={"noisy": "SIGMA"},
)

#: Traces beyond the built-in files and generators (``traces.resolve_trace``): registered names,
#: ``arena_gym.traces`` entry points and ``module:attr`` factories returning a ``traces.Trace`` or JobSpecs.
TRACES = Registry("trace", group="arena_gym.traces")


def policy_registry() -> Registry:
    """The registry of scheduling policies (module level: names registered here are seen everywhere)."""
    return POLICIES


def perf_registry() -> Registry:
    """The registry of performance models."""
    return PERF_MODELS


def trace_registry() -> Registry:
    """The registry of user traces (the built-in formats and generators are resolved by ``traces``)."""
    return TRACES


def make_perf(
    spec: str,
    cluster: ClusterSpec,
    seed: int = 0,
    truth: PerfModel | None = None,
    cache_dir: str | Path | None = None,
    models: Mapping[str, Any] | None = None,
) -> PerfModel:
    """Resolve a performance-model spec (``estimator``, ``measured:CSV``, ``noisy:SIGMA``, ``module:attr``, ...).

    ``truth`` is the base of wrappers (``noisy:``); ``cache_dir`` (where the estimator keeps its
    tables) and ``models`` (user-defined architectures by name) are offered to factories that
    take them.
    """
    model: PerfModel = PERF_MODELS.make(
        spec, cluster=cluster, seed=seed, base=truth, cache_dir=cache_dir, models=models
    )
    return model


def make_policy(spec: str, seed: int = 0) -> Policy:
    """Build a policy from its spec (a registered name, ``sb3:PATH``, an entry point or ``module:attr``).

    A plug-in needs only ``decide``: the other :class:`~arena_gym.protocols.Policy` members get defaults.

    Factories that take ``rng`` get their own generator, seeded from ``seed``.
    """
    import numpy as np

    from arena_gym.protocols import with_defaults

    return with_defaults(POLICIES.make(spec, rng=np.random.default_rng(np.random.SeedSequence([seed, 1]))), spec)
