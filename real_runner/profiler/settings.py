"""What the profiler measures and how often: :class:`ProfilerSettings` and the job it hands its ranks (no torch here)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from arena_gym.fields import build, check_fields
from estimator.plan_space import tp_fits
from estimator.profile import COMM_OPS, NEIGHBOURS
from estimator.zoo import get_model

#: A progress callback: (phase, done, total).
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class ProfilerSettings:
    """Knobs of one profiling run.

    ``samples``: micro-batch sizes (sequences per device) profiled for every layer kind;
    ``overhead_samples``: the sizes among them at which the wrappers' overheads are measured
    (overheads are per call: held constant beyond);
    ``tp``: tensor-parallel degrees whose per-device block shapes are profiled (empty: every
    power of two up to the testbed's devices per node that divides the heads); ``rounds`` /
    ``warmup_rounds``: timed and untimed rounds (each round times every item once, interleaved,
    so load changes hit every item alike; the median over rounds is kept); ``layer_repeats``: calls
    of a layer back to back per round (with more than one, the first warms it and is dropped;
    the default times each layer once, after a different item, which matches a training step
    better on CPUs: docs/profiler.md; a block always after another block, as in a step); ``neighbours``:
    ``busy`` profiles compute on every device of the node at once (each device's neighbours
    compute too, as in training), ``idle`` on the first device while the others wait;
    ``pipeline_samples`` / ``pipeline_micro_batches``: where the pipeline schedule's overhead is
    measured; ``order_samples`` / ``order_in_flight``: micro-batch sizes and numbers of micro-batches in
    flight at which the op order's cost is measured (whole model, GPipe's order against gradient
    accumulation; ``order_rounds`` timed rounds after at most one untimed one, as these are the
    largest items and each call starts warm); ``batches``: global batch sizes whose construction is
    timed; ``comm_min_exp`` /
    ``comm_max_exp`` / ``comm_step_exp``: message sizes ``2^k`` bytes; ``comm_rounds`` /
    ``comm_warmup``: timed and untimed collectives per size; ``gap_s``: computation between two
    collectives (collectives are timed inside a loop that computes, as training does);
    ``comm_ops``: the collectives tabulated; ``optimizer_rounds``: timed AdamW steps per item;
    ``grouped``: also time the tensor-parallel block and the FSDP2 units on real groups of the node's
    devices, collectives included (:mod:`real_runner.profiler.grouped`; the composition prefers
    these to the one-rank overheads plus the tables); ``statistic``: how the rounds of an item are summarised (``mean`` keeps the time a shared
    machine takes away, as it does from training steps; ``median`` drops it). Wrapper overheads
    are always the median of the paired differences. ``grouped_statistic``: the same for the
    grouped items, which run on the wall clock (their waits are the point): the ``median`` drops
    the pauses of a shared machine that land in some rounds only, which the CPU clock of the
    other items never counts. ``clock``: how CPU devices time computation:
    ``cpu`` (the thread's CPU time: the cost on a dedicated core, reproducible on a shared
    machine) or ``wall``; GPUs always use CUDA events, and collectives are always wall time.
    ``restart_steps`` / ``restart_batch``: steps and global batch of each of the two one-device
    generations that measure a model's (re)start costs with the runner's worker
    (:mod:`real_runner.profiler.restart`; ``restart_steps=0`` skips them, the profile then has none).
    """

    samples: tuple[int, ...] = (1, 2, 4, 8, 16)
    overhead_samples: tuple[int, ...] = (1, 4)
    tp: tuple[int, ...] = ()
    rounds: int = 7
    warmup_rounds: int = 2
    layer_repeats: int = 1
    neighbours: str = "busy"
    pipeline_samples: tuple[int, ...] = (1, 4, 8)
    pipeline_micro_batches: int = 2
    order_samples: tuple[int, ...] = (1, 4)
    order_in_flight: tuple[int, ...] = (2, 8)
    order_rounds: int = 4
    batches: tuple[int, ...] = (1, 16, 64)
    comm_min_exp: int = 10
    comm_max_exp: int = 26
    comm_step_exp: int = 1
    comm_rounds: int = 12
    comm_warmup: int = 2
    gap_s: float = 0.002
    comm_ops: tuple[str, ...] = COMM_OPS
    optimizer_rounds: int = 9
    statistic: str = "mean"
    grouped_statistic: str = "median"
    clock: str = "cpu"
    grouped: bool = True
    restart_steps: int = 3
    restart_batch: int = 4

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("samples", "overhead_samples", "pipeline_samples", "order_samples", "order_in_flight", "batches"):
            values = getattr(self, name)
            if not values or any(v < 1 for v in values) or list(values) != sorted(set(values)):
                raise ValueError(f"profiler setting {name} must be increasing positive integers, got {values!r}")
        if self.order_in_flight[0] < 2:
            raise ValueError(f"profiler setting order_in_flight must start at 2 or more, got {self.order_in_flight!r}")
        if not set(self.overhead_samples) <= set(self.samples):
            raise ValueError(
                f"profiler setting overhead_samples {self.overhead_samples!r} must be among samples {self.samples!r}"
            )
        if any(t < 1 or t & (t - 1) for t in self.tp):
            raise ValueError(f"profiler setting tp must be powers of two, got {self.tp!r}")
        for name in (
            "rounds",
            "layer_repeats",
            "comm_rounds",
            "optimizer_rounds",
            "pipeline_micro_batches",
            "order_rounds",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"profiler setting {name} must be >= 1, got {getattr(self, name)}")
        if self.restart_steps == 1 or self.restart_steps < 0 or self.restart_batch < 1:
            raise ValueError(
                "profiler settings need restart_steps 0 (not measured) or >= 2 and restart_batch >= 1, got "
                f"{self.restart_steps} and {self.restart_batch}"
            )
        if self.warmup_rounds < 0 or self.comm_warmup < 0:
            raise ValueError("profiler warm-up counts must be >= 0")
        if self.neighbours not in NEIGHBOURS:
            raise ValueError(f"profiler setting neighbours is {self.neighbours!r}; valid: {', '.join(NEIGHBOURS)}")
        if not (0 <= self.comm_min_exp <= self.comm_max_exp <= 31) or self.comm_step_exp < 1:
            raise ValueError(
                "profiler message sizes need 0 <= comm_min_exp <= comm_max_exp <= 31 and comm_step_exp >= 1"
            )
        if not 0 <= self.gap_s <= 1:
            raise ValueError(f"profiler setting gap_s must be in 0..1 s, got {self.gap_s}")
        if self.clock not in ("cpu", "wall"):
            raise ValueError(f"profiler setting clock is {self.clock!r}; valid: cpu, wall")
        for name in ("statistic", "grouped_statistic"):
            if getattr(self, name) not in ("mean", "median"):
                raise ValueError(f"profiler setting {name} is {getattr(self, name)!r}; valid: mean, median")
        unknown = [op for op in self.comm_ops if op not in COMM_OPS]
        if unknown or not self.comm_ops:
            raise ValueError(
                f"profiler setting comm_ops has unknown {unknown or 'nothing'}; valid: {', '.join(COMM_OPS)}"
            )

    @staticmethod
    def quick() -> ProfilerSettings:
        """Fewer sizes and rounds (a smoke run and the tests): minutes become seconds."""
        return ProfilerSettings(
            samples=(1, 2, 4, 8),
            overhead_samples=(1, 4),
            rounds=3,
            warmup_rounds=1,
            pipeline_samples=(2,),
            order_samples=(2,),
            order_in_flight=(2, 4),
            order_rounds=2,
            batches=(1, 16),
            comm_min_exp=10,
            comm_max_exp=20,
            comm_step_exp=2,
            comm_rounds=4,
            comm_warmup=1,
            optimizer_rounds=3,
        )

    def sizes(self) -> list[int]:
        """Message sizes in bytes."""
        return [1 << k for k in range(self.comm_min_exp, self.comm_max_exp + 1, self.comm_step_exp)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> ProfilerSettings:
        """Inverse of :meth:`to_dict`; ValueError naming an unknown key or a value of the wrong type."""
        return build(ProfilerSettings, data, "profiler settings")


def tp_degrees(settings: ProfilerSettings, heads: int, devices_per_node: int) -> list[int]:
    """Tensor-parallel degrees to profile for a model with ``heads`` heads."""
    if settings.tp:
        return sorted({1, *(t for t in settings.tp if tp_fits(heads, t))})
    out, t = [], 1
    while t <= devices_per_node:
        if tp_fits(heads, t):
            out.append(t)
        t *= 2
    return out


@dataclass(frozen=True)
class ProfileJob:
    """What every rank of a profiling run reads: models, settings, the testbed's shape, where to write."""

    models: tuple[str, ...]
    settings: ProfilerSettings
    testbed: str
    nodes: int
    devices_per_node: int
    device_ids: tuple[int, ...]  # per local rank: CUDA index or CPU core
    out_dir: str
    device: str = "auto"  # auto, cpu or cuda
    group_timeout_s: float = 300.0
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.models:
            raise ValueError("name at least one model to profile")
        for m in self.models:
            arch = get_model(m)
            if arch.kind != "transformer":
                raise ValueError(f"model {arch.name}: the profiler profiles the runner's dense transformers only")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device {self.device!r} is unknown; valid: auto, cpu, cuda")

    @property
    def world_size(self) -> int:
        """Ranks in total."""
        return self.nodes * self.devices_per_node

    def save(self, path: str | Path) -> Path:
        """Write the job file the ranks read."""
        path = Path(path)
        data = {
            "models": list(self.models),
            "settings": self.settings.to_dict(),
            "testbed": self.testbed,
            "nodes": self.nodes,
            "devices_per_node": self.devices_per_node,
            "device_ids": list(self.device_ids),
            "out_dir": self.out_dir,
            "device": self.device,
            "group_timeout_s": self.group_timeout_s,
            "extra": dict(self.extra),
        }
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        return path

    @staticmethod
    def load(path: str | Path) -> ProfileJob:
        """Read a job file; ValueError naming the problem."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            return build(ProfileJob, data, "job", {"settings": ProfilerSettings.from_dict})
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: not a profiler job file ({type(exc).__name__}: {exc})") from None
