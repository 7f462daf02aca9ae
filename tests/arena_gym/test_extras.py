"""A command that needs a package an optional extra provides names the package and the install command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from arena_gym.extras import install_hint

#: Runs the command line with ``torch`` and ``stable_baselines3`` unimportable, as after the core install.
WITHOUT_EXTRAS = (
    "import sys; sys.modules['torch'] = None; sys.modules['stable_baselines3'] = None; "
    "from arena_gym.harness.cli import main; sys.exit(main(sys.argv[1:]))"
)


def test_install_hint_names_the_extra_of_a_package_and_nothing_for_others() -> None:
    assert install_hint("torch.distributed") == (
        "torch, which is not installed: pip install 'arena-gym[runner]' (in a clone: pip install -e '.[runner]')"
    )
    assert "arena-gym[rl]" in str(install_hint("stable_baselines3")) and "arena-gym[tune]" in str(
        install_hint("optuna")
    )
    assert install_hint("numpy") is None and install_hint("my_plugin") is None


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "command, needs",
    [
        (
            ["train"],
            "stable_baselines3, which is not installed: pip install 'arena-gym[rl]'",
        ),
        (
            ["deploy", "--policy", "fcfs", "--testbed", "cpu-1"],
            "torch, which is not installed: pip install 'arena-gym[runner]'",
        ),
    ],
)
def test_a_command_without_its_extra_is_one_line_naming_the_install_command(tmp_path, command, needs) -> None:
    run = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, *command, "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=110,
        env={"OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 2, run.stderr
    [line] = [x for x in run.stderr.splitlines() if not x.startswith("INFO")]
    assert line.startswith(f"arena-gym {command[0]}: error: ") and needs in line
    assert not (tmp_path / "out").exists()
