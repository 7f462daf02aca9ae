"""The distribution installs into a fresh virtual environment and works from there, also when
another distribution ships a top-level module with one of its generic names (``agents``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("arena_gym", "agents", "envs", "estimator", "real_runner", "traces")
SIMULATE = [
    "-m",
    "arena_gym",
    "simulate",
    "--policy",
    "fcfs",
    "--trace",
    "synthetic:n_jobs=5",
    "--cluster",
    "tiny",
    "--no-plots",
    "--no-cache",
    "--out",
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the package installed from a copy of the sources (no editable link to this checkout);
    its dependencies come from the running environment through a .pth file (``--no-deps``, no network)."""
    root = tmp_path_factory.mktemp("install")
    source = root / "src"
    for name in (*PACKAGES, "pyproject.toml", "README.md"):
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(path, source / name)
    env_dir = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], root).check_returncode()
    python = env_dir / "bin" / "python"
    site = Path(
        _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], root).stdout.strip()
    )
    (site / "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # numpy, pandas, setuptools, ...
    done = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            str(source),
        ],
        root,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    shutil.rmtree(source)  # only the installed copy is left
    return env_dir


def test_top_level_packages_import_from_the_install(venv, tmp_path):
    code = (
        f"import importlib, json; print(json.dumps({{p: importlib.import_module(p).__file__ for p in {PACKAGES!r}}}))"
    )
    done = _run([str(venv / "bin" / "python"), "-c", code], tmp_path)
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)
    assert all(Path(f).is_relative_to(venv) for f in files.values()), files


def test_simulate_runs_from_the_install(venv, tmp_path):
    done = _run([str(venv / "bin" / "python"), *SIMULATE, str(tmp_path / "run")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["jobs_finished"] == 5


def _other_agents(tmp_path: Path) -> Path:
    """Another distribution's top-level ``agents`` package (as the OpenAI Agents SDK ships one)."""
    other = tmp_path / "other"
    (other / "agents").mkdir(parents=True)
    (other / "agents" / "__init__.py").write_text("NAME = 'someone else'\n")
    return other


def test_another_agents_module_later_on_the_path_changes_nothing(venv, tmp_path):
    site = next((venv / "lib").glob("python3*/site-packages"))
    pth = site / "zz_other.pth"
    pth.write_text(str(_other_agents(tmp_path)) + "\n")  # after site-packages, as another install location is
    try:
        done = _run([str(venv / "bin" / "python"), *SIMULATE, str(tmp_path / "run")], tmp_path)
    finally:
        pth.unlink()
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run" / "metrics.json").is_file()


def test_another_agents_module_first_on_the_path_is_named_in_one_line(venv, tmp_path):
    other = _other_agents(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(other)}  # e.g. a local agents/ beside the user's script
    done = _run([str(venv / "bin" / "python"), *SIMULATE, str(tmp_path / "run")], tmp_path, env)
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()[-1]
    assert f"the 'agents' package imported is {other / 'agents'}, not arena-gym's" in err
    assert not (tmp_path / "run").exists()
