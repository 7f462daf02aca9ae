"""Values checked and read against type annotations: the one check of configs, files and text options.

:func:`check` takes a Python or JSON value and a type hint and returns the value in the hint's
form (an ``int`` that is not a bool, a ``float`` from any real number, a ``tuple`` from a list or
tuple, ``X | None``, ``Literal[...]``, ``Mapping[K, V]``, classes by ``isinstance``), or raises a
:class:`FieldError` whose one line says what the value must be. :func:`from_text` does the same
from option text (``key=value`` specs, command-line values). :func:`check_fields` checks every
field of a dataclass in its ``__post_init__``; :func:`build` reads a dataclass from a JSON object,
listing unknown and missing keys (:func:`read_fields`, a section of one). :class:`Problems` collects
the problems of a config's meaning (ranges, combinations) so that one error names them all.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import numbers
import types
import typing
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})
_NONE_TEXT = frozenset({"", "none", "null"})
_PLURAL = {bool: "bools", int: "integers", float: "numbers", str: "strings"}
_SINGULAR = {bool: "true or false", int: "an integer", float: "a number", str: "a string", type(None): "None"}


class FieldError(TypeError, ValueError):
    """A value that does not fit its annotation (a TypeError and a ValueError, so either may be caught)."""


def short(value: Any, limit: int = 60, *, as_json: bool = False) -> str:
    """A value's repr, cut to ``limit`` characters; ``as_json``: a scalar as JSON spells it (``true``, ``null``,
    ``NaN``, ``"2"``: as a file gave it), a container by its kind (``list``, ``dict``)."""
    if as_json:
        scalar = isinstance(value, (bool, int, float, str)) or value is None
        text = json.dumps(value) if scalar else type(value).__name__
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(hint: Any) -> str:
    """What a value of ``hint`` must be, in words (``an integer``, ``None or a string``, ...)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint in _SINGULAR:
        return _SINGULAR[hint]
    if hint is None:
        return "None"
    if origin in (typing.Union, types.UnionType):
        words = [describe(a) for a in sorted(args, key=lambda a: a is not type(None))]
        return ", ".join(words[:-1]) + " or " + words[-1]
    if origin is typing.Literal:
        return "one of " + ", ".join(map(str, args))
    if origin is tuple:
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            item = args[0] if args else Any
            return f"a tuple of {_PLURAL.get(item, describe(item) + ' items')}"
        if len(set(args)) == 1:
            return f"a tuple of {len(args)} {_PLURAL.get(args[0], describe(args[0]) + ' items')}"
        return f"a tuple ({', '.join(describe(a) for a in args)})"
    if origin is list:
        item = args[0] if args else Any
        return f"a list of {_PLURAL.get(item, describe(item) + ' items')}"
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        return "a mapping"
    if hint is Any or hint is object:
        return "any value"
    return f"a {getattr(hint, '__name__', str(hint))}"


def check(value: Any, hint: Any, where: str = "value") -> Any:
    """``value`` in the form of ``hint``; :class:`FieldError` ``"<where> must be <what>, got <value>"``."""
    try:
        return _check(value, hint)
    except _Mismatch:
        raise FieldError(f"{where} must be {describe(hint)}, got {short(value)}") from None


def fits(value: Any, hint: Any) -> bool:
    """Whether :func:`check` accepts ``value`` for ``hint`` (an int for ``int`` is never a bool)."""
    try:
        _check(value, hint)
    except _Mismatch:
        return False
    return True


class Problems:
    """The problems of a config, collected so that one ValueError names them all: ``"<owner>: <p1>; <p2>"``.

    :meth:`require` records a message unless its condition holds, :meth:`check` the message of
    :func:`check` unless a value fits its hint; :meth:`raise_if_any` raises what was recorded.
    """

    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, message: str) -> None:
        """Record one problem."""
        self.messages.append(message)

    def extend(self, messages: Iterable[str]) -> None:
        """Record several problems (another collector's, say)."""
        self.messages.extend(messages)

    def require(self, condition: bool, message: str) -> bool:
        """Record ``message`` unless ``condition`` holds; returns ``condition`` (for checks that need it)."""
        if not condition:
            self.messages.append(message)
        return condition

    def check(self, value: Any, hint: Any, where: str) -> bool:
        """Record :func:`check`'s ``"<where> must be <what>, got <value>"`` unless ``value`` fits ``hint``; whether it fits."""
        ok = fits(value, hint)
        if not ok:
            self.messages.append(f"{where} must be {describe(hint)}, got {short(value)}")
        return ok

    def raise_if_any(self, owner: str = "") -> None:
        """ValueError ``"<owner>: <p1>; <p2>"`` (no prefix without ``owner``) when a problem was recorded."""
        if self.messages:
            raise ValueError((f"{owner}: " if owner else "") + str(self))

    def __str__(self) -> str:
        return "; ".join(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[str]:
        return iter(self.messages)


class _Mismatch(Exception):
    """Internal: the value does not fit (the outer :func:`check` words the message)."""


def _check(value: Any, hint: Any) -> Any:
    supertype = getattr(hint, "__supertype__", None)
    if supertype is not None:  # a NewType
        return _check(value, supertype)
    if hint is Any or hint is object:
        return value
    if hint is None or hint is type(None):
        if value is None:
            return None
        raise _Mismatch
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if hint is int:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        raise _Mismatch
    if hint is float:
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is None:
        if isinstance(hint, type) and isinstance(value, hint):
            return value
        raise _Mismatch
    return _check_generic(value, origin, args)


def _check_generic(value: Any, origin: Any, args: tuple[Any, ...]) -> Any:
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arg in args:
            try:
                return _check(value, arg)
            except _Mismatch:
                continue
        raise _Mismatch
    if origin is typing.Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
        raise _Mismatch
    if origin is tuple or origin is list:
        if not isinstance(value, (tuple, list)):
            raise _Mismatch
        if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            if len(value) != len(args):
                raise _Mismatch
            items = [_check(v, a) for v, a in zip(value, args)]
        else:
            items = [_check(v, args[0]) for v in value] if args else list(value)
        return tuple(items) if origin is tuple else items
    if isinstance(origin, type) and issubclass(origin, Mapping):
        if not isinstance(value, Mapping):
            raise _Mismatch
        if not args:
            return value
        checked = {_check(k, args[0]): _check(v, args[1]) for k, v in value.items()}
        unchanged = all(checked[k] is v for k, v in value.items() if k in checked)
        return value if unchanged and len(checked) == len(value) else checked
    if isinstance(origin, type) and isinstance(value, origin):
        return value
    raise _Mismatch


def from_text(text: str, hint: Any, sep: str = "+") -> Any:
    """``text`` converted to ``hint``: ``int``, ``float``, ``str``, ``bool`` (true/false/1/0/yes/no/on/off),
    ``X | None`` (``none``, ``null`` or empty = None), ``Literal[...]``, tuples (items joined with ``sep``)
    and ``Any`` (a JSON value, a float spelling such as ``nan``, or else the text itself).

    ValueError (one line) saying what was expected.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if type(None) in args and text.lower() in _NONE_TEXT:
            return None
        errors = []
        for other in (a for a in args if a is not type(None)):
            try:
                return from_text(text, other, sep)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError("; ".join(errors))
    if origin is tuple:
        items = tuple(p.strip() for p in text.split(sep) if p.strip())
        if not items:
            raise ValueError(f"expected items joined with {sep!r}")
        return tuple(from_text(p, args[0], sep) for p in items) if args else items
    if origin is typing.Literal:
        if text not in args:
            raise ValueError(f"expected one of {', '.join(map(str, args))}")
        return text
    reader = _TEXT_READERS.get(hint)
    if reader is None:
        raise ValueError(f"cannot be set from text (type {hint})")
    return reader(text)


def _any_text(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _bool_text(text: str) -> bool:
    low = text.lower()
    if low in _TRUE | _FALSE:
        return low in _TRUE
    raise ValueError("expected true or false")


def _int_text(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise ValueError("expected an integer") from None
    if not value.is_integer():
        raise ValueError("expected an integer")
    return int(value)


def _float_text(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError("expected a number") from None


_TEXT_READERS: Mapping[Any, Callable[[str], Any]] = {
    bool: _bool_text,
    int: _int_text,
    float: _float_text,
    str: str,
    Any: _any_text,
}


def hints_of(cls: type) -> Mapping[str, Any]:
    """The resolved type hints of a dataclass's fields (string annotations evaluated; cached per class)."""
    return _hints(typing.cast(Hashable, cls))


@functools.cache
def _hints(cls: Any) -> Mapping[str, Any]:
    hints = typing.get_type_hints(cls)
    return types.MappingProxyType({f.name: hints[f.name] for f in dataclasses.fields(cls)})


def check_fields(obj: Any, skip: Collection[str] = ()) -> None:
    """Check every field of the frozen dataclass ``obj`` against its annotation (for ``__post_init__``).

    Values are stored back in the annotation's form (a list given for a tuple becomes a tuple, an int
    for a float a float); :class:`FieldError` ``"<Class>.<field> must be <what>, got <value>"``.
    """
    name = type(obj).__name__
    for field_name, hint in hints_of(type(obj)).items():
        if field_name in skip:
            continue
        value = getattr(obj, field_name)
        checked = check(value, hint, f"{name}.{field_name}")
        if checked is not value:
            object.__setattr__(obj, field_name, checked)


def build(
    cls: type[T],
    data: Any,
    context: str,
    readers: Mapping[str, Callable[[Any], Any]] | None = None,
    *,
    require: Collection[str] = (),
) -> T:
    """A ``cls`` from the JSON object ``data``; :class:`FieldError` (one line, prefixed ``context``) on a
    non-object, unknown or missing keys or a value of the wrong type.

    ``readers`` maps a field to the function that reads its raw value (a nested record, say) in place of
    :func:`check`; ``require`` names fields the file must give although the class has a default. The
    dataclass's own ``__post_init__`` checks the values' meaning.
    """
    return cls(**read_fields(cls, data, context, readers, require=require))


def read_fields(
    cls: type,
    data: Any,
    context: str,
    readers: Mapping[str, Callable[[Any], Any]] | None = None,
    *,
    names: Collection[str] | None = None,
    require: Collection[str] = (),
) -> dict[str, Any]:
    """The checked keyword arguments of ``cls`` that the JSON object ``data`` gives (errors as :func:`build`).

    ``names`` limits the fields ``data`` may give (a section of a file holding some of them; default all).
    """
    if not isinstance(data, Mapping):
        raise FieldError(f"{context} must be an object, got {short(data)}")
    fields = {f.name: f for f in dataclasses.fields(cls) if names is None or f.name in names}
    unknown = sorted(str(k) for k in set(data) - set(fields))
    if unknown:
        raise FieldError(f"{context}: unknown field(s) {', '.join(unknown)}; valid: {', '.join(fields)}")
    missing = [n for n, f in fields.items() if (_required(f) or n in require) and n not in data]
    if missing:
        raise FieldError(f"{context}: missing field(s) {', '.join(missing)}")
    hints, readers = hints_of(cls), readers or {}
    return {
        name: readers[name](value) if name in readers else check(value, hints[name], f"{context}: {name}")
        for name, value in data.items()
    }


def _required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
