"""Checkpoint directory layout, manifests and selection (plain files; no torch here).

Layout of a job's checkpoint directory::

    CKPT/
      step_00000040/          a complete checkpoint: DCP files (.metadata, __R_0.distcp) and
        checkpoint.json       the manifest (job identity, step, plan, size and sha256 of every file)
      step_00000050/          the newest complete checkpoint
      step_00000060.partial/  being written (or left by a crash): never read
      latest                  "step_00000050": rewritten atomically after each publish

A checkpoint is written into ``step_N.partial``; once every rank has finished, rank 0 writes the
manifest, renames the directory to ``step_N`` and rewrites ``latest`` (write + fsync + rename).
The newest two complete checkpoints are kept. Selection verifies the manifest (sizes and hashes,
so nothing torch later unpickles can have changed) and falls back, with a log line, from a
partial or corrupt checkpoint to the previous complete one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from arena_gym.fields import FieldError, build, check

log = logging.getLogger(__name__)

MANIFEST = "checkpoint.json"
POINTER = "latest"
FORMAT = 1
#: Complete checkpoints kept: the newest and the previous one.
KEEP = 2
_STEP_DIR = re.compile(r"^step_(\d{8})$")
_PARTIAL_DIR = re.compile(r"^step_(\d{8})\.partial$")


class CheckpointError(ValueError):
    """A checkpoint that is missing, corrupt, or belongs to another model or job."""


@dataclass(frozen=True)
class JobIdentity:
    """What a checkpoint must match to be resumed: the model and the job's training settings."""

    model: str
    fingerprint: str  # the estimator's hash of the architecture
    seed: int
    global_batch: int
    lr: float

    def mismatch(self, other: JobIdentity) -> str | None:
        """A phrase naming the first field where ``other`` (a checkpoint's) differs, or None."""
        for key in ("model", "fingerprint", "seed", "global_batch", "lr"):
            mine, theirs = getattr(self, key), getattr(other, key)
            if mine != theirs and not (isinstance(mine, float) and math.isclose(mine, theirs, rel_tol=1e-12)):
                return f"{key} {theirs!r} in the checkpoint, {mine!r} in the job"
        return None


@dataclass(frozen=True)
class FileEntry:
    """A file of a checkpoint as its manifest lists it."""

    size: int
    sha256: str


@dataclass(frozen=True)
class ManifestFile:
    """The keys of ``checkpoint.json`` that verification reads (the job's extras sit beside them, unread)."""

    format: int
    step: int
    saved_at: float
    identity: JobIdentity
    files: Mapping[str, FileEntry]


_MANIFEST_KEYS = frozenset(f.name for f in fields(ManifestFile))


def _read_manifest(data: Any, context: str) -> ManifestFile:
    """The manifest in the JSON value ``data``; FieldError (one line, prefixed ``context``) when it is malformed."""
    files = f"{context}: files"
    return build(
        ManifestFile,
        {k: v for k, v in data.items() if k in _MANIFEST_KEYS} if isinstance(data, Mapping) else data,  # extras unread
        context,
        readers={
            "identity": lambda v: build(JobIdentity, v, f"{context}: identity"),
            "files": lambda v: {
                name: build(FileEntry, entry, f"{files}[{name}]")
                for name, entry in check(v, Mapping[str, Any], files).items()
            },
        },
    )


@dataclass(frozen=True)
class CheckpointInfo:
    """A verified, complete checkpoint."""

    path: Path
    step: int
    identity: JobIdentity
    manifest: Mapping[str, Any] = field(default_factory=dict)


def step_dir(ckpt_dir: Path, step: int) -> Path:
    """Directory of the complete checkpoint of ``step``."""
    return Path(ckpt_dir) / f"step_{step:08d}"


def partial_dir(ckpt_dir: Path, step: int) -> Path:
    """Directory a checkpoint of ``step`` is written into before it is published."""
    return Path(ckpt_dir) / f"step_{step:08d}.partial"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def prepare_partial(ckpt_dir: Path, step: int) -> Path:
    """Create an empty ``step_N.partial`` directory (removing a stale one); return it."""
    path = partial_dir(ckpt_dir, step)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def publish(ckpt_dir: Path, step: int, identity: JobIdentity, extra: Mapping[str, Any]) -> CheckpointInfo:
    """Make the written ``step_N.partial`` the newest complete checkpoint (call once, after every rank wrote).

    Writes the manifest, renames the directory, rewrites ``latest`` and prunes older checkpoints.
    """
    ckpt_dir = Path(ckpt_dir)
    src = partial_dir(ckpt_dir, step)
    files = {
        p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(src.iterdir())
        if p.is_file() and p.name != MANIFEST
    }
    if ".metadata" not in files:
        raise RuntimeError(f"{src}: DCP wrote no .metadata")
    manifest = {
        "format": FORMAT,
        "step": step,
        "saved_at": time.time(),
        "identity": asdict(identity),
        **dict(extra),
        "files": files,
    }
    with open(src / MANIFEST, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=1)
        fh.flush()
        os.fsync(fh.fileno())
    dst = step_dir(ckpt_dir, step)
    if dst.exists():  # a corrupt checkpoint of the same step that selection skipped
        shutil.rmtree(dst)
    os.rename(src, dst)
    _fsync_dir(ckpt_dir)
    # From here the checkpoint is complete and selection finds it (the newest verified step wins), so it must be
    # reported even if the pointer cannot be rewritten (a full disk): raising here would hide a checkpoint that the
    # next generation resumes from. The pointer only names the newest; selection warns when it names another.
    try:
        _write_atomic(ckpt_dir / POINTER, dst.name + "\n")
    except OSError as exc:
        log.warning("%s: published, but its pointer %s was not rewritten (%s)", dst, POINTER, exc)
        (ckpt_dir / f"{POINTER}.tmp").unlink(missing_ok=True)
    _prune(ckpt_dir)
    return CheckpointInfo(dst, step, identity, manifest)


def _prune(ckpt_dir: Path) -> None:
    complete = sorted((int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _STEP_DIR.match(p.name)))
    for _, path in complete[:-KEEP]:
        shutil.rmtree(path, ignore_errors=True)
    for path in ckpt_dir.iterdir():
        if _PARTIAL_DIR.match(path.name):
            shutil.rmtree(path, ignore_errors=True)


def read_pointer(ckpt_dir: Path) -> str | None:
    """The directory name ``latest`` names, or None when there is none."""
    try:
        return (Path(ckpt_dir) / POINTER).read_text(encoding="utf-8").strip() or None
    except FileNotFoundError:
        return None


def verify(path: Path) -> CheckpointInfo:
    """Check a complete checkpoint against its manifest; CheckpointError with the reason otherwise."""
    path = Path(path)
    m = _STEP_DIR.match(path.name)
    if not m:
        raise CheckpointError(f"{path.name} is not a complete checkpoint directory (step_NNNNNNNN)")
    try:
        data = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path.name} has no {MANIFEST} (incomplete)") from None
    except ValueError as exc:
        raise CheckpointError(f"{path.name}/{MANIFEST} is unreadable ({type(exc).__name__}: {exc})") from None
    try:
        manifest = _read_manifest(data, f"{path.name}: manifest")
    except FieldError as exc:
        raise CheckpointError(str(exc)) from None
    if manifest.format != FORMAT:
        raise CheckpointError(f"{path.name}: manifest format {manifest.format!r}, expected {FORMAT}")
    if manifest.step != int(m.group(1)):
        raise CheckpointError(f"{path.name}: manifest says step {manifest.step}")
    if ".metadata" not in manifest.files:
        raise CheckpointError(f"{path.name}: manifest lists no .metadata")
    for name, entry in manifest.files.items():
        file = path / name
        if not file.is_file():
            raise CheckpointError(f"{path.name}: file {name} is missing")
        size = file.stat().st_size
        if size != entry.size:
            raise CheckpointError(f"{path.name}: file {name} has {size} bytes, the manifest says {entry.size}")
        if _sha256(file) != entry.sha256:
            raise CheckpointError(f"{path.name}: file {name} does not match its sha256 (corrupt)")
    return CheckpointInfo(path, manifest.step, manifest.identity, data)


def select_checkpoint(ckpt_dir: Path, identity: JobIdentity, require: bool = False) -> CheckpointInfo | None:
    """The newest verified checkpoint of ``ckpt_dir`` to resume from, or None for a fresh start.

    Partial or corrupt checkpoints are skipped with a warning. CheckpointError when the newest
    complete one belongs to another model or job, when checkpoints exist but none verifies, or when
    ``require`` is set and there is none.
    """
    ckpt_dir = Path(ckpt_dir)
    steps = (
        sorted(((int(m.group(1)), p) for p in ckpt_dir.iterdir() if (m := _STEP_DIR.match(p.name))), reverse=True)
        if ckpt_dir.is_dir()
        else []
    )
    reasons = []
    for _, path in steps:
        try:
            info = verify(path)
        except CheckpointError as exc:
            log.warning("skipping checkpoint %s: %s", path, exc)
            reasons.append(str(exc))
            continue
        problem = identity.mismatch(info.identity)
        if problem:
            raise CheckpointError(
                f"checkpoint {path} belongs to another job ({problem}); use another checkpoint directory"
            )
        if read_pointer(ckpt_dir) != path.name:
            log.warning(
                "resuming from %s, the newest complete checkpoint (latest names %s)", path.name, read_pointer(ckpt_dir)
            )
        return info
    if reasons:
        raise CheckpointError(f"no usable checkpoint in {ckpt_dir}: {'; '.join(reasons)}")
    if require:
        raise CheckpointError(f"no checkpoint in {ckpt_dir} to resume from")
    return None
