"""`make run` compares compare's default policies: the Makefile holds no policy list of its own."""

from __future__ import annotations

import shlex
import shutil
import subprocess

import pytest

from arena_gym.harness.cli import build_parser
from arena_gym.harness.cli.compare import DEFAULT_POLICIES
from tests.conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _run_command(*overrides: str) -> list[str]:
    """The compare command `make -n run` would execute (the venv is not built: -n only prints)."""
    dry = subprocess.run(
        ["make", "-n", "-s", "-C", str(REPO), "run", *overrides], capture_output=True, text=True, check=True
    ).stdout
    lines = [shlex.split(line) for line in dry.splitlines() if " compare " in line]
    assert len(lines) == 1, dry
    return lines[0][lines[0].index("compare") :]


def test_the_makefile_names_no_policies() -> None:
    make = (REPO / "Makefile").read_text()
    assert not any(name in make for name in DEFAULT_POLICIES if name != "arena")
    assert "POLICIES ?=" not in make and "POLICIES :=" not in make


def test_make_run_compares_the_cli_default_policies() -> None:
    argv = _run_command()
    assert "--policies" not in argv
    assert build_parser(argv).parse_args(argv).policies == DEFAULT_POLICIES


def test_make_run_can_run_again_into_its_own_results() -> None:
    argv = _run_command()
    assert build_parser(argv).parse_args(argv).replace  # a second `make run` replaces the first one's comparison


def test_make_run_policies_overrides_the_default() -> None:
    argv = _run_command("POLICIES=fcfs,arena")
    assert build_parser(argv).parse_args(argv).policies == ("fcfs", "arena")
