"""Measured (re)start costs per model on one device type: a profile's ``restart`` section, also copied into
the parameter file ``estimate calibrate --profile`` writes, and what ``profiled:`` and ``calibrated:``
performance models answer the simulator with (:class:`arena_gym.restarts.RestartCosts`).

JSON form of one model's costs: ``{"start_s": ..., "held_s": ..., "save_s": ..., "load_s": ...}``
(:class:`~arena_gym.restarts.RestartCost`); of a table: ``{"device_type": TYPE, "models": {NAME: COSTS}}``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from arena_gym.restarts import RestartCost
from arena_gym.types import ModelRef
from estimator.hardware import canonical_gpu_name

_FIELDS = tuple(f.name for f in fields(RestartCost))


def costs_to_dict(costs: Mapping[str, RestartCost]) -> dict[str, dict[str, float]]:
    """JSON-ready form of per-model costs."""
    return {name: asdict(cost) for name, cost in sorted(costs.items())}


def costs_from_dict(value: Any, where: str) -> dict[str, RestartCost]:
    """Per-model costs from their JSON form; ValueError naming ``where`` and the problem."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be an object of models")
    out = {}
    for name, item in value.items():
        if not isinstance(item, Mapping) or set(item) != set(_FIELDS):
            raise ValueError(f"{where}.{name} must hold exactly {', '.join(_FIELDS)}")
        try:
            out[str(name)] = RestartCost(**{k: item[k] for k in _FIELDS})
        except ValueError as exc:
            raise ValueError(f"{where}.{name}: {exc}") from None
    return out


@dataclass(frozen=True)
class RestartTable:
    """Measured (re)start costs of some models on one device type (a catalogue name)."""

    device_type: str
    costs: Mapping[str, RestartCost]

    def lookup(self, model: ModelRef, gpu_type: str) -> RestartCost | None:
        """The costs of ``model`` on ``gpu_type``, or None when this table does not describe them."""
        if canonical_gpu_name(gpu_type) != canonical_gpu_name(self.device_type):
            return None
        return self.costs.get(model.name)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"device_type": self.device_type, "models": costs_to_dict(self.costs)}

    @staticmethod
    def from_dict(value: Any, where: str) -> RestartTable:
        """Inverse of :meth:`to_dict`; ValueError naming ``where`` and the problem."""
        if not isinstance(value, Mapping) or set(value) != {"device_type", "models"}:
            raise ValueError(f"{where} must hold exactly device_type and models")
        device = value["device_type"]
        if not isinstance(device, str) or not device:
            raise ValueError(f"{where}.device_type must be a GPU type name")
        return RestartTable(canonical_gpu_name(device), costs_from_dict(value["models"], f"{where}.models"))


def read_restart_table(path: str | Path) -> RestartTable | None:
    """The ``restart`` table of a JSON parameter file (``calibrated:PARAMS.json``), None when it has none."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read estimator parameters: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, Mapping) or "restart" not in data:
        return None
    return RestartTable.from_dict(data["restart"], f"{path}: restart")
