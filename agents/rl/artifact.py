"""Saved models: an SB3 zip plus an ``arena_gym.json`` member with what is needed to rebuild the env.

SB3's loader reads only its own members (``data``, ``*.pth``) and ignores ours, so the file
stays a normal SB3 model. Our member is plain JSON (never unpickled): the algorithm name, the
env id and the EnvConfig fields the model was trained with, and the code version. SB3's
periodic checkpoints lack the member; a ``arena_gym.json`` file beside them stands in for it.
"""

from __future__ import annotations

import dataclasses
import json
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from agents.rl.algos import POLICIES, algo_name, algo_spec, policy_class
from agents.rl.safe_load import recorded_policy_class, safe_custom_objects
from arena_gym.cluster import resolve_cluster
from arena_gym.fields import build
from envs import ActionCodec, EnvConfig, ObservationEncoder

#: Name of the metadata member inside the model zip.
METADATA_MEMBER = "arena_gym.json"


@dataclass(frozen=True)
class ModelInfo:
    """What a saved model was trained on."""

    algo: str
    env_id: str
    env_config: EnvConfig
    code_version: str = "unknown"  # absent from older files
    policy: str = "mlp"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (ValueError if the env config holds objects instead of specs)."""
        fields = dataclasses.asdict(self.env_config)
        for key in ("cluster", "perf", "belief"):
            if fields[key] is not None and not isinstance(fields[key], str):
                raise ValueError(f"cannot save a model whose EnvConfig.{key} is an object; use a spec string")
        return {
            "algo": self.algo,
            "env_id": self.env_id,
            "env_config": fields,
            "policy": self.policy,
            "code_version": self.code_version,
        }


def save_model(model: Any, path: Path, info: ModelInfo) -> Path:
    """Save ``model`` to ``path`` (a ``.zip``) with the metadata member; return the path.

    The optimizer's running moments are left out (the live model keeps them): the file is for
    deployment and evaluation; resume training from the SB3 checkpoints instead.
    """
    path = Path(path)
    if path.suffix != ".zip":
        raise ValueError(f"model path must end in .zip: {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = json.dumps(info.to_json(), indent=2, sort_keys=True)
    tmp = path.with_name(path.stem + ".tmp.zip")
    policy = model.policy
    optimizer = policy.optimizer
    # Save a fresh optimizer (no Adam moments): a third of the size, all a deployed model needs.
    policy.optimizer = policy.optimizer_class(
        policy.parameters(), **{**policy.optimizer_kwargs, "lr": optimizer.param_groups[0]["lr"]}
    )
    try:
        model.save(tmp)
    finally:
        policy.optimizer = optimizer
    with zipfile.ZipFile(tmp, "a") as archive:
        archive.writestr(METADATA_MEMBER, payload)
    tmp.replace(path)
    return path


def write_sidecar(directory: Path, info: ModelInfo) -> Path:
    """Write ``arena_gym.json`` into ``directory``: the metadata of plain SB3 zips saved there."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / METADATA_MEMBER
    path.write_text(json.dumps(info.to_json(), indent=2, sort_keys=True))
    return path


def _raw_metadata(path: Path) -> dict[str, Any]:
    try:
        with zipfile.ZipFile(path) as archive:
            if METADATA_MEMBER in archive.namelist():
                return json.loads(archive.read(METADATA_MEMBER).decode())
    except (zipfile.BadZipFile, OSError, EOFError):  # a damaged directory can point a read past the file's end
        raise ValueError(f"model file {path} is not a zip archive (corrupt, or not an SB3 model)") from None
    sidecar = path.parent / METADATA_MEMBER
    if sidecar.is_file():
        return json.loads(sidecar.read_text())
    raise ValueError(f"model file {path} has no {METADATA_MEMBER} (inside or beside it): not saved by arena-gym train")


def read_model_info(path: str | Path) -> ModelInfo:
    """The metadata of a saved model; one-line ValueError naming the file if it is missing or corrupt."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"model file {path} is a directory; name its model zip (e.g. {path / 'best_model.zip'})")
    if not path.is_file():
        raise ValueError(f"model file {path} does not exist")
    context = f"model file {path}: metadata"
    try:
        info = build(
            ModelInfo,
            _raw_metadata(path),
            context,
            readers={"env_config": lambda v: build(EnvConfig, v, f"{context}: env_config")},
        )
        if info.policy not in POLICIES:
            raise ValueError(f"unknown policy architecture {info.policy!r} (valid: {', '.join(POLICIES)})")
        algo_spec(info.algo)
    except (TypeError, ValueError) as exc:
        message = str(exc).splitlines()[0]
        raise ValueError(
            message if message.startswith("model file") else f"model file {path}: invalid metadata: {message}"
        ) from None
    return info


def env_spaces(config: EnvConfig) -> tuple[gym.Space, gym.Space]:
    """The observation and action spaces of the env ``config`` describes (no simulator is built)."""
    cluster = resolve_cluster(config.cluster)
    codec = ActionCodec(cluster, config)
    return ObservationEncoder(cluster, codec, config).space, gym.spaces.Discrete(codec.n_actions)


def load_model(path: str | Path) -> tuple[Any, ModelInfo]:
    """Load a saved model on the CPU with its metadata, unpickling nothing from the file.

    The weights go through SB3's loader (``torch.load(weights_only=True)``); the pickled
    attributes are replaced (:mod:`agents.rl.safe_load`), the spaces rebuilt from the EnvConfig.
    """
    info = read_model_info(path)
    cls = algo_spec(info.algo).cls()
    expected = policy_class(info.algo, info.policy)
    recorded = recorded_policy_class(path)
    if recorded is not None and recorded != (expected.__module__, expected.__name__):
        raise ValueError(
            f"model file {path}: its metadata names {info.algo} ({info.policy} policy) but it holds a "
            f"{recorded[1]} policy (another algorithm or architecture)"
        )
    try:
        custom = safe_custom_objects(path, expected, *env_spaces(info.env_config))
        model = cls.load(str(path), device="cpu", custom_objects=custom)
    except pickle.UnpicklingError:
        raise ValueError(
            f"model file {path}: a tensor member holds pickled objects, refused (only plain tensors are loaded)"
        ) from None
    except (
        zipfile.BadZipFile,
        ValueError,
        KeyError,
        RuntimeError,
        EOFError,
        OSError,
        AssertionError,
        TypeError,
    ) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(
            message if message.startswith("model file") else f"model file {path} cannot be loaded: {message}"
        ) from None
    if algo_name(model) != info.algo:
        raise ValueError(f"model file {path}: metadata says {info.algo} but it holds a {algo_name(model)} model")
    return model, info
