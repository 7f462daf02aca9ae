"""arena_gym.harness.flags: the flag of a config field."""

from __future__ import annotations

import argparse

import pytest

from arena_gym.harness.cli.evaluate import configure
from arena_gym.harness.evaluate import EvalConfig
from arena_gym.harness.flags import flag


@pytest.mark.parametrize(
    ("field", "expected"),
    [("window_jobs", "--window-jobs"), ("seed", "--seed"), ("round_s", "--round"), ("bounds", "--no-bounds")],
)
def test_a_field_names_its_flag(field: str, expected: str) -> None:
    assert flag(field) == expected


def test_every_evaluate_field_set_from_the_command_line_names_one_of_its_flags() -> None:
    parser = argparse.ArgumentParser()
    configure(parser)
    flags = {s for action in parser._actions for s in action.option_strings}
    unset = {"ledger"}  # not a flag: the repository's ledger unless a caller names one
    assert {flag(f) for f in EvalConfig.__dataclass_fields__ if f not in unset} <= flags
