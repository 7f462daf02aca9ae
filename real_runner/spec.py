"""The job a worker runs: :class:`WorkerSpec` and its JSON form (no torch here).

A spec file, e.g.::

    {"job_id": "j1", "model": "gpt__tiny", "global_batch": 16, "target_step": 200, "seed": 0,
     "plan": {"stages": [{"layers": [0, 6], "dp": 2, "tp": 1}], "micro_batches": 1, "schedule": "gpipe"},
     "checkpoint_dir": "runs/j1/ckpt", "progress_path": "runs/j1/progress.jsonl",
     "checkpoint_every_steps": 50, "checkpoint_every_s": 0, "lr": 0.001, "device": "auto",
     "precision": "auto", "remat": "auto"}

Relative paths are taken relative to the worker's working directory.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from arena_gym.fields import build, check_fields
from arena_gym.types import Plan
from estimator.zoo import get_model
from real_runner.checkpoint_files import JobIdentity
from real_runner.plans import plan_from_dict, plan_to_dict
from real_runner.training_modes import check_precision, check_remat

#: Accepted values of :attr:`WorkerSpec.device`.
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class WorkerSpec:
    """One training job under one plan.

    Attributes: ``target_step`` is the step count at which the job is done; checkpoints are taken
    every ``checkpoint_every_steps`` steps and/or every ``checkpoint_every_s`` seconds (0 = never),
    and always on SIGTERM and at the target; ``require_checkpoint`` makes a missing checkpoint an
    error (a resume) instead of a fresh start; ``group_timeout_s`` bounds every collective;
    ``progress_every_steps`` thins the step records. ``precision`` (``auto``, ``fp32``, ``bf16``,
    ``fp16``) and ``remat`` (``auto``, ``on``, ``off``) override the model spec's dtype and
    recomputation (:mod:`real_runner.training_modes`).
    """

    job_id: str
    model: str
    global_batch: int
    plan: Plan
    target_step: int
    checkpoint_dir: str
    progress_path: str
    seed: int = 0
    checkpoint_every_steps: int = 0
    checkpoint_every_s: float = 0.0
    lr: float = 1e-3
    device: str = "auto"
    require_checkpoint: bool = False
    group_timeout_s: float = 60.0
    progress_every_steps: int = 1
    precision: str = "auto"
    remat: str = "auto"

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.job_id:
            raise ValueError("job_id must not be empty")
        if self.global_batch < 1:
            raise ValueError(f"global_batch must be >= 1, got {self.global_batch}")
        if self.target_step < 1:
            raise ValueError(f"target_step must be >= 1, got {self.target_step}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.checkpoint_every_steps < 0 or self.checkpoint_every_s < 0:
            raise ValueError("checkpoint_every_steps and checkpoint_every_s must be >= 0 (0 = off)")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr}")
        if self.device not in DEVICES:
            raise ValueError(f"device {self.device!r} is unknown; valid: {', '.join(DEVICES)}")
        if not self.group_timeout_s > 0:
            raise ValueError(f"group_timeout_s must be > 0, got {self.group_timeout_s}")
        if self.progress_every_steps < 1:
            raise ValueError(f"progress_every_steps must be >= 1, got {self.progress_every_steps}")
        check_precision(self.precision, "job spec")
        check_remat(self.remat, "job spec")
        if not self.checkpoint_dir or not self.progress_path:
            raise ValueError("checkpoint_dir and progress_path must not be empty")

    def identity(self) -> JobIdentity:
        """What a checkpoint of this job records and must match on resume (model, seed, batch, lr)."""
        arch = get_model(self.model)
        return JobIdentity(arch.name, arch.fingerprint(), self.seed, self.global_batch, self.lr)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["plan"] = plan_to_dict(self.plan)
        return out

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> WorkerSpec:
        """Parse a spec; ValueError with one line naming the problem."""
        return build(WorkerSpec, data, "job spec", {"plan": _plan})

    def to_json(self) -> str:
        """The spec as JSON text."""
        return json.dumps(self.to_dict(), indent=1)

    @staticmethod
    def load(path: str | Path) -> WorkerSpec:
        """Read a spec file; ValueError (one line) when it is missing, not JSON or invalid."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ValueError(f"job spec {path} does not exist") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"job spec {path} is not valid JSON: {exc}") from None
        if not isinstance(data, Mapping):
            raise ValueError(f"job spec {path} must hold a JSON object")
        return WorkerSpec.from_dict(data)


def _plan(value: Any) -> Plan:
    if not isinstance(value, Mapping):
        raise ValueError("job spec: plan must be an object")
    return plan_from_dict(value)
