"""Loading SB3 model zips without unpickling anything from them.

An SB3 zip stores the network weights as tensors (loaded with ``torch.load(weights_only=True)``)
and its other attributes in a JSON member, where objects JSON cannot hold (spaces, the policy
class, schedules, buffer classes) are base64 *pickles*. Unpickling a file a user hands us could
run arbitrary code, so every such entry is replaced before SB3 sees it (``custom_objects``): the
spaces are rebuilt from the EnvConfig the model was trained with, the policy class from the
algorithm, and training-only state (schedules, buffer classes, DQN's train frequency, the
last rollout's observations and episode buffers) by neutral values, since a loaded model is
used for inference. A zip with a pickled entry we do
not know is refused.
"""

from __future__ import annotations

import base64
import binascii
import json
import pickletools
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import gymnasium as gym
from stable_baselines3.common.utils import ConstantSchedule


def _training_only(_cls: Any, _obs: gym.Space, _act: gym.Space) -> Any:
    return ConstantSchedule(0.0)


def _default(_cls: Any, _obs: gym.Space, _act: gym.Space) -> None:
    return None  # SB3's _setup_model picks its default class when None


#: Pickled entry -> how to build a safe replacement from (policy class, observation space, action space).
REPLACEMENTS: Mapping[str, Callable[[Any, gym.Space, gym.Space], Any]] = MappingProxyType(
    {
        "observation_space": lambda _c, obs, _a: obs,
        "action_space": lambda _c, _o, act: act,
        "policy_class": lambda policy, _o, _a: policy,
        "lr_schedule": _training_only,
        "clip_range": _training_only,
        "clip_range_vf": _training_only,
        "exploration_schedule": _training_only,
        "rollout_buffer_class": _default,
        "replay_buffer_class": _default,
        "train_freq": lambda _c, _o, _a: 1,
        # rollout state of a model saved while it was learning; SB3 rebuilds it when learning resumes
        "_last_obs": _default,
        "_last_original_obs": _default,
        "_last_episode_starts": _default,
        "ep_info_buffer": _default,
        "ep_success_buffer": _default,
    }
)


def pickled_entries(path: str | Path) -> list[str]:
    """Names of the attributes an SB3 zip stores as pickles."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("data"))
    except (zipfile.BadZipFile, KeyError, OSError, ValueError) as exc:
        raise ValueError(f"model file {path} is not an SB3 model zip: {str(exc).splitlines()[0]}") from None
    return sorted(k for k, v in data.items() if isinstance(v, dict) and ":serialized:" in v)


def recorded_policy_class(path: str | Path) -> tuple[str, str] | None:
    """(module, class name) of the policy class an SB3 zip was saved with, read from the pickle's opcodes.

    ``pickletools.genops`` only parses the byte stream (nothing is imported or constructed),
    so this is safe on untrusted files. None when the entry is missing or unreadable.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            entry = json.loads(archive.read("data")).get("policy_class", {})
        raw = base64.b64decode(entry[":serialized:"])
        names = [arg for _, arg, _ in pickletools.genops(raw) if isinstance(arg, str)]
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, TypeError, binascii.Error):
        return None
    return (names[0], names[1]) if len(names) >= 2 else None


def safe_custom_objects(
    path: str | Path, policy_cls: Any, observation_space: gym.Space, action_space: gym.Space
) -> dict[str, Any]:
    """``custom_objects`` for the algorithm's ``load`` that replace every pickled entry of the zip."""
    objects = {}
    for key in pickled_entries(path):
        build = REPLACEMENTS.get(key)
        if build is None:
            raise ValueError(
                f"model file {path}: entry {key!r} is a pickle with no safe replacement; refusing to load it"
            )
        objects[key] = build(policy_cls, observation_space, action_space)
    return objects
