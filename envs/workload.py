"""Per-episode workloads: a fresh generator draw or a random window of a trace file, at a sampled load."""

from __future__ import annotations

import dataclasses
import logging
import os

import numpy as np

from arena_gym.experiment import trace_hooks
from arena_gym.protocols import PerfModel
from arena_gym.types import ClusterSpec, JobSpec
from traces import resolve_trace
from traces.formats import GENERATORS

from envs.config import EnvConfig

log = logging.getLogger(__name__)


def is_generator_spec(spec: str) -> bool:
    """Whether a trace spec names a built-in generator (``synthetic[:...]``) rather than a file."""
    return spec.strip().partition(":")[0] in GENERATORS and not os.path.exists(spec)


class WorkloadSampler:
    """Draws the jobs of one episode from ``config.trace``.

    A generator spec is regenerated at every draw with a seed from the episode's seed sequence
    (a ``seed=`` inside the spec wins, giving the same jobs every time); a file trace is loaded
    once. Then a contiguous window of ``window_jobs`` jobs (0 = all) is kept, times rebased to
    0, and arrivals are compressed by a factor drawn from ``load_levels``. Missing job fields
    are sampled feasibly for ``perf`` on ``cluster`` (:func:`arena_gym.experiment.trace_hooks`).
    """

    def __init__(self, config: EnvConfig, cluster: ClusterSpec, perf: PerfModel) -> None:
        self.config = config
        self._hooks = trace_hooks(perf, cluster)
        self._generated = is_generator_spec(config.trace)
        self._file_trace = None

    def sample(self, seed: np.random.SeedSequence) -> tuple[JobSpec, ...]:
        """The jobs of one episode, deterministic in ``seed``."""
        trace_seed, pick_seed = seed.spawn(2)
        feasible, iter_time = self._hooks
        if self._generated:
            trace = resolve_trace(self.config.trace, seed=int(trace_seed.generate_state(1)[0]), feasible=feasible, iter_time=iter_time)
        else:
            if self._file_trace is None:
                self._file_trace = resolve_trace(self.config.trace, seed=self.config.seed, feasible=feasible, iter_time=iter_time)
            trace = self._file_trace
        rng = np.random.default_rng(pick_seed)
        n = self.config.window_jobs
        if 0 < n < len(trace):
            start = int(rng.integers(0, len(trace) - n + 1))
            trace = dataclasses.replace(trace, jobs=trace.jobs[start : start + n])
        levels = self.config.load_levels
        load = levels[int(rng.integers(len(levels)))] if len(levels) > 1 else levels[0]
        trace = trace.shift_to_zero()
        if load != 1.0:
            trace = trace.scale_load(load)
        if not trace.jobs:
            raise ValueError(f"trace {self.config.trace!r} gave no jobs for this episode")
        log.debug("episode workload: %d jobs, load x%g, span %.0f s", len(trace.jobs), load, trace.span_s)
        return trace.jobs
