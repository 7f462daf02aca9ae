"""``--config`` files: what runs and tune write reads back as the same config, for every method."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agents.rl.config import TrainConfig
from arena_gym.harness.train_options import add_train_arguments, config_file, config_from_args
from arena_gym.harness.trainers import METHODS
from arena_gym.outputs import write_json
from arena_gym.registry import resolve


@pytest.mark.parametrize("name", sorted(METHODS))
def test_tunes_best_config_reads_back_as_the_config(tmp_path: Path, name: str) -> None:
    method = resolve(METHODS[name])
    config = method.config_type()
    path = write_json(tmp_path / "best_config.json", {"trial": 3, "config": method.config_json(config)})
    assert method.config_type(**config_file(path, method.config_type)) == config


def test_a_runs_config_json_reads_back_as_its_train_section(tmp_path: Path) -> None:
    config = TrainConfig(net_arch=(32, 32), env_overrides={"load_levels": [0.9]}, eval_seeds=(1, 2))
    path = write_json(tmp_path / "config.json", {"kind": "train", "train": config.to_json(), "seed": 0})
    assert TrainConfig(**config_file(path, TrainConfig)) == config
    with pytest.raises(ValueError, match=r"^--config .*config.json: no 'config' object of TrainConfig fields$"):
        config_file(path, TrainConfig, sections=("config",))


def test_a_choice_field_is_one_option_of_its_choices(capsys) -> None:
    parser = argparse.ArgumentParser(prog="train")
    add_train_arguments(parser)
    args = parser.parse_args(["--vec", "subproc", "--wandb-mode", "offline"])
    config = config_from_args(args)
    assert (config.vec, config.wandb_mode) == ("subproc", "offline")
    assert config_from_args(parser.parse_args([])).vec == "dummy"
    with pytest.raises(SystemExit):
        parser.parse_args(["--vec", "ray"])
    assert "argument --vec: not one of dummy, subproc: 'ray'" in capsys.readouterr().err
