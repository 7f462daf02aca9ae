"""Checkpoint manifests: what the writer writes verifies, and a manifest of the wrong shape is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from real_runner.checkpoint_files import (
    MANIFEST,
    CheckpointError,
    JobIdentity,
    prepare_partial,
    publish,
    verify,
)

IDENTITY = JobIdentity("gpt__tiny", "abc123", seed=0, global_batch=8, lr=1e-3)


def published(ckpt: Path, step: int = 3) -> Path:
    """A complete-looking checkpoint of ``step`` (a fake .metadata, a consistent manifest) with the job's extras."""
    (prepare_partial(ckpt, step) / ".metadata").write_bytes(b"not a real checkpoint")
    return publish(ckpt, step, IDENTITY, {"job_id": "j", "world_size": 2, "plan": {"micro": 1}}).path


def test_what_the_writer_writes_verifies_with_its_extras_kept(tmp_path):
    path = published(tmp_path)
    info = verify(path)
    assert (info.step, info.identity) == (3, IDENTITY)
    assert info.manifest == json.loads((path / MANIFEST).read_text())
    assert info.manifest["job_id"] == "j" and info.manifest["plan"] == {"micro": 1}


def _rewrite(path: Path, change) -> None:
    manifest = json.loads((path / MANIFEST).read_text())
    (path / MANIFEST).write_text(json.dumps(change(manifest)))


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda m: [m], "step_00000003: manifest must be an object, got [{"),
        (
            lambda m: {**m, "identity": "gpt__tiny"},
            "step_00000003: manifest: identity must be an object, got 'gpt__tiny'",
        ),
        (lambda m: {**m, "step": True}, "step_00000003: manifest: step must be an integer, got True"),
        (lambda m: {**m, "step": "3"}, "step_00000003: manifest: step must be an integer, got '3'"),
        (lambda m: {k: v for k, v in m.items() if k != "files"}, "step_00000003: manifest: missing field(s) files"),
        (lambda m: {**m, "files": ["x"]}, "step_00000003: manifest: files must be a mapping, got ['x']"),
        (
            lambda m: {**m, "files": {".metadata": {"size": "21", "sha256": "0"}}},
            "step_00000003: manifest: files[.metadata]: size must be an integer, got '21'",
        ),
        (
            lambda m: {**m, "identity": {**m["identity"], "seed": None}},
            "step_00000003: manifest: identity: seed must be an integer, got None",
        ),
        (
            lambda m: {**m, "identity": {**m["identity"], "batch": 8}},
            "step_00000003: manifest: identity: unknown field(s) batch; valid: model,",
        ),
        (lambda m: {**m, "format": 2}, "step_00000003: manifest format 2, expected 1"),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_refused_in_one_line(tmp_path, change, says):
    path = published(tmp_path)
    _rewrite(path, change)
    with pytest.raises(CheckpointError) as info:
        verify(path)
    assert str(info.value).startswith(says) and "\n" not in str(info.value)


def test_a_manifest_that_is_not_json_is_unreadable(tmp_path):
    path = published(tmp_path)
    (path / MANIFEST).write_text('{"format": 1,')
    with pytest.raises(CheckpointError, match=r"step_00000003/checkpoint.json is unreadable \(JSONDecodeError"):
        verify(path)
