"""TrainerMethod: the check builds the trainer in a scratch folder that is gone afterwards; the config file is its fields."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from arena_gym.harness.trainers.trainer_method import TrainerMethod


@dataclass(frozen=True)
class _Config:
    steps: int = 3
    data_dir: str = "data"


class _Trainer:
    built: list[Path] = []

    def __init__(self, config: _Config, out: Path) -> None:
        if config.steps < 1:
            raise ValueError("steps must be >= 1")
        assert out.name == "run" and out.parent.is_dir() and not out.exists()  # the out is fresh, its parent scratch
        self.built.append(out)


class _Method(TrainerMethod):
    trainer = _Trainer


def test_the_check_builds_the_trainer_once_in_a_scratch_folder_then_removes_it() -> None:
    _Method().check(_Config())
    [out] = _Trainer.built
    assert not out.parent.exists()
    with pytest.raises(ValueError, match="steps must be >= 1"):  # what the trainer refuses, the check refuses
        _Method().check(_Config(steps=0))
    assert len(_Trainer.built) == 1


def test_the_config_file_holds_the_fields() -> None:
    assert _Method().config_json(_Config(steps=5)) == {"steps": 5, "data_dir": "data"}
