"""arena_gym.fields: values checked and read against annotations."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NewType

import numpy as np
import pytest

from arena_gym.fields import (
    FieldError,
    Problems,
    build,
    check,
    check_fields,
    describe,
    fits,
    from_text,
    hints_of,
    read_fields,
    short,
)

JobName = NewType("JobName", str)


@pytest.mark.parametrize(
    ("value", "hint", "expected"),
    [
        (3, int, 3),
        (np.int64(3), int, 3),
        (3, float, 3.0),
        (2.5, float, 2.5),
        ("a", str, "a"),
        (False, bool, False),
        (None, int | None, None),
        (4, int | None, 4),
        ([1, 2], tuple[int, ...], (1, 2)),
        ((1, 2.5, 3), tuple[float, float, float], (1.0, 2.5, 3.0)),
        ("x", str | tuple[str, ...], "x"),
        (["x", "y"], str | tuple[str, ...], ("x", "y")),
        ("fifo", Literal["fifo", "las"], "fifo"),
        ({"a": 1}, Mapping[str, Any], {"a": 1}),
        ({"a": 1}, Mapping[str, float], {"a": 1.0}),
        ("j1", JobName, "j1"),
        ([1, "a"], list[Any], [1, "a"]),
    ],
)
def test_check_returns_the_value_in_the_hints_form(value: Any, hint: Any, expected: Any) -> None:
    got = check(value, hint)
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    ("value", "hint", "message"),
    [
        (True, int, "x must be an integer, got True"),
        (1.5, int, "x must be an integer, got 1.5"),
        ("1", float, "x must be a number, got '1'"),
        (False, float, "x must be a number, got False"),
        (1, bool, "x must be true or false, got 1"),
        (None, str, "x must be a string, got None"),
        ("a", int | None, "x must be None or an integer, got 'a'"),
        ([1, "a"], tuple[int, ...], "x must be a tuple of integers, got \\[1, 'a'\\]"),
        ([1.0, 2.0], tuple[float, float, float], "x must be a tuple of 3 numbers"),
        ("lifo", Literal["fifo", "las"], "x must be one of fifo, las, got 'lifo'"),
        ([], Mapping[str, Any], "x must be a mapping, got \\[\\]"),
        ({1: 2}, Mapping[str, Any], "x must be a mapping"),
        (3, str | tuple[str, ...], "x must be a string or a tuple of strings, got 3"),
    ],
)
def test_check_refuses_with_one_line_saying_what_it_must_be(value: Any, hint: Any, message: str) -> None:
    with pytest.raises(FieldError, match=message) as info:
        check(value, hint, "x")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


def test_check_of_a_class_is_isinstance() -> None:
    class Spec:
        pass

    spec = Spec()
    assert check(spec, str | Spec) is spec
    assert describe(str | Spec) == "a string or a Spec"
    with pytest.raises(FieldError, match="must be a Spec, got 3"):
        check(3, Spec)


@pytest.mark.parametrize(
    ("text", "hint", "expected"),
    [
        ("8", int, 8),
        ("1e3", int, 1000),
        ("0.5", float, 0.5),
        ("yes", bool, True),
        ("Off", bool, False),
        ("none", int | None, None),
        ("", float | None, None),
        ("3", int | None, 3),
        ("a40+a10", tuple[str, ...], ("a40", "a10")),
        ("1+2", tuple[int, ...], (1, 2)),
        ("las", Literal["fifo", "las"], "las"),
        ("text", str, "text"),
    ],
)
def test_from_text_converts_by_the_hint(text: str, hint: Any, expected: Any) -> None:
    got = from_text(text, hint)
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    ("text", "hint", "message"),
    [
        ("1.5", int, "expected an integer"),
        ("x", float, "expected a number"),
        ("maybe", bool, "expected true or false"),
        ("+", tuple[str, ...], "expected items joined with '\\+'"),
        ("lifo", Literal["fifo", "las"], "expected one of fifo, las"),
        ("x", dict[str, int], "cannot be set from text"),
    ],
)
def test_from_text_refuses_with_what_was_expected(text: str, hint: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        from_text(text, hint)


@dataclass(frozen=True)
class _Config:
    name: str
    sizes: tuple[int, ...] = (1,)
    rate: float = 1.0
    note: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)


def test_check_fields_normalises_and_names_the_class_and_field() -> None:
    config = _Config("a", [2, 3], 2)  # type: ignore[arg-type]
    assert config.sizes == (2, 3) and config.rate == 2.0 and isinstance(config.rate, float)
    with pytest.raises(FieldError, match="^_Config.sizes must be a tuple of integers, got \\[1.5\\]$"):
        _Config("a", [1.5])  # type: ignore[list-item]
    with pytest.raises(FieldError, match="^_Config.note must be None or a string, got 3$"):
        _Config("a", note=3)  # type: ignore[arg-type]


def test_build_reads_an_object_and_lists_unknown_and_missing_keys() -> None:
    config = build(_Config, {"name": "a", "sizes": [4], "rate": 3}, "cfg")
    assert config == _Config("a", (4,), 3.0)
    with pytest.raises(
        FieldError, match="^cfg: unknown field\\(s\\) bad, worse; valid: name, sizes, rate, note, extra$"
    ):
        build(_Config, {"name": "a", "worse": 1, "bad": 2}, "cfg")
    with pytest.raises(FieldError, match="^cfg: missing field\\(s\\) name$"):
        build(_Config, {"rate": 1.0}, "cfg")
    with pytest.raises(FieldError, match="^cfg: rate must be a number, got 'x'$"):
        build(_Config, {"name": "a", "rate": "x"}, "cfg")
    with pytest.raises(FieldError, match="^cfg must be an object, got \\[\\]$"):
        build(_Config, [], "cfg")


def test_build_uses_a_reader_for_a_field_in_place_of_the_check() -> None:
    config = build(_Config, {"name": "a", "sizes": "1,2"}, "cfg", {"sizes": lambda v: tuple(map(int, v.split(",")))})
    assert config.sizes == (1, 2)


def test_build_require_names_a_defaulted_field_the_file_must_give() -> None:
    assert build(_Config, {"name": "a", "rate": 2}, "cfg", require=("rate",)).rate == 2.0
    with pytest.raises(FieldError, match="^cfg: missing field\\(s\\) rate$"):
        build(_Config, {"name": "a"}, "cfg", require=("rate",))


def test_read_fields_reads_a_section_holding_some_fields() -> None:
    assert read_fields(_Config, {"rate": 2}, "sec", names=("rate", "note")) == {"rate": 2.0}
    with pytest.raises(FieldError, match="^sec: unknown field\\(s\\) name; valid: rate, note$"):
        read_fields(_Config, {"name": "a"}, "sec", names=("rate", "note"))


@pytest.mark.parametrize(
    ("value", "as_repr", "as_json"),
    [
        (True, "True", "true"),
        (None, "None", "null"),
        (float("nan"), "nan", "NaN"),
        (1e30, "1e+30", "1e+30"),
        ("2", "'2'", '"2"'),
        ("\u00e040", "'\u00e040'", '"\\u00e040"'),
        ([1], "[1]", "list"),
        ({"x": 1}, "{'x': 1}", "dict"),
    ],
)
def test_short_spells_a_value_as_python_or_as_json(value: Any, as_repr: str, as_json: str) -> None:
    assert (short(value), short(value, as_json=True)) == (as_repr, as_json)


def test_short_cuts_to_the_limit() -> None:
    assert short("x" * 100, 10) == "'xxxxxx..." and short("x" * 100, 10, as_json=True) == '"xxxxxx...'


def test_hints_of_resolves_string_annotations_per_class() -> None:
    assert hints_of(_Config)["sizes"] == tuple[int, ...]
    assert hints_of(_Config) is hints_of(_Config)


def test_fits_is_check_without_the_error() -> None:
    assert fits(3, int) and not fits(True, int) and fits([1.5], list[float]) and not fits("1", float)


def test_problems_names_every_problem_on_one_line_after_its_owner() -> None:
    problems = Problems()
    assert problems.require(True, "never recorded") and problems.check("fifo", Literal["fifo", "las"], "order")
    assert not problems.require(False, "n must be >= 1, got 0")
    assert not problems.check("random", Literal["fifo", "las"], "order")
    problems.add("seed must be >= 0, got -1")
    problems.extend(["a", "b"])
    assert list(problems) == [
        "n must be >= 1, got 0",
        "order must be one of fifo, las, got 'random'",
        "seed must be >= 0, got -1",
        "a",
        "b",
    ]
    assert len(problems) == 5 and str(problems) == "; ".join(problems)
    with pytest.raises(ValueError, match="^Cfg: n must be >= 1, got 0; order must be one of fifo, las, got 'random'; "):
        problems.raise_if_any("Cfg")
    with pytest.raises(ValueError, match="^n must be >= 1"):
        problems.raise_if_any()


def test_problems_without_a_problem_raise_nothing() -> None:
    problems = Problems()
    problems.extend([])
    assert not problems and str(problems) == ""
    problems.raise_if_any("Cfg")
