"""The layering contracts in pyproject.toml name every module of the core, and nothing is exempt."""

from __future__ import annotations

import re
import sys

import pytest

from tests.conftest import REPO

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
#: Upper packages a core module must never name, not even in a string.
UPPER = ("arena_gym.harness", "agents", "envs", "estimator", "traces", "real_runner")


def _core_modules() -> set[str]:
    """Top-level modules and subpackages of arena_gym, the harness and the package's own __init__ aside."""
    root = REPO / "arena_gym"
    names = {p.stem for p in root.glob("*.py")} | {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    return {f"arena_gym.{n}" for n in names - {"__init__", "__main__", "harness"}}


def test_the_core_layer_lists_every_core_module() -> None:
    layers = next(c for c in CONFIG["contracts"] if c["type"] == "layers")["layers"]
    core = {m.strip() for m in re.split(r"[:|]", layers[-1])}
    assert core == _core_modules()
    forbidden = next(c for c in CONFIG["contracts"] if c["type"] == "forbidden")
    assert set(forbidden["source_modules"]) == _core_modules()


def test_no_contract_has_exceptions() -> None:
    assert all("ignore_imports" not in c for c in CONFIG["contracts"])
    assert not CONFIG.get("exclude_type_checking_imports", False)


@pytest.mark.parametrize("module", sorted(_core_modules()))
def test_no_core_module_names_an_upper_package_in_a_string(module: str) -> None:
    path = REPO / module.replace(".", "/")
    files = [path.with_suffix(".py")] if path.with_suffix(".py").is_file() else sorted(path.rglob("*.py"))
    upper = "|".join(re.escape(u) for u in UPPER)
    pattern = re.compile(rf"""["']({upper})[.:]\w""")
    for file in files:
        hits = [line for line in file.read_text().splitlines() if pattern.search(line)]
        assert not hits, f"{file.relative_to(REPO)} names an upper package: {hits[0].strip()}"
