"""Test-wide settings: no network for wandb, one thread, and the shared data folder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("WANDB_ERROR_REPORTING", "false")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data folder ``../shared/data``; skip when this checkout has none beside it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data folder {SHARED_DATA} is absent")
    return SHARED_DATA


# Hypothesis profiles. "default" is hypothesis's own (100 examples per property; the fuzz suites
# scale their budgets from it, tests/fuzzing.py); "long" runs 10x more:
#   python -m pytest tests -m "not gpu and not slow" --hypothesis-profile=long
settings.register_profile("long", max_examples=1000, deadline=None)
