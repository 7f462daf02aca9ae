"""arena_gym.harness.flags: the flag of a config field."""

from __future__ import annotations

import argparse

import pytest

from arena_gym.harness.cli import compare, evaluate, simulate
from arena_gym.harness.evaluate import EvalConfig
from arena_gym.harness.experiment import ScenarioOptions
from arena_gym.harness.flags import flag


def _flags(configure) -> set[str]:
    parser = argparse.ArgumentParser()
    configure(parser)
    return {s for action in parser._actions for s in action.option_strings}


@pytest.mark.parametrize(
    ("field", "expected"),
    [("window_jobs", "--window-jobs"), ("seed", "--seed"), ("round_s", "--round"), ("bounds", "--no-bounds")],
)
def test_a_field_names_its_flag(field: str, expected: str) -> None:
    assert flag(field) == expected


def test_every_evaluate_field_set_from_the_command_line_names_one_of_its_flags() -> None:
    # ledger: not a flag (the repository's ledger unless a caller names one); scenario: the options' own flags
    unset = {"ledger", "scenario"}
    assert {flag(f) for f in EvalConfig.__dataclass_fields__ if f not in unset} <= _flags(evaluate.configure)


@pytest.mark.parametrize("command", [compare, simulate, evaluate], ids=lambda c: c.__name__.rsplit(".", 1)[-1])
def test_every_scenario_option_is_a_flag_of_each_command(command) -> None:
    assert {flag(f) for f in ScenarioOptions.__dataclass_fields__} <= _flags(command.configure)
