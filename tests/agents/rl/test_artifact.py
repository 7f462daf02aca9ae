"""Model metadata: what the writer writes reads back, committed models still load, wrong shapes are one-line errors."""

from __future__ import annotations

import json
import math
import subprocess
import zipfile
from pathlib import Path
from typing import Any

import pytest

from agents.rl.artifact import ModelInfo, env_spaces, load_model, read_model_info, write_sidecar
from envs import EnvConfig

ROOT = Path(__file__).resolve().parents[3]
INFO = ModelInfo("maskable_ppo", "ArenaGym/Tiny-v1", EnvConfig(trace=("a.csv", "b.csv")), "0.1.0+abc", "slots")


def model_file(directory: Path, metadata: Any | None = None) -> Path:
    """A zip without the metadata member, with ``arena_gym.json`` beside it: ``metadata`` as JSON, or the writer's."""
    directory.mkdir(parents=True, exist_ok=True)
    if metadata is None:
        write_sidecar(directory, INFO)
    else:
        (directory / "arena_gym.json").write_text(json.dumps(metadata))
    path = directory / "model.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data", "{}")
    return path


def test_what_the_writer_writes_reads_back(tmp_path):
    info = read_model_info(model_file(tmp_path))
    assert info == INFO
    assert info.env_config.trace == ("a.csv", "b.csv") and math.isinf(info.env_config.horizon_s)


def test_an_older_file_without_a_code_version_reads_as_unknown(tmp_path):
    metadata = INFO.to_json()
    del metadata["code_version"], metadata["policy"]
    info = read_model_info(model_file(tmp_path, metadata))
    assert (info.code_version, info.policy) == ("unknown", "mlp")


def _changed(**kw: Any) -> dict[str, Any]:
    return {**INFO.to_json(), **kw}


@pytest.mark.parametrize(
    ("metadata", "says"),
    [
        ([1], "metadata must be an object, got [1]"),
        (_changed(algo=3), "metadata: algo must be a string, got 3"),
        ({k: v for k, v in INFO.to_json().items() if k != "env_id"}, "metadata: missing field(s) env_id"),
        (_changed(seed=1), "metadata: unknown field(s) seed; valid: algo, env_id, env_config, code_version, policy"),
        (_changed(env_config="tiny"), "metadata: env_config must be an object, got 'tiny'"),
        (_changed(env_config={"max_queue": 8}), "metadata: env_config: unknown field(s) max_queue; valid: cluster,"),
        (_changed(env_config={"horizon_s": "inf"}), "metadata: env_config: horizon_s must be a number, got 'inf'"),
        (_changed(env_config={"max_pending": True}), "metadata: env_config: max_pending must be an integer, got True"),
        (_changed(policy="zz"), "invalid metadata: unknown policy architecture 'zz'"),
    ],
)
def test_metadata_of_the_wrong_shape_is_refused_in_one_line(tmp_path, metadata, says):
    path = model_file(tmp_path, metadata)
    with pytest.raises(ValueError) as info:
        read_model_info(path)
    message = str(info.value)
    assert message.startswith(f"model file {path}: ") and says in message and "\n" not in message


def test_the_committed_models_still_load():
    listed = subprocess.run(["git", "ls-files", "benchmarks/results"], cwd=ROOT, capture_output=True, text=True)
    paths = [ROOT / name for name in listed.stdout.split() if name.endswith(".zip")]
    if not paths:
        pytest.skip("no committed models (not a git checkout)")
    for path in paths:
        model, info = load_model(path)
        assert (model.observation_space, model.action_space) == env_spaces(info.env_config)
