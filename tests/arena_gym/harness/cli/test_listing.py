"""``arena-gym list`` and the commands' help name every registered policy, prefix, model, cluster and target."""

from __future__ import annotations

import pytest

from arena_gym.cluster import PRESETS
from arena_gym.harness.cli import main
from arena_gym.harness.names import prefixed, sections
from arena_gym.harness.tune import TUNE_TARGETS
from arena_gym.registry import perf_registry, policy_registry


def _help(capsys: pytest.CaptureFixture[str], command: str) -> str:
    assert main([command, "--help"]) == 0
    return capsys.readouterr().out


def test_list_prints_every_name_of_every_section(capsys) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for section in sections():
        assert f"{section.title}:" in out
        assert all(f"  {name} " in out for name in section.names())
    assert main(["list", "--markdown"]) == 0
    assert "- `sb3:PATH`" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["simulate", "compare", "evaluate", "deploy"])
def test_a_commands_help_names_every_policy_and_prefix(capsys, command: str) -> None:
    shown = _help(capsys, command)
    missing = [n for n in [*policy_registry().names(), *prefixed(policy_registry())] if n not in shown]
    assert not missing


@pytest.mark.parametrize("command", ["simulate", "compare", "deploy"])
def test_perf_help_names_every_model_and_prefix(capsys, command: str) -> None:
    shown = _help(capsys, command).split("--perf PERF", 1)[1]
    missing = [n for n in [*perf_registry().names(), *prefixed(perf_registry())] if n not in shown]
    assert not missing


def test_cluster_and_tune_help_name_every_preset_and_target(capsys) -> None:
    assert all(name in _help(capsys, "simulate") for name in PRESETS)
    shown = _help(capsys, "tune")
    assert all(f"{name}," in shown or f"{name} " in shown for name in TUNE_TARGETS) and "ppo" in shown
