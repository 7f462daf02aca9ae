"""``key=value,key=value`` option strings (trace specs), typed by annotations.

Values are converted by the target's type hints: ``int``, ``float``, ``str``, ``bool``
(true/false/1/0/yes/no), ``X | None`` (``none`` or an empty value = None) and
``tuple[str, ...]`` (items joined with ``+``, e.g. ``gpu_types=a40+a10``).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping, Sequence

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def parse_options(text: str, context: str) -> dict[str, str]:
    """Split ``k=v,k=v`` into a dict of raw strings; ValueError (one line) on a bad item."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{context}: option {item!r} is not key=value")
        key = key.strip()
        if key in out:
            raise ValueError(f"{context}: option {key!r} given twice")
        out[key] = value.strip()
    return out


def _convert(text: str, hint: object) -> object:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and text.lower() in ("", "none", "null"):
            return None
        others = [a for a in args if a is not type(None)]
        errors = []
        for other in others:
            try:
                return _convert(text, other)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors))
    if origin is tuple:
        items = tuple(p.strip() for p in text.split("+") if p.strip())
        if not items:
            raise ValueError("expected items joined with '+'")
        return tuple(_convert(p, args[0]) for p in items) if args else items
    if origin is typing.Literal:
        if text not in args:
            raise ValueError(f"expected one of {', '.join(map(str, args))}")
        return text
    if hint is bool:
        low = text.lower()
        if low in _TRUE | _FALSE:
            return low in _TRUE
        raise ValueError("expected true or false")
    if hint is int:
        try:
            value = float(text)
        except ValueError:
            raise ValueError("expected an integer") from None
        if not value.is_integer():
            raise ValueError("expected an integer")
        return int(value)
    if hint is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    if hint is str:
        return text
    raise ValueError(f"cannot be set from text (type {hint})")


def coerce_options(
    raw: Mapping[str, str], hints: Mapping[str, object], context: str, also_valid: Sequence[str] = ()
) -> dict[str, object]:
    """Convert raw option strings with ``hints``; ValueError naming the key (and valid keys).

    ``also_valid`` only adds to the list of valid keys in the message (keys handled elsewhere).
    """
    out: dict[str, object] = {}
    for key, text in raw.items():
        if key not in hints:
            valid = ", ".join([*hints, *also_valid])
            raise ValueError(f"{context}: unknown key {key!r}; valid keys: {valid}")
        try:
            out[key] = _convert(text, hints[key])
        except ValueError as exc:
            raise ValueError(f"{context}: bad value {text!r} for {key!r}: {exc}") from None
    return out


def format_value(value: object) -> str:
    """Inverse of the conversion: tuples joined with ``+``, None as ``none``."""
    if value is None:
        return "none"
    if isinstance(value, tuple):
        return "+".join(map(str, value))
    return str(value)
