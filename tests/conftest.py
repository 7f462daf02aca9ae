"""Test-wide settings: no network for wandb, one thread, a private cache directory, and the shared data folder."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory):
    """Point ``XDG_CACHE_HOME`` (the CLI's default performance-table cache) at a directory of this
    test session, shared by its tests and the processes they start, never the user's own cache."""
    with pytest.MonkeyPatch.context() as patch:
        path = tmp_path_factory.mktemp("xdg-cache")
        patch.setenv("XDG_CACHE_HOME", str(path))
        yield path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder ``../shared/data``; skip when this checkout has none beside it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent")
    return SHARED_DATA


@pytest.fixture(scope="session")
def env_overrides() -> dict[str, Any]:
    """EnvConfig overrides of the fast Tiny env the learned-agent tests use (tests.rl_cases)."""
    from tests.rl_cases import ENV_OVERRIDES

    return dict(ENV_OVERRIDES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``), every test that spawns processes runs in one worker, one at a time."""
    for item in items:
        if item.get_closest_marker("distributed") is not None:
            item.add_marker(pytest.mark.xdist_group("distributed"))


# Hypothesis profiles. "default" is hypothesis's own (100 examples per property; the fuzz suites
# scale their budgets from it, tests/fuzzing.py); "long" runs 10x more:
#   python -m pytest tests -m "not gpu and not slow" --hypothesis-profile=long
settings.register_profile("long", max_examples=1000, deadline=None)


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this test, as under a terminal, also in a run started with SIGINT ignored
    (a background job of a shell, as CI starts it)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)
