"""The (re)start costs of each profiled model, measured with the runner's own worker (no torch in this process).

Per model, two generations of a one-device training job run one after the other on the testbed's first
device, each a fresh ``python -m real_runner.worker`` process started as the runner starts its ranks: the
first from scratch to ``restart_steps`` steps (it saves a checkpoint at its target), the second resumed from
that checkpoint for as many steps more (it loads it, and saves again at its target). From their progress
records (:class:`~arena_gym.restarts.RestartCost`):

* ``start_s``: launch to the start of the first step, plus what the first step took beyond the median of
  the later ones; the mean of both generations, the second's checkpoint load taken out;
* ``held_s``: what the first generation spent before it could have been held (launch to its entry point,
  the checks before torch, the torch import), at most ``start_s``;
* ``save_s``: the mean of the two target checkpoints' save times; ``load_s``: the second generation's load.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from arena_gym.restarts import RestartCost
from arena_gym.types import PipeSchedule, Plan, StagePlan
from estimator.zoo import get_model
from real_runner.progress import ProgressRecord, read_progress
from real_runner.ranks import spawn_ranks
from real_runner.spec import WorkerSpec


@dataclass(frozen=True)
class Launch:
    """How the probe's worker processes start: their base environment, the CPU core to pin them to (None: not
    pinned), the interpreter and the working directory."""

    env: Mapping[str, str]
    pin_core: int | None = None
    python: str = sys.executable
    cwd: str | Path | None = None


@dataclass(frozen=True)
class Generation:
    """What one generation's progress records tell: launch time and its records."""

    launched_at: float
    records: tuple[ProgressRecord, ...]

    def _one(self, event: str) -> ProgressRecord:
        found = [r for r in self.records if r.event == event]
        if not found:
            raise RuntimeError(f"the restart probe's generation wrote no {event!r} record")
        return found[-1]

    @property
    def timings(self) -> Mapping[str, float]:
        """The ``start`` record's start-up timings."""
        return self._one("start").info.get("timings", {})

    def start_s(self) -> float:
        """Launch to the first step's start, plus the first step's excess over the median later step."""
        steps = [r for r in self.records if r.event == "step" and r.iter_s is not None]
        if len(steps) < 2:
            raise RuntimeError("the restart probe needs at least two step records per generation")
        first, rest = steps[0], [r.iter_s for r in steps[1:] if r.iter_s is not None]
        assert first.iter_s is not None
        excess = max(0.0, first.iter_s - statistics.median(rest))
        return max(0.0, first.t - first.iter_s - self.launched_at) + excess

    def save_s(self) -> float:
        """The save time of the checkpoint at the target."""
        return float(self._one("checkpoint").info["save_s"])


def one_device_plan(model: str) -> Plan:
    """The whole model on one device, one micro-batch."""
    return Plan((StagePlan(0, len(get_model(model).layers), 1, 1),), 1, PipeSchedule.GPIPE)


def run_generation(spec: WorkerSpec, work: Path, launch: Launch, timeout_s: float) -> Generation:
    """Run one generation of ``spec`` to its target in a fresh worker process; its records."""
    path = work / f"{Path(spec.progress_path).stem}.spec.json"
    path.write_text(spec.to_json(), encoding="utf-8")
    job = spawn_ranks(
        path,
        1,
        env=launch.env,
        log_dir=work / "logs",
        pin_cores=None if launch.pin_core is None else [launch.pin_core],
        python=launch.python,
        cwd=launch.cwd,
    )
    try:
        (code,) = job.wait(timeout_s)
    except TimeoutError:
        job.kill()
        raise RuntimeError(f"the restart probe of {spec.model} did not finish within {timeout_s:.0f} s") from None
    if code != 0:
        tail = job.log_tail(0, 1200).strip().splitlines()[-1:]
        raise RuntimeError(f"the restart probe of {spec.model} exited with code {code}: {tail}")
    return Generation(job.launched_at, tuple(read_progress(spec.progress_path)))


def measure_restart(
    model: str, work: Path, launch: Launch, *, steps: int, batch: int, device: str, timeout_s: float
) -> RestartCost:
    """The (re)start costs of ``model`` (see the module docstring): ``steps`` steps of global batch ``batch`` per
    generation on ``device`` (``cpu`` or ``cuda``), measured in ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    base = WorkerSpec(
        f"restart-{model}",
        model,
        batch,
        one_device_plan(model),
        steps,
        str((work / "ckpt").resolve()),
        str((work / "fresh.jsonl").resolve()),
        device=device,
    )
    deadline = time.monotonic() + timeout_s
    fresh = run_generation(base, work, launch, timeout_s)
    resumed_spec = WorkerSpec.from_dict(
        {
            **base.to_dict(),
            "target_step": 2 * steps,
            "progress_path": str((work / "resumed.jsonl").resolve()),
            "require_checkpoint": True,
        }
    )
    resumed = run_generation(resumed_spec, work, launch, max(1.0, deadline - time.monotonic()))
    load_s = float(resumed.timings.get("load_s", 0.0))
    start_s = statistics.mean([fresh.start_s(), max(0.0, resumed.start_s() - load_s)])
    t = fresh.timings
    held_s = sum(float(t.get(k, 0.0)) for k in ("launch_to_main_s", "prepare_s", "import_s"))
    save_s = statistics.mean([fresh.save_s(), resumed.save_s()])
    return RestartCost(start_s, min(held_s, start_s), save_s, load_s)


def profile_restarts(
    models: Sequence[str],
    work_dir: str | Path,
    launch: Launch,
    *,
    steps: int,
    batch: int,
    device: str,
    timeout_s: float,
) -> dict[str, RestartCost]:
    """:func:`measure_restart` of every model in turn (``work_dir/MODEL``); RuntimeError naming a failure."""
    deadline = time.monotonic() + timeout_s
    out = {}
    for name in models:
        out[name] = measure_restart(
            name,
            Path(work_dir) / name,
            launch,
            steps=steps,
            batch=batch,
            device=device,
            timeout_s=max(1.0, deadline - time.monotonic()),
        )
    return out
