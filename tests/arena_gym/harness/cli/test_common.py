"""The shared option parsers: KEY=VALUE pairs of a repeated option."""

from __future__ import annotations

import pytest

from arena_gym.harness.cli.common import key_values


def test_pairs_are_stripped_and_each_value_parsed_with_its_key() -> None:
    got = key_values([" lr = 0.1", "name=x=y"], "--set", lambda key, value: (key, value))
    assert got == {"lr": ("lr", "0.1"), "name": ("name", "x=y")}
    assert key_values(["a=1", "a=2"], "--set", lambda _k, v: int(v)) == {"a": 2}  # the last one wins


@pytest.mark.parametrize("pair", ["nothing", "=1", " =1"])
def test_a_pair_without_a_key_names_the_flag_and_the_pair(pair: str) -> None:
    with pytest.raises(ValueError, match=rf"^--env-arg: '{pair}' is not KEY=VALUE$"):
        key_values([pair], "--env-arg", lambda _k, v: v)
