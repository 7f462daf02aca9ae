"""The fake launcher: generations without processes, progressing at the times a performance model gives.

A fake generation reads its worker spec, takes the iteration time of the grid its ranks form
(``perf.grid_iter_time`` on ``gpu_type``, the executed plan's stage count) and writes to the job's
progress channel what a worker writes (:class:`~real_runner.progress.ProgressRecord` lines:
``start``, ``step``, ``checkpoint``, ``done``, ``stopped``), each stamped with the time its step
ends, as the worker does: released at ``r``, it resumes from the job's newest checkpoint ``s0``
after ``startup_s(world size)`` seconds (``start`` at ``a = r + startup``) and completes step
``k`` at ``a + (k - s0) x iteration time``. A stop (SIGTERM) takes effect at the next step
boundary (checkpoint, ``stopped``, exit 0), a held or still starting one exits at once;
checkpoints are real checkpoint directories with manifests (no tensors), so a relaunch resumes
where the job was. Step records are thinned to one every ``report_every_s`` (the first step, the
last and the one a stop ends on are always written).

Time is ``clock()``: records are written when the clock has passed them, whenever the backend
looks at a generation (poll, release) or :meth:`FakeLauncher.tick` is called. With a
:class:`FakeClock` the backend's waits jump straight to the next moment anything is due (a record,
an exit, or what the backend itself is waiting for), so a trace of many hours runs in seconds.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from arena_gym.types import GpuType, Grid, ModelRef, PerfModel, ResourceShape
from real_runner.checkpoint_files import CheckpointError, prepare_partial, publish, select_checkpoint
from real_runner.launchers.base import LaunchRequest
from real_runner.progress import ProgressRecord, ProgressWriter
from real_runner.spec import WorkerSpec

log = logging.getLogger(__name__)


def no_startup(world_size: int) -> float:
    """No start-up time: a generation's first step begins at its release."""
    return 0.0


class FakeGeneration:
    """One fake generation: its schedule of records and exits, written as the clock passes them."""

    def __init__(
        self,
        request: LaunchRequest,
        spec: WorkerSpec,
        iter_time: float,
        startup_s: float,
        report_every_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.request, self.spec, self.iter_time, self.startup_s = request, spec, iter_time, startup_s
        self.report_every_s, self.clock = report_every_s, clock
        self.identity = spec.identity()
        self.ckpt_dir = Path(spec.checkpoint_dir)
        self._codes: list[int | None] = [None] * request.world_size
        self._writer: ProgressWriter | None = None
        self.start_at = math.nan  # when its first step begins (its release plus the start-up)
        self.s0 = 0  # the step it resumed from
        self.step = 0  # the last step it completed
        self.ckpt_step: int | None = None
        self.stop_step: int | None = None  # the step boundary it stops at (SIGTERM)
        self.hung = False  # a rank was stopped or killed: no record will come any more
        self._started = False
        self._last_report = self._last_save = -math.inf

    # ------------------------------------------------------------------ the handle
    @property
    def pids(self) -> tuple[int, ...]:
        """No processes."""
        return ()

    def poll(self) -> list[int | None]:
        """Exit code of every rank (None while it runs), after writing what is due by now."""
        self.catch_up()
        return list(self._codes)

    def held_ready(self) -> bool:
        """A fake rank has nothing to import: ready at once."""
        return True

    def release(self) -> None:
        """Start: resume from the newest checkpoint after the start-up time."""
        if not math.isnan(self.start_at) or self.exited:
            return
        now = self.clock()
        try:
            resume = select_checkpoint(self.ckpt_dir, self.identity, require=self.spec.require_checkpoint)
        except CheckpointError as exc:
            self._write(now, "error", -1, info={"message": str(exc)})
            self._exit(2)
            return
        if not (math.isfinite(self.iter_time) and self.iter_time > 0):
            self._write(now, "error", -1, info={"message": f"no feasible plan (iteration time {self.iter_time})"})
            self._exit(1)
            return
        self.s0 = self.step = 0 if resume is None else resume.step
        self.ckpt_step = None if resume is None else resume.step
        self.start_at = now + self.startup_s
        self._last_save = self.start_at
        self.catch_up()

    def terminate(self) -> None:
        """Stop at the next step boundary (checkpoint, ``stopped``, exit 0); a held or starting one exits at once."""
        self.catch_up()
        if self.exited:
            return
        if math.isnan(self.start_at):  # held: exits without training
            self._exit(0)
            return
        if not self._started:  # still starting: gives up its start-up, keeps the checkpoint it would resume from
            self._write(self.clock(), "stopped", self.s0, ckpt_step=self.ckpt_step)
            self._exit(0)
            return
        elapsed = max(0.0, self.clock() - self.start_at)
        self.stop_step = min(self.s0 + math.ceil(elapsed / self.iter_time), self.spec.target_step)
        self.catch_up()

    def kill(self) -> None:
        """Every rank still running exits at once with -9 (SIGKILL)."""
        self.catch_up()
        self._codes = [-signal.SIGKILL if c is None else c for c in self._codes]

    def signal_rank(self, rank: int, signum: int) -> None:
        """SIGTERM stops the generation, SIGKILL ends that rank (-9), SIGSTOP hangs it; no record comes after either."""
        self.catch_up()
        if signum == signal.SIGTERM:
            self.terminate()
        elif signum in (signal.SIGKILL, signal.SIGSTOP):
            self.hung = True
            if signum == signal.SIGKILL and self._codes[rank] is None:
                self._codes[rank] = -signal.SIGKILL
        else:
            raise ValueError(f"the fake launcher models SIGTERM, SIGKILL and SIGSTOP only, not signal {signum}")

    def log_tail(self, rank: int, max_bytes: int = 2000) -> str:
        """A fake rank writes no log."""
        return ""

    def describe(self) -> dict[str, Any]:
        """Nothing to reattach to: a fake generation ends with its controller."""
        return {"fake": True}

    def close(self) -> None:
        """Close the progress channel."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    # ------------------------------------------------------------------ the schedule
    def next_due(self) -> float:
        """When it writes its next record or exits (inf: never, unless it is released, stopped or killed)."""
        if self.exited or self.hung or math.isnan(self.start_at):
            return math.inf
        if not self._started:
            return self.start_at
        return self._end_of(self._next_reported())

    def catch_up(self) -> None:
        """Write every record due by now (and exit if its end has come)."""
        if self.exited or self.hung or math.isnan(self.start_at):
            return
        now = self.clock()
        if not self._started:
            if self.start_at > now:
                return
            self._started = True
            info = {"resumed_from": None if self.ckpt_step is None else self.s0, "world_size": len(self._codes)}
            self._write(self.start_at, "start", self.s0, ckpt_step=self.ckpt_step, info=info)
        while not self.exited and self._boundary_done():
            t = self._end_of(self.step)
            if self.step >= self.spec.target_step:
                self._save(t)
                self._write(t, "done", self.step, ckpt_step=self.ckpt_step)
                self._exit(0)
            elif self.step == self.stop_step:
                self._save(t)
                self._write(t, "stopped", self.step, ckpt_step=self.ckpt_step)
                self._exit(0)
            elif self._end_of(self.step + 1) <= now:
                self.step += 1
                self._after_step(self._end_of(self.step))
            else:
                break

    def _boundary_done(self) -> bool:
        """Whether the generation is at a step boundary that has passed (always true once started)."""
        return self._end_of(self.step) <= self.clock()

    def _after_step(self, t: float) -> None:
        spec, k = self.spec, self.step
        if (
            k == self.s0 + 1
            or k == spec.target_step
            or k == self.stop_step
            or t - self._last_report >= self.report_every_s
        ):
            if k % spec.progress_every_steps == 0 or k == spec.target_step:
                self._write(t, "step", k, iter_s=self.iter_time, samples_per_s=spec.global_batch / self.iter_time)
                self._last_report = t
        every = spec.checkpoint_every_steps
        if k < spec.target_step and (
            (every and k % every == 0)
            or (spec.checkpoint_every_s > 0 and t - self._last_save >= spec.checkpoint_every_s)
        ):
            self._save(t)

    def _next_reported(self) -> int:
        """The next step that gets a record (or ends the generation)."""
        spec, k = self.spec, self.step + 1
        last = spec.target_step if self.stop_step is None else min(self.stop_step, spec.target_step)
        if k > last:
            return last  # its end: the boundary it is at
        if k == self.s0 + 1:
            return k
        due = self.s0 + math.ceil((self._last_report + self.report_every_s - self.start_at) / self.iter_time)
        return min(max(k, due), last)

    def _end_of(self, step: int) -> float:
        """When ``step`` is complete (its first step begins at ``start_at``)."""
        return self.start_at + (step - self.s0) * self.iter_time

    def _save(self, t: float) -> None:
        """A checkpoint of the current step (a manifest and an empty DCP metadata file), unless the newest holds it."""
        if self.step <= (self.ckpt_step or 0):
            return
        partial = prepare_partial(self.ckpt_dir, self.step)
        (partial / ".metadata").write_bytes(b"")
        publish(self.ckpt_dir, self.step, self.identity, {"job_id": self.spec.job_id, "fake": True})
        self.ckpt_step = self.step
        self._last_save = t
        self._write(t, "checkpoint", self.step, ckpt_step=self.step, info={"save_s": 0.0})

    def _write(self, t: float, event: str, step: int, **fields: Any) -> None:
        if self._writer is None:
            self._writer = ProgressWriter(self.spec.progress_path)
        self._writer.write(ProgressRecord(t, event, self.spec.job_id, step, **fields))

    def _exit(self, code: int) -> None:
        self._codes = [code if c is None else c for c in self._codes]
        self.close()

    @property
    def exited(self) -> bool:
        """Every rank has exited."""
        return all(c is not None for c in self._codes)


class FakeLauncher:
    """Starts fake generations (no processes) whose steps take ``perf``'s time on ``gpu_type`` devices.

    ``clock`` gives epoch seconds (the backend's clock); ``startup_s(world size)`` is the time from
    a release to the first step (e.g. a simulator's reconfiguration overhead); step records are
    thinned to one every ``report_every_s`` seconds (0: every step).
    """

    name = "fake"

    def __init__(
        self,
        perf: PerfModel,
        gpu_type: str,
        clock: Callable[[], float] = time.time,
        startup_s: Callable[[int], float] = no_startup,
        report_every_s: float = 0.0,
    ) -> None:
        if not report_every_s >= 0:
            raise ValueError(f"report_every_s must be >= 0, got {report_every_s}")
        self.perf, self.gpu_type, self.clock = perf, GpuType(gpu_type), clock
        self.startup_s, self.report_every_s = startup_s, report_every_s
        self.generations: list[FakeGeneration] = []

    def launch(self, request: LaunchRequest) -> FakeGeneration:
        """A fake generation of ``request`` (released at once unless ``request.hold``)."""
        spec = WorkerSpec.load(request.spec_path)
        n_nodes = len({r.node for r in request.ranks})
        shape = ResourceShape(self.gpu_type, n_nodes, request.world_size // n_nodes)
        iter_time = self.perf.grid_iter_time(
            ModelRef.parse(spec.model), spec.global_batch, Grid(shape, spec.plan.n_stages)
        )
        startup = self.startup_s(request.world_size)
        gen = FakeGeneration(request, spec, iter_time, startup, self.report_every_s, self.clock)
        self.generations = [g for g in self.generations if not g.exited] + [gen]
        if not request.hold:
            gen.release()
        return gen

    def reattach(self, request: LaunchRequest, described: Mapping[str, Any]) -> None:
        """No fake generation outlives the controller that launched it."""
        return None

    def next_due(self) -> float:
        """When the next record of any generation is due, or its exit (inf: none)."""
        return min((g.next_due() for g in self.generations), default=math.inf)

    def tick(self) -> None:
        """Write every record due by now, in every generation."""
        for gen in self.generations:
            gen.catch_up()

    def close(self) -> None:
        """Close every generation's progress channel."""
        for gen in self.generations:
            gen.close()


class FakeClock:
    """Epoch seconds that pass only while someone waits: :meth:`sleep` jumps to the earliest due time.

    :meth:`watch` adds a source of due times (``next_due() -> float``, inf: nothing due) and what
    to run once the clock has moved (``tick()``: a fake launcher writing its records). A wait with
    nothing due ahead lasts the seconds asked for.
    """

    def __init__(self, start: float = 0.0) -> None:
        self.t = start
        self._due: list[Callable[[], float]] = []
        self._ticks: list[Callable[[], None]] = []

    def time(self) -> float:
        """Now."""
        return self.t

    def watch(self, next_due: Callable[[], float], tick: Callable[[], None] | None = None) -> None:
        """Jump to ``next_due()`` when it is the earliest; call ``tick()`` after every move."""
        self._due.append(next_due)
        if tick is not None:
            self._ticks.append(tick)

    def sleep(self, seconds: float) -> None:
        """Move to the earliest due time ahead (or by ``seconds`` when none is) and tick."""
        due = min((d for d in (next_due() for next_due in self._due) if d > self.t), default=math.inf)
        self.t = due if due < math.inf else self.t + seconds
        for tick in self._ticks:
            tick()
