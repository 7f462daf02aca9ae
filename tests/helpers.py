"""Small builders shared by tests: a hand-written performance table, jobs, an invariant-checking backend, and the
repository's scripts loaded as modules."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from types import ModuleType

from arena_gym.core import ClusterState
from arena_gym.loop import run_episode
from arena_gym.protocols import ClusterBackend, InvalidDecision, Policy
from arena_gym.records import EpisodeRecord, Event
from arena_gym.sim import SimBackend, SimConfig
from arena_gym.types import ClusterSpec, Decision, GpuType, JobId, JobSpec, ModelRef, PerfModel, Snapshot
from estimator.measured import MeasuredPerfModel, MeasuredTable
from tests.conftest import REPO

GPT = ModelRef("gpt", "1.3B")
MOE = ModelRef("moe", "2.4B")


def table_model(times: dict[tuple[ModelRef, int, str, int, int], float]) -> MeasuredPerfModel:
    """A PerfModel from ``{(model, batch, type, nodes, gpus_per_node): seconds}`` (inf = OOM)."""
    return MeasuredPerfModel(MeasuredTable({(m.family, m.size, b, t, n, g): s for (m, b, t, n, g), s in times.items()}))


def job(
    job_id: str,
    submit: float,
    iters: int,
    gpu_type: str,
    gpus: int,
    model: ModelRef = GPT,
    batch: int = 128,
    deadline: float | None = None,
) -> JobSpec:
    """A job requesting ``gpus`` GPUs of ``gpu_type``."""
    return JobSpec(JobId(job_id), model, batch, iters, submit, GpuType(gpu_type), gpus, deadline)


def uniform_model(
    types=("a40", "a10"),
    base: float = 2.0,
    counts=(1, 2, 4, 8),
    per_node_max: int = 2,
    models=(GPT, MOE),
    batch: int = 128,
) -> MeasuredPerfModel:
    """Every type/count measured at best and spread localities: time = base / sqrt(count)."""
    times = {}
    for m in models:
        for t in types:
            for n in counts:
                per = min(n, per_node_max)
                while per >= 1:
                    times[(m, batch, t, n // per, per)] = base / math.sqrt(n) * (1.0 if t == "a40" else 1.5)
                    per //= 2
    return table_model(times)


def sim_backend(
    cluster: ClusterSpec,
    perf: PerfModel,
    policy: Policy,
    config: SimConfig | None = None,
    belief: PerfModel | None = None,
) -> SimBackend:
    """A simulator that charges ``policy`` its own reconfiguration-overhead class (``policy.ap_search``)."""
    config = dataclasses.replace(config or SimConfig(), overhead_class=policy.ap_search)
    return SimBackend(cluster, perf, belief, config)


class CheckedBackend:
    """A ClusterBackend wrapper that checks the cluster invariants after every reset, apply and advance.

    Works with any backend that keeps its state in a :class:`ClusterState` exposed as ``state``.
    A rejected decision (``InvalidDecision``) must leave the state exactly as it was; that is
    checked too before the error propagates. ``decisions`` counts applied decisions.
    """

    def __init__(self, backend: ClusterBackend) -> None:
        self.backend = backend
        self.state: ClusterState = backend.state  # type: ignore[attr-defined]
        self.decisions = 0
        self.rejected = 0

    def _checked(self, snapshot: Snapshot | None) -> Snapshot | None:
        self.state.check_invariants()
        if snapshot is not None:
            assert all(v.allocation is not None for v in snapshot.running)
            assert all(v.allocation is None for v in snapshot.pending)
        return snapshot

    def reset(self, jobs: Sequence[JobSpec]) -> Snapshot | None:
        return self._checked(self.backend.reset(jobs))

    def apply(self, decision: Decision) -> None:
        before = fingerprint(self.state)
        try:
            self.backend.apply(decision)
        except InvalidDecision:
            self.rejected += 1
            assert fingerprint(self.state) == before, "a rejected decision changed the cluster"
            raise
        self.decisions += 1
        self.state.check_invariants()

    def advance(self) -> Snapshot | None:
        return self._checked(self.backend.advance())

    def now(self) -> float:
        return self.backend.now()

    def close(self) -> None:
        self.backend.close()

    def record(self, policy: str, decisions: int = 0, decide_wall_s: float = 0.0) -> EpisodeRecord:
        return self.backend.record(policy, decisions, decide_wall_s)

    @property
    def events(self) -> tuple[Event, ...]:
        return self.state.events


def fingerprint(state: ClusterState) -> tuple:
    """Everything a decision may change: change counter, free GPUs, queue, holders and the event log length."""
    return (
        state.epoch,
        tuple(tuple(state.free(t).tolist()) for t in state.cluster.gpu_types),
        state.queued,
        state.active,
        len(state.events),
    )


def checked_run(
    policy: Policy, jobs: Sequence[JobSpec], cluster: ClusterSpec, perf: PerfModel, config: SimConfig | None = None
) -> EpisodeRecord:
    """``run_episode`` on a checked simulator that charges the policy's own overhead class."""
    backend = CheckedBackend(sim_backend(cluster, perf, policy, config))
    return run_episode(backend, policy, jobs)


def default_sigint() -> None:
    """``preexec_fn`` for a child that a test interrupts: SIGINT at its default, as under a terminal,
    even when the test run itself was started with SIGINT ignored (a background job of a shell)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def load_script(name: str, folder: str = "scripts") -> ModuleType:
    """``<folder>/<name>.py`` of this repository as a module (``scripts`` and ``benchmarks`` are not packages)."""
    path = REPO / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_benchmark(name: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/NAME.py ARGS`` from the repository root (one thread, wandb off), its output captured."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    script = REPO / "benchmarks" / f"{name}.py"
    return subprocess.run(
        [sys.executable, str(script), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout, env=env
    )
