"""Checkpoints in one process: exact resume, layout and pruning, corruption, refusal of foreign pickles."""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import pickle
import shutil
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from arena_gym.types import Plan, StagePlan  # noqa: E402
from real_runner import checkpoint  # noqa: E402
from real_runner.checkpoint import SafeLoadPlanner  # noqa: E402
from real_runner.checkpoint_files import (  # noqa: E402
    MANIFEST,
    CheckpointError,
    JobIdentity,
    partial_dir,
    read_pointer,
    select_checkpoint,
    verify,
)
from real_runner.executor import Trainer  # noqa: E402
from real_runner.plans import model_spec, resolve_plan  # noqa: E402
from real_runner.spec import WorkerSpec  # noqa: E402

SPEC = model_spec("gpt__tiny")


def trainer(micro=1):
    executed = resolve_plan(SPEC, Plan((StagePlan(0, 6, 1, 1),), micro), 8, 1)
    return Trainer(SPEC, executed, rank=0, global_batch=8, lr=1e-3, seed=0, device=torch.device("cpu"))


def identity(**kw):
    plan = Plan((StagePlan(0, 6, 1, 1),), 1)
    return WorkerSpec(
        **{
            "job_id": "j",
            "model": "gpt__tiny",
            "global_batch": 8,
            "plan": plan,
            "target_step": 1,
            "checkpoint_dir": "-",
            "progress_path": "-",
            **kw,
        }
    ).identity()


def save(tr, ckpt, step):
    return checkpoint.save(tr, ckpt, step, identity(), rank=0, world_size=1, extra={"note": "test"})


@pytest.fixture(scope="module")
def two_checkpoints(tmp_path_factory):
    """A checkpoint directory with complete checkpoints of steps 4 and 6, and the losses of steps 7-9."""
    ckpt = tmp_path_factory.mktemp("ckpt")
    tr = trainer()
    for step in range(6):
        tr.train_step(step)
        if step + 1 in (2, 4, 6):
            save(tr, ckpt, step + 1)
    after = [tr.train_step(s) for s in range(6, 9)]
    return ckpt, after


@pytest.fixture()
def ckpt(two_checkpoints, tmp_path):
    path = tmp_path / "ckpt"
    shutil.copytree(two_checkpoints[0], path)
    return path


def test_a_resumed_run_continues_exactly_also_under_another_plan(two_checkpoints):
    ckpt, after = two_checkpoints
    info = select_checkpoint(ckpt, identity())
    assert info.step == 6
    for micro in (1, 4):
        tr = trainer(micro)
        assert checkpoint.load(tr, info) == 6
        resumed = [tr.train_step(s) for s in range(6, 9)]
        assert max(abs(a - b) for a, b in zip(resumed, after)) <= (0 if micro == 1 else 1e-5)


def test_layout_keeps_the_two_newest_complete_checkpoints(two_checkpoints):
    ckpt, _ = two_checkpoints
    assert sorted(p.name for p in ckpt.iterdir()) == ["latest", "step_00000004", "step_00000006"]
    assert read_pointer(ckpt) == "step_00000006"
    manifest = json.loads((ckpt / "step_00000006" / MANIFEST).read_text())
    assert manifest["step"] == 6 and manifest["note"] == "test" and manifest["identity"]["model"] == "gpt__tiny"
    assert {".metadata", "__0_0.distcp"} <= set(manifest["files"])
    assert all(len(f["sha256"]) == 64 for f in manifest["files"].values())


def test_the_checkpoint_is_announced_once_complete_before_the_final_barrier(tmp_path, monkeypatch):
    # a peer that dies or hangs in the final barrier must not hide a checkpoint a relaunch resumes from
    calls: list[str] = []
    monkeypatch.setattr(checkpoint, "_barrier", lambda world_size: calls.append("barrier"))

    def published(info):
        calls.append("published")
        assert select_checkpoint(tmp_path, identity()).step == info.step == 3

    tr = trainer()
    tr.train_step(0)
    checkpoint.save(tr, tmp_path, 3, identity(), rank=0, world_size=2, extra={}, published=published)
    assert calls == ["barrier", "published", "barrier"]


def test_a_checkpoint_published_on_a_full_disk_is_still_announced(tmp_path, monkeypatch, caplog):
    # a full disk (the chaos soak's fault) between the rename and the pointer: the manifest and the rename went
    # through, the pointer's rewrite got ENOSPC, and the exception hid a complete checkpoint that the relaunch then
    # resumed from (unreported: the trajectory check failed on it and the journal lacked it)
    tr = trainer()
    tr.train_step(0)
    save(tr, tmp_path, 1)
    real_open = open

    def full_disk(path, *args, **kwargs):
        if str(path).endswith("latest.tmp"):
            raise OSError(28, "No space left on device", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", full_disk)
    announced = []
    tr.train_step(1)
    with caplog.at_level(logging.WARNING, logger="real_runner.checkpoint_files"):
        info = checkpoint.save(tr, tmp_path, 2, identity(), rank=0, world_size=1, extra={}, published=announced.append)
    monkeypatch.undo()
    assert info is not None and [i.step for i in announced] == [2]
    assert "pointer latest was not rewritten" in caplog.text
    assert read_pointer(tmp_path) == "step_00000001" and not (tmp_path / "latest.tmp").exists()
    assert select_checkpoint(tmp_path, identity()).step == 2


@pytest.mark.parametrize("damage", ["truncate", "flip", "no manifest", "missing file"])
def test_a_damaged_newest_checkpoint_is_skipped_with_a_log_line(ckpt, damage, caplog):
    newest = ckpt / "step_00000006"
    data = newest / "__0_0.distcp"
    if damage == "truncate":
        data.write_bytes(data.read_bytes()[:100])
    elif damage == "flip":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif damage == "no manifest":
        (newest / MANIFEST).unlink()
    else:
        data.unlink()
    with caplog.at_level(logging.WARNING, logger="real_runner.checkpoint_files"):
        info = select_checkpoint(ckpt, identity())
    assert info.step == 4
    assert "skipping checkpoint" in caplog.text and "step_00000006" in caplog.text


def test_a_partial_directory_and_a_missing_pointer_are_ignored(ckpt):
    partial_dir(ckpt, 8).mkdir()
    (partial_dir(ckpt, 8) / ".metadata").write_bytes(b"half")
    (ckpt / "latest").unlink()
    assert select_checkpoint(ckpt, identity()).step == 6


def test_nothing_usable_or_another_jobs_checkpoint_is_an_error(ckpt, tmp_path):
    with pytest.raises(CheckpointError, match="belongs to another job .lr 0.001 in the checkpoint, 0.002"):
        select_checkpoint(ckpt, identity(lr=2e-3))
    other = JobIdentity("gpt__mini", "0" * 16, 0, 8, 1e-3)
    with pytest.raises(CheckpointError, match="model 'gpt__tiny' in the checkpoint, 'gpt__mini' in the job"):
        select_checkpoint(ckpt, other)
    for step in (4, 6):
        (ckpt / f"step_{step:08d}" / ".metadata").write_bytes(b"garbage")
    with pytest.raises(CheckpointError, match="no usable checkpoint in .*step_00000006.*step_00000004"):
        select_checkpoint(ckpt, identity())
    assert select_checkpoint(tmp_path / "empty", identity()) is None
    with pytest.raises(CheckpointError, match="no checkpoint in .* to resume from"):
        select_checkpoint(tmp_path / "empty", identity(), require=True)


class _Payload:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_a_metadata_pickle_naming_other_globals_is_refused_even_with_a_matching_manifest(ckpt, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    newest = ckpt / "step_00000006"
    (newest / ".metadata").write_bytes(pickle.dumps(_Payload()))
    manifest = json.loads((newest / MANIFEST).read_text())
    size = (newest / ".metadata").stat().st_size
    manifest["files"][".metadata"] = {
        "size": size,
        "sha256": hashlib.sha256((newest / ".metadata").read_bytes()).hexdigest(),
    }
    (newest / MANIFEST).write_text(json.dumps(manifest))
    info = verify(newest)
    with pytest.raises(CheckpointError, match="forbidden global posix.system"):
        checkpoint.load(trainer(), info)
    assert not (tmp_path / "pwned").exists()


def test_non_tensor_entries_are_read_without_arbitrary_unpickling():
    buf = io.BytesIO()
    torch.save({"lr": 0.1, "betas": (0.9, 0.99)}, buf)
    planner = SafeLoadPlanner()
    planner.flatten_state_dict = False
    planner.state_dict = {}
    item = SimpleNamespace(dest_index=SimpleNamespace(fqn="x"))
    buf.seek(0)
    planner.load_bytes(item, buf)
    assert planner.state_dict["x"] == {"lr": 0.1, "betas": (0.9, 0.99)}
    evil = io.BytesIO()
    torch.save(_Payload(), evil)
    evil.seek(0)
    with pytest.raises(pickle.UnpicklingError):
        planner.load_bytes(item, evil)
