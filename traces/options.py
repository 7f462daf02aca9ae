"""``key=value,key=value`` option strings (trace specs), typed by annotations.

Values are converted by the target's type hints with :func:`arena_gym.fields.from_text`
(tuples are items joined with ``+``, e.g. ``gpu_types=a40+a10``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from arena_gym.fields import from_text


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
            out[key] = from_text(text, hints[key])
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
