"""One configuration path for every policy: a frozen config dataclass, with keyword overrides applied on top."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

C = TypeVar("C")


def configure(owner: str, config_type: type[C], config: C | None, overrides: Mapping[str, Any]) -> C:
    """``config`` (default: ``config_type()``) with ``overrides`` applied through :func:`dataclasses.replace`.

    An override that names no field of ``config_type`` raises a one-line ValueError naming
    the valid fields, so a typo never falls back to a default silently.
    """
    base = config_type() if config is None else config
    if not isinstance(base, config_type):
        raise ValueError(f"{owner}: config must be a {config_type.__name__}, got {type(base).__name__}")
    valid = [f.name for f in dataclasses.fields(base) if f.init]  # type: ignore[arg-type]
    unknown = sorted(set(overrides) - set(valid))
    if unknown:
        raise ValueError(f"{owner}: unknown setting(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    return dataclasses.replace(base, **overrides) if overrides else base  # type: ignore[type-var]
