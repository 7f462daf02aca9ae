"""Fuzz saved SB3 models (``agents.rl.artifact.load_model``, what ``sb3:PATH`` loads): a model zip truncated, with
bytes overwritten or members dropped, and with its ``arena_gym.json`` metadata altered (another env, cluster,
algorithm or policy architecture, nonsense values, keys dropped or added, not JSON).

A file either loads, and then the model's spaces are exactly those of the env its metadata describes and it acts in
that env's action space, or it is refused with a one-line ValueError naming the file. Never another exception.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from sb3_contrib import MaskablePPO

from agents.rl.artifact import METADATA_MEMBER, ModelInfo, env_spaces, load_model, save_model
from agents.rl.env_factory import env_config, make_env
from tests.fuzzing import assert_one_line, case_timeout, fuzz_budget
from tests.rl_cases import ENV_ID

TIMEOUT_S = 30.0


_SAVED: dict[str, Any] = {}


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, env_overrides: dict) -> Path:
    """An untrained MaskablePPO saved with its metadata (its bytes and metadata in ``_SAVED``, which hypothesis
    does not print with a failing case)."""
    env = make_env(ENV_ID, env_overrides)
    model = MaskablePPO("MultiInputPolicy", env, seed=3, device="cpu", n_steps=64, batch_size=32)
    path = tmp_path_factory.mktemp("model") / "agent.zip"
    save_model(model, path, ModelInfo("maskable_ppo", ENV_ID, env_config(ENV_ID, env_overrides), "test"))
    with zipfile.ZipFile(path) as archive:
        _SAVED.update(source=path.read_bytes(), meta=json.loads(archive.read(METADATA_MEMBER)))
    return path


def rewrite(source: bytes, target: Path, drop: str | None = None, replace: dict[str, bytes] | None = None) -> None:
    """A copy of the zip ``source`` at ``target`` without member ``drop`` and with members replaced."""
    import io

    with zipfile.ZipFile(io.BytesIO(source)) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            if item.filename == drop:
                continue
            data = (replace or {}).get(item.filename, old.read(item.filename))
            new.writestr(item, data)


NONSENSE = st.sampled_from([None, True, 0, -1, 1.5, "", "zz", [], {}, "inf", 2**70, {"x": 1}])
ENV_CONFIG_VALUES = {
    "cluster": st.sampled_from(["testbed-64", "arena-1280", "tiny", "zz", None, 3]),
    "max_queue": st.sampled_from([1, 2, 64, 0, -1, 1.5, "8", None]),
}


@st.composite
def damage(draw, meta: dict[str, Any]) -> tuple[str, Any]:
    kind = draw(
        st.sampled_from(["truncate", "overwrite", "drop member", "metadata field", "env_config field", "metadata json"])
    )
    if kind == "truncate":
        return kind, draw(st.floats(0, 0.999))
    if kind == "overwrite":
        return kind, (draw(st.floats(0, 1)), draw(st.binary(min_size=1, max_size=32)))
    if kind == "drop member":
        return kind, draw(st.sampled_from([METADATA_MEMBER, "data", "policy.pth", "pytorch_variables.pth"]))
    if kind == "metadata json":
        return kind, draw(st.sampled_from([b"", b"{", b"null", b"[]", b"\xff\xfe", b'{"algo": "maskable_ppo"}']))
    if kind == "metadata field":
        key = draw(st.sampled_from(["algo", "env_id", "policy", "code_version", "env_config", "extra"]))
        valid = {
            "algo": st.sampled_from(["ppo", "dqn", "maskable_ppo", "a2c"]),
            "env_id": st.sampled_from(["ArenaGym/Tiny-v1", "ArenaGym/Sched-v1", "CartPole-v1", "zz"]),
            "policy": st.sampled_from(["mlp", "slots", "attention", "zz"]),
        }
        value = draw(valid.get(key, NONSENSE) | NONSENSE)
        return kind, (key, value, draw(st.booleans()))
    field = draw(st.sampled_from(sorted(meta["env_config"])))
    value = draw(ENV_CONFIG_VALUES.get(field, NONSENSE) | NONSENSE)
    return kind, (field, value)


_CASES = iter(range(10**9))


def damaged_file(tmp: Path, source: bytes, meta: dict[str, Any], kind: str, arg: Any) -> Path:
    path = tmp / f"model{next(_CASES)}.zip"
    if kind == "truncate":
        path.write_bytes(source[: int(arg * len(source))])
    elif kind == "overwrite":
        where, blob = arg
        data = bytearray(source)
        at = int(where * (len(data) - len(blob)))
        data[at : at + len(blob)] = blob
        path.write_bytes(bytes(data))
    elif kind == "drop member":
        rewrite(source, path, drop=arg)
    elif kind == "metadata json":
        rewrite(source, path, replace={METADATA_MEMBER: arg})
    else:
        changed = json.loads(json.dumps(meta))
        if kind == "metadata field":
            key, value, remove = arg
            if remove:
                changed.pop(key, None)
            else:
                changed[key] = value
        else:
            field, value = arg
            changed["env_config"][field] = value
        rewrite(source, path, replace={METADATA_MEMBER: json.dumps(changed).encode()})
    return path


@fuzz_budget(25)
@given(data=st.data())
def test_a_damaged_model_zip_loads_for_its_env_or_is_refused_in_one_line(saved, tmp_path_factory, data) -> None:
    source, meta = _SAVED["source"], _SAVED["meta"]
    kind, arg = data.draw(damage(meta))
    path = damaged_file(tmp_path_factory.getbasetemp(), source, meta, kind, arg)
    with case_timeout(TIMEOUT_S):
        try:
            model, info = load_model(path)
        except ValueError as exc:
            event(f"{kind}: refused")
            assert_one_line(exc, str(path))
            return
        event(f"{kind}: loaded")
        observation_space, action_space = env_spaces(info.env_config)
        assert model.observation_space == observation_space and model.action_space == action_space
        obs = observation_space.sample()
        action, _ = model.predict(obs, deterministic=True)
        assert action_space.contains(int(np.asarray(action).item()))


def test_a_zip_whose_end_record_points_past_the_file_is_refused_in_one_line(saved, tmp_path_factory) -> None:
    # found by the long run: the end-of-directory record's last bytes overwritten; the read seeks to an invalid offset
    path = damaged_file(
        tmp_path_factory.getbasetemp(), _SAVED["source"], _SAVED["meta"], "overwrite", (0.9999999999999999, b"\x01\x00")
    )
    with pytest.raises(ValueError) as refused:
        load_model(path)
    assert_one_line(refused.value, str(path))
