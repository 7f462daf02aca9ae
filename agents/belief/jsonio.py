"""A JSON reader with one-line errors naming the field's path, and a compact printer: what belief files are read and written with."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from arena_gym.fields import check, short


class JsonObject:
    """A JSON object read with type checks; errors name the field's path."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise ValueError(f"{where}: expected a JSON object, got {short(data)}")
        self.data: Mapping[str, Any] = data
        self.where = where

    def get(self, name: str, hint: Any) -> Any:
        """The field ``name``, checked against the type ``hint`` (:func:`arena_gym.fields.check`)."""
        if name not in self.data:
            raise ValueError(f"{self.where}: missing {name!r}")
        return check(self.data[name], hint, f"{self.where}.{name}")

    def obj(self, name: str) -> JsonObject:
        """The field ``name`` as an object."""
        return JsonObject(self.get(name, dict), f"{self.where}.{name}")

    def objs(self, name: str) -> list[JsonObject]:
        """The field ``name`` as a list of objects."""
        return [JsonObject(v, f"{self.where}.{name}[{i}]") for i, v in enumerate(self.get(name, list))]

    def strings(self, name: str) -> list[str]:
        """The field ``name`` as a list of strings."""
        return self.get(name, list[str])

    def numbers(self, name: str) -> tuple[float, ...]:
        """The field ``name`` as a tuple of numbers."""
        return tuple(self.get(name, list[float]))


def dumps(value: Any, depth: int = 0) -> str:
    """JSON with objects and lists of containers indented, flat lists on one line."""
    pad, end = "  " * (depth + 1), "  " * depth
    if isinstance(value, dict) and value:
        body = ",\n".join(f"{pad}{json.dumps(k)}: {dumps(v, depth + 1)}" for k, v in value.items())
        return "{\n" + body + "\n" + end + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        return "[\n" + ",\n".join(pad + dumps(v, depth + 1) for v in value) + "\n" + end + "]"
    return json.dumps(value, allow_nan=False)
