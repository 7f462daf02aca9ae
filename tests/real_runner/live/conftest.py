"""Fixtures of the live-runner tests: one deployment run in process, start to finish."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest


class DeployRun(NamedTuple):
    """A finished in-process deployment: the resolved deployment, its (closed) backend, its folder, its result."""

    dep: Any  # arena_gym.harness.deploy.Deployment
    backend: Any  # real_runner.live.backend.LiveBackend
    out: Path
    result: Any  # arena_gym.harness.deploy.DeployResult


@pytest.fixture
def run_deploy(tmp_path: Path) -> Callable[..., DeployRun]:
    """Run a deployment of a ``DeployConfig`` in ``tmp_path/deploy`` (ranks with one thread each): prepare,
    open the live backend, run the episode, close the backend, finish."""
    from arena_gym.harness.deploy import finish, open_backend, prepare  # noqa: PLC0415
    from arena_gym.loop import run_episode  # noqa: PLC0415 - only the tests that deploy need these imports

    def run(config) -> DeployRun:
        dep = prepare(config, os.environ)
        out = tmp_path / "deploy"
        out.mkdir()
        backend = open_backend(dep, out, {**os.environ, "OMP_NUM_THREADS": "1"})
        try:
            record = run_episode(backend, dep.policy, dep.jobs)
        finally:
            backend.close()
        return DeployRun(dep, backend, out, finish(dep, backend, record))

    return run
