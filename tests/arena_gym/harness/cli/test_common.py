"""The shared option parsers: KEY=VALUE pairs of a repeated option; text read by a text type."""

from __future__ import annotations

import argparse
import math

import pytest

from arena_gym.harness.cli.common import (
    finite_nonnegative_float,
    finite_positive_float,
    key_values,
    positive_float,
    seed_int,
    text_type,
)


def test_pairs_are_stripped_and_each_value_parsed_with_its_key() -> None:
    got = key_values([" lr = 0.1", "name=x=y"], "--set", lambda key, value: (key, value))
    assert got == {"lr": ("lr", "0.1"), "name": ("name", "x=y")}
    assert key_values(["a=1", "a=2"], "--set", lambda _k, v: int(v)) == {"a": 2}  # the last one wins


@pytest.mark.parametrize("pair", ["nothing", "=1", " =1"])
def test_a_pair_without_a_key_names_the_flag_and_the_pair(pair: str) -> None:
    with pytest.raises(ValueError, match=rf"^--env-arg: '{pair}' is not KEY=VALUE$"):
        key_values([pair], "--env-arg", lambda _k, v: v)


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [
        (seed_int, "8", 8),
        (seed_int, "8.0", 8),  # fields.from_text's rule: an integral number is an integer
        (seed_int, "1e3", 1000),
        (positive_float, "inf", math.inf),
        (finite_nonnegative_float, "0", 0.0),
        (text_type(tuple[int, ...], 0, 9), " 1, 2,,3 ", (1, 2, 3)),
        (text_type(tuple[str, ...]), "fcfs, srtf", ("fcfs", "srtf")),
        (text_type(tuple[float, ...], above=0, finite=True), "0.5,2", (0.5, 2.0)),
    ],
)
def test_a_text_type_reads_the_text_as_fields_from_text_does(parse, text: str, value) -> None:
    assert parse(text) == value and type(parse(text)) is type(value)


def _odd(value: int) -> int:
    if value % 2 == 0:
        raise ValueError(f"{value} is not odd")
    return value


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        (seed_int, "2.5", "not an integer: '2.5'"),
        (seed_int, "true", "not an integer: 'true'"),
        (seed_int, "nan", "not an integer: 'nan'"),
        (seed_int, "-1", "must be in 0..4294967295: '-1'"),
        (positive_float, "soon", "not a number: 'soon'"),
        (positive_float, "0", "must be > 0: '0'"),
        (finite_positive_float, "inf", "must be finite and > 0: 'inf'"),
        (finite_nonnegative_float, "-1", "must be finite and >= 0: '-1'"),
        (text_type(int, 1), "0", "must be >= 1: '0'"),
        (text_type(tuple[int, ...]), "1,x", "not comma-separated integers: '1,x'"),
        (text_type(tuple[str, ...]), " , ", "not comma-separated strings: ' , '"),
        (text_type(tuple[float, ...], above=0, finite=True), "0.5,-1", "must be finite and > 0: '-1'"),
        (text_type(int, check=_odd), "4", "4 is not odd"),
    ],
)
def test_a_text_type_refuses_bad_text_with_one_line(parse, text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as err:
        parse(text)
    assert str(err.value) == message
