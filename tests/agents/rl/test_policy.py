"""``sb3:PATH``: a saved model becomes a Policy through the env's encoder and codec."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sb3_contrib import MaskablePPO

from agents.rl.algos import greedy_action
from agents.rl.artifact import METADATA_MEMBER, ModelInfo, load_model, read_model_info, save_model
from agents.rl.env_factory import env_config, make_env
from arena_gym.harness.cli import main
from arena_gym.harness.experiment import make_policy
from arena_gym.harness.scoring import Evaluator
from arena_gym.loop import run_episode
from arena_gym.metrics import WALL_CLOCK_KEYS, compute_metrics
from tests.rl_cases import ENV_ID, PERF, TRACE


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, env_overrides: dict) -> tuple[Path, MaskablePPO]:
    """An (untrained, seeded) MaskablePPO saved with its metadata."""
    env = make_env(ENV_ID, env_overrides)
    model = MaskablePPO("MultiInputPolicy", env, seed=3, device="cpu", n_steps=64, batch_size=32)
    path = tmp_path_factory.mktemp("model") / "agent.zip"
    save_model(model, path, ModelInfo("maskable_ppo", ENV_ID, env_config(ENV_ID, env_overrides), "test"))
    return path, model


def _episode(policy, evaluator: Evaluator) -> dict[str, float]:
    workload = evaluator.workloads[0]
    metrics = compute_metrics(run_episode(evaluator.backend(workload, policy.ap_search), policy, workload.jobs))
    return {k: v for k, v in metrics.items() if k not in WALL_CLOCK_KEYS}


def _cli(*args: str, out: Path) -> int:
    """``arena-gym ARGS`` on the tiny cluster and the test trace, writing to ``out``; its exit code."""
    return main([*args, "--cluster", "tiny", "--trace", TRACE, "--perf", PERF, "--out", str(out)])


def _rewrite(src: Path, dst: Path, member: str, payload: bytes | None) -> Path:
    """A copy of the zip ``src`` as ``dst`` with ``member`` replaced by ``payload`` (None: left out)."""
    with zipfile.ZipFile(src) as a, zipfile.ZipFile(dst, "w") as b:
        for name in a.namelist():
            if name != member:
                b.writestr(name, a.read(name))
            elif payload is not None:
                b.writestr(name, payload)
    return dst


def test_round_trip_is_deterministic(saved: tuple[Path, MaskablePPO], env_overrides: dict) -> None:
    path, _ = saved
    info = read_model_info(path)
    assert info.algo == "maskable_ppo" and info.env_config == env_config(ENV_ID, env_overrides)
    evaluator = Evaluator.for_split(info.env_config, "test", (2000,))
    first = _episode(make_policy(f"sb3:{path}", seed=1), evaluator)
    second = _episode(make_policy(f"sb3:{path}", seed=2), evaluator)
    assert first == second
    assert first["jobs_submitted"] == 8 and first["decisions"] > 0


def test_loaded_model_acts_like_the_saved_one(saved: tuple[Path, MaskablePPO], env_overrides: dict) -> None:
    path, model = saved
    loaded, _ = load_model(path)  # nothing unpickled from the file
    env = make_env(ENV_ID, env_overrides)
    obs, info = env.reset(seed=5)
    for _ in range(40):
        mask = info["action_mask"]
        action = greedy_action(model, obs, mask)
        expected, _ = model.predict(obs, action_masks=mask, deterministic=True)
        assert action == int(expected) == greedy_action(loaded, obs, mask)
        assert mask[action]
        obs, _, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            obs, info = env.reset()


def test_compare_accepts_sb3_policy(saved: tuple[Path, MaskablePPO], tmp_path: Path) -> None:
    path, _ = saved
    out = tmp_path / "compare"
    code = _cli("compare", "--policies", f"fcfs,sb3:{path}", out=out)
    assert code == 0
    board = pd.read_csv(out / "leaderboard.csv")
    assert set(board["policy"]) == {"fcfs", f"sb3:{path}"}
    assert (board["jobs_submitted"] == 8).all()


def test_other_cluster_is_a_clear_error(saved: tuple[Path, MaskablePPO]) -> None:
    path, _ = saved
    from arena_gym.harness.experiment import RunConfig, run

    with pytest.raises(ValueError, match="trained for another cluster"):
        run(RunConfig(policy=f"sb3:{path}", trace=TRACE, cluster="testbed-64", perf=PERF))


def test_missing_and_corrupt_files(tmp_path: Path, saved: tuple[Path, MaskablePPO]) -> None:
    missing = tmp_path / "nope.zip"
    with pytest.raises(ValueError, match=f"model file {missing} does not exist"):
        make_policy(f"sb3:{missing}")
    garbage = tmp_path / "garbage.zip"
    garbage.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match="not a zip archive"):
        make_policy(f"sb3:{garbage}")
    bare = _rewrite(saved[0], tmp_path / "bare.zip", METADATA_MEMBER, None)
    with pytest.raises(ValueError, match="not saved by arena-gym train"):
        make_policy(f"sb3:{bare}")
    truncated = tmp_path / "truncated.zip"
    data = saved[0].read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=str(truncated)):
        make_policy(f"sb3:{truncated}")


def test_cli_reports_a_missing_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "absent.zip"
    code = _cli("simulate", "--policy", f"sb3:{missing}", out=tmp_path / "sim")
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == f"arena-gym simulate: error: model file {missing} does not exist"


def test_greedy_action_never_picks_a_masked_action(saved: tuple[Path, MaskablePPO], env_overrides: dict) -> None:
    _, model = saved
    env = make_env(ENV_ID, env_overrides)
    obs, info = env.reset(seed=9)
    rng = np.random.default_rng(0)
    for _ in range(20):
        mask = rng.random(info["action_mask"].shape) < 0.1
        mask[rng.integers(mask.size)] = True
        assert mask[greedy_action(model, obs, mask)]
    with pytest.raises(ValueError, match="no valid action"):
        greedy_action(model, obs, np.zeros_like(mask))


def test_unknown_pickled_entry_is_refused(tmp_path: Path, saved: tuple[Path, MaskablePPO]) -> None:
    with zipfile.ZipFile(saved[0]) as archive:
        data = json.loads(archive.read("data"))
    data["surprise"] = {":type:": "<class 'object'>", ":serialized:": "gAROLg=="}
    tampered = _rewrite(saved[0], tmp_path / "tampered.zip", "data", json.dumps(data).encode())
    with pytest.raises(ValueError, match="'surprise' is a pickle with no safe replacement"):
        make_policy(f"sb3:{tampered}")


class _Payload:
    """Would run a command if unpickled."""

    def __reduce__(self):
        return (print, ("unpickled!",))


def test_tensors_holding_a_pickle_payload_are_refused_in_one_line(
    tmp_path: Path, saved: tuple[Path, MaskablePPO], capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    import torch

    buffer = io.BytesIO()
    torch.save({"weights": _Payload()}, buffer)
    evil = _rewrite(saved[0], tmp_path / "evil.zip", "policy.pth", buffer.getvalue())
    with pytest.raises(ValueError, match="holds pickled objects, refused"):
        make_policy(f"sb3:{evil}")
    code = _cli("simulate", "--policy", f"sb3:{evil}", out=tmp_path / "sim")
    captured = capsys.readouterr()
    assert code == 2 and "unpickled!" not in captured.out
    assert len(captured.err.strip().splitlines()) == 1 and "refused" in captured.err


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_metadata_naming_another_algorithm_is_a_one_line_error(
    tmp_path: Path, saved: tuple[Path, MaskablePPO], algo: str
) -> None:
    with zipfile.ZipFile(saved[0]) as archive:
        meta = json.loads(archive.read(METADATA_MEMBER))
    meta["algo"] = algo
    other = _rewrite(saved[0], tmp_path / f"{algo}.zip", METADATA_MEMBER, json.dumps(meta).encode())
    with pytest.raises(
        ValueError, match=f"metadata names {algo} \\(mlp policy\\) but it holds a MaskableMultiInputActorCriticPolicy"
    ):
        make_policy(f"sb3:{other}")
