"""WorkerSpec: JSON round trip and one-line errors."""

from __future__ import annotations

import json

import pytest

from arena_gym.types import PipeSchedule, Plan, StagePlan
from real_runner.spec import WorkerSpec

PLAN = Plan((StagePlan(0, 3, 1, 1), StagePlan(3, 6, 1, 1)), 4, PipeSchedule.ONE_F_ONE_B)


def spec(**kw):
    return WorkerSpec(
        **{
            "job_id": "j1",
            "model": "gpt__tiny",
            "global_batch": 8,
            "plan": PLAN,
            "target_step": 10,
            "checkpoint_dir": "ck",
            "progress_path": "p.jsonl",
            **kw,
        }
    )


def test_json_round_trip(tmp_path):
    s = spec(
        seed=3,
        checkpoint_every_steps=5,
        checkpoint_every_s=2.5,
        lr=3e-4,
        require_checkpoint=True,
        precision="bf16",
        remat="on",
    )
    path = tmp_path / "s.json"
    path.write_text(s.to_json())
    assert WorkerSpec.load(path) == s
    assert json.loads(s.to_json())["plan"]["schedule"] == "1f1b"


def test_identity_names_the_model_and_training_settings():
    a, b = spec().identity(), spec(lr=2e-3).identity()
    assert a.model == "gpt__tiny" and len(a.fingerprint) == 16
    assert a.mismatch(a) is None
    assert a.mismatch(b) == "lr 0.002 in the checkpoint, 0.001 in the job"


@pytest.mark.parametrize(
    "change,message",
    [
        ({"extra": 1}, "unknown field.s. extra"),
        ({"model": None}, "model must be a string"),
        ({"global_batch": 8.5}, "global_batch must be an integer"),
        ({"global_batch": 0}, "global_batch must be >= 1"),
        ({"target_step": 0}, "target_step must be >= 1"),
        ({"lr": -1}, "lr must be a positive number"),
        ({"device": "tpu"}, "device 'tpu' is unknown; valid: auto, cpu, cuda"),
        ({"require_checkpoint": 1}, "require_checkpoint must be true or false"),
        ({"plan": [1]}, "plan must be an object"),
        ({"precision": "fp8"}, "precision 'fp8' is unknown; valid: auto, fp32, bf16, fp16"),
        ({"remat": True}, "remat must be a string"),
        ({"remat": "always"}, "remat 'always' is unknown; valid: auto, on, off"),
    ],
)
def test_invalid_specs_fail_with_one_line(change, message):
    data = {**spec().to_dict(), **change}
    with pytest.raises(ValueError, match=message) as err:
        WorkerSpec.from_dict(data)
    assert "\n" not in str(err.value)


def test_missing_fields_and_unreadable_files(tmp_path):
    data = spec().to_dict()
    del data["target_step"], data["plan"]
    with pytest.raises(ValueError, match="missing field.s. plan, target_step"):
        WorkerSpec.from_dict(data)
    with pytest.raises(ValueError, match="does not exist"):
        WorkerSpec.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="is not valid JSON"):
        WorkerSpec.load(tmp_path / "bad.json")
