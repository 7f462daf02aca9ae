"""A JSON reader with one-line errors naming the field's path, and a compact printer: what belief files are read and written with."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def is_int(v: Any) -> bool:
    """An int that is not a bool."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def short(value: Any) -> str:
    """A value's repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class JsonObject:
    """A JSON object read with type checks; errors name the field's path."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a JSON object, got {short(data)}")
        self.data: Mapping[str, Any] = data
        self.where = where

    def get(self, name: str, kind: type) -> Any:
        """The field ``name``, which must be of ``kind`` (int, float, str, list, dict)."""
        if name not in self.data:
            raise ValueError(f"{self.where}: missing {name!r}")
        value = self.data[name]
        ok = {int: is_int, float: is_number}.get(kind, lambda v: isinstance(v, kind))(value)
        if not ok:
            raise ValueError(f"{self.where}.{name}: expected {kind.__name__}, got {short(value)}")
        return float(value) if kind is float else value

    def obj(self, name: str) -> JsonObject:
        """The field ``name`` as an object."""
        return JsonObject(self.get(name, dict), f"{self.where}.{name}")

    def objs(self, name: str) -> list[JsonObject]:
        """The field ``name`` as a list of objects."""
        return [JsonObject(v, f"{self.where}.{name}[{i}]") for i, v in enumerate(self.get(name, list))]

    def strings(self, name: str) -> list[str]:
        """The field ``name`` as a list of strings."""
        values = self.get(name, list)
        if not all(isinstance(v, str) for v in values):
            raise ValueError(f"{self.where}.{name}: expected a list of strings, got {short(values)}")
        return values

    def numbers(self, name: str) -> tuple[float, ...]:
        """The field ``name`` as a tuple of numbers."""
        values = self.get(name, list)
        if not all(is_number(v) for v in values):
            raise ValueError(f"{self.where}.{name}: expected a list of numbers, got {short(values)}")
        return tuple(float(v) for v in values)


def dumps(value: Any, depth: int = 0) -> str:
    """JSON with objects and lists of containers indented, flat lists on one line."""
    pad, end = "  " * (depth + 1), "  " * depth
    if isinstance(value, dict) and value:
        body = ",\n".join(f"{pad}{json.dumps(k)}: {dumps(v, depth + 1)}" for k, v in value.items())
        return "{\n" + body + "\n" + end + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(pad + dumps(v, depth + 1) for v in value) + "\n" + end + "]"
    return json.dumps(value, allow_nan=False)
