"""The command line imports only what the chosen command needs (fast start-up)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "stable_baselines3", "sb3_contrib", "matplotlib", "wandb", "scipy", "pandas", "ray")


def _imported_after(code: str) -> set[str]:
    """Top-level heavy modules present in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint('LOADED:', *sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    last = out.stdout.splitlines()[-1]  # after whatever the command printed
    assert last.startswith("LOADED:"), out.stdout
    return set(last.split()[1:])


def test_top_level_parser_imports_no_command_module() -> None:
    loaded = _imported_after("from arena_gym.harness.cli import build_parser\nbuild_parser(['--help'])")
    assert loaded == set()


def test_the_full_parser_imports_no_torch_sb3_matplotlib_wandb_or_ray() -> None:
    loaded = _imported_after("from arena_gym.harness.cli import build_parser\nbuild_parser(None)")  # every command
    assert not loaded & {"torch", "stable_baselines3", "sb3_contrib", "matplotlib", "wandb", "ray"}, loaded


def test_simulate_without_plots_imports_no_torch_sb3_matplotlib_or_scipy(tmp_path) -> None:
    code = (
        "from arena_gym.harness.cli import main\n"
        f"assert main(['simulate', '--policy', 'fcfs', '--trace', 'synthetic:n_jobs=20', '--cluster', 'tiny', "
        f"'--no-plots', '--out', {str(tmp_path / 'run')!r}]) == 0"
    )
    loaded = _imported_after(code)
    # scipy too (FCFS solves no MILP; the solver imports scipy on first use), and pandas (the
    # trace is read and the results written with the csv module)
    assert loaded == set(), loaded
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_compare_without_plots_imports_no_matplotlib(tmp_path) -> None:
    code = (
        "from arena_gym.harness.cli import main\n"
        f"assert main(['compare', '--policies', 'fcfs,srtf', '--trace', 'synthetic:n_jobs=10', '--cluster', 'tiny', "
        f"'--no-plots', '--out', {str(tmp_path / 'cmp')!r}]) == 0"
    )
    loaded = _imported_after(code)
    assert loaded == {"pandas"}, loaded  # the leaderboard is a DataFrame
    assert (tmp_path / "cmp" / "leaderboard.csv").is_file()


def test_every_command_is_listed_without_being_imported() -> None:
    from arena_gym.harness.cli import SUBCOMMANDS, build_parser

    help_text = build_parser(["--help"]).format_help()
    assert all(name in help_text for name in SUBCOMMANDS)


def _freeze_count_after(call: str, tmp_path) -> tuple[int, bool]:
    """(gc freeze count, matplotlib loaded) after ``call`` runs a small simulate in a fresh interpreter."""
    code = (
        "import gc, sys\n"
        "from arena_gym.harness.cli import main\n"
        f"args = ['simulate', '--policy', 'fcfs', '--trace', 'synthetic:n_jobs=10', '--cluster', 'tiny', "
        f"'--out', {str(tmp_path / 'run')!r}]\n"
        f"assert {call} == 0\n"
        "print('FROZEN:', gc.get_freeze_count(), 'matplotlib' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    last = out.stdout.splitlines()[-1]
    assert last.startswith("FROZEN:"), out.stdout
    count, mpl = last.split()[1:]
    return int(count), mpl == "True"


def test_the_program_freezes_its_loaded_code_plots_included(tmp_path) -> None:
    frozen, mpl = _freeze_count_after("(sys.argv.__setitem__(slice(1, None), args), main())[1]", tmp_path)
    assert frozen > 10_000 and mpl  # numpy, the estimator, matplotlib: the code the run loaded


def test_a_caller_of_main_keeps_its_collector_as_it_was(tmp_path) -> None:
    frozen, _ = _freeze_count_after("main(args)", tmp_path)
    assert frozen == 0
