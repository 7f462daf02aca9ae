"""Checkpoints that reshard: ``torch.distributed.checkpoint`` (DCP) save and load of a :class:`Trainer`.

Saved state: ``model`` and ``optim`` from ``get_state_dict`` with a flattened optimizer state (so
pipeline stages never write the same key), and ``train`` = {step, seed}. The data position is the
step (a batch is a function of (seed, step)), and no other random numbers are drawn in training, so
(seed, step) is the whole RNG state. A checkpoint written under any plan loads under any other plan
and world size: DCP maps the saved shards onto the new layout.

Loading never unpickles untrusted data: the checkpoint is first verified against its manifest
(:mod:`real_runner.checkpoint_files`), DCP's ``.metadata`` is read with an unpickler that accepts
only DCP's metadata classes, and non-tensor entries are read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import io
import logging
import pickle
import time
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import ReadItem
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)

from real_runner.checkpoint_files import CheckpointError, CheckpointInfo, JobIdentity, prepare_partial, publish
from real_runner.executor import Trainer

log = logging.getLogger(__name__)

OPTIONS = StateDictOptions(flatten_optimizer_state_dict=True)

#: The only globals a DCP ``.metadata`` pickle may name.
_METADATA_GLOBALS = {
    ("torch.distributed.checkpoint.metadata", name)
    for name in (
        "Metadata",
        "StorageMeta",
        "MetadataIndex",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "ChunkStorageMetadata",
        "TensorProperties",
        "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),
    ("pathlib", "PosixPath"),
    ("pathlib", "PurePosixPath"),
}


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP metadata only: any other global (a function, a class elsewhere) is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _METADATA_GLOBALS:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"checkpoint metadata names a forbidden global {module}.{name}")


class SafeFileSystemReader(FileSystemReader):
    """A DCP reader whose ``.metadata`` goes through :class:`_MetadataUnpickler`."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        """Read the checkpoint's metadata with the restricted unpickler."""
        with self.fs.create_stream(self._get_metadata_path(kwargs.get("rank")), "rb") as fh:
            metadata = _MetadataUnpickler(fh).load()
        if not isinstance(metadata, Metadata):
            raise pickle.UnpicklingError(f"checkpoint metadata is a {type(metadata).__name__}, not DCP Metadata")
        if metadata.storage_meta is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, reading non-tensor entries with ``weights_only=True``."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        """Restore one non-tensor entry (optimizer hyper-parameters) without arbitrary unpickling."""
        checked = io.BytesIO()
        torch.save(torch.load(value, weights_only=True), checked)  # what passed the check, written by us
        checked.seek(0)
        super().load_bytes(read_item, checked)


def _barrier(world_size: int) -> None:
    if world_size > 1:
        dist.barrier()


def save(
    trainer: Trainer,
    ckpt_dir: Path,
    step: int,
    identity: JobIdentity,
    *,
    rank: int,
    world_size: int,
    extra: Mapping[str, Any],
    published: Callable[[CheckpointInfo], None] | None = None,
) -> CheckpointInfo | None:
    """Save the trainer's state after ``step`` steps on every rank; publish it atomically.

    Returns the published checkpoint on rank 0 (None elsewhere). Rank 0 calls ``published`` the
    moment the checkpoint is complete on disk, before the final barrier: a peer that dies or hangs
    there cannot hide a checkpoint a relaunch will resume from. Every rank returns only after the
    checkpoint is complete.
    """
    if rank == 0:
        prepare_partial(Path(ckpt_dir), step)
    _barrier(world_size)
    msd, osd = get_state_dict(trainer.model, trainer.optimizer, options=OPTIONS)
    state = {"model": msd, "optim": osd, "train": {"step": torch.tensor(step), "seed": torch.tensor(trainer.seed)}}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*assuming the intent is to save in a single process.*")
        dcp.save(state, storage_writer=FileSystemWriter(Path(ckpt_dir) / f"step_{step:08d}.partial"))
    info = publish(Path(ckpt_dir), step, identity, extra) if rank == 0 else None
    if info is not None and published is not None:
        published(info)
    _barrier(world_size)
    return info


def load(trainer: Trainer, checkpoint: CheckpointInfo, restore_optimizer: bool = True) -> int:
    """Load a verified checkpoint into the trainer (any plan); return its step.

    ``restore_optimizer=False`` loads the model only and keeps the optimizer fresh (a warm start).
    """
    t0 = time.perf_counter()
    msd, osd = get_state_dict(trainer.model, trainer.optimizer, options=OPTIONS)
    train = {"step": torch.tensor(0), "seed": torch.tensor(0)}
    state: dict[str, Any] = {"model": msd, "train": train}
    if restore_optimizer:
        state["optim"] = osd
    reader = SafeFileSystemReader(checkpoint.path)
    try:
        reader.read_metadata()  # fails here, in one line, on anything but DCP metadata
    except pickle.UnpicklingError as exc:
        raise CheckpointError(f"checkpoint {checkpoint.path} refused: {exc}") from None
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*assuming the intent is to load in a single process.*")
        dcp.load(state, storage_reader=reader, planner=SafeLoadPlanner(allow_partial_load=not restore_optimizer))
    if restore_optimizer:
        set_state_dict(
            trainer.model,
            trainer.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
            options=OPTIONS,
        )
    else:
        set_model_state_dict(trainer.model, state["model"], options=OPTIONS)
    step, seed = int(train["step"]), int(train["seed"])
    if step != checkpoint.step or seed != trainer.seed:
        raise CheckpointError(
            f"checkpoint {checkpoint.path} holds step {step} / seed {seed}, its manifest says "
            f"step {checkpoint.step} and the job seed {trainer.seed}"
        )
    log.info("loaded %s (step %d) in %.2f s", checkpoint.path.name, step, time.perf_counter() - t0)
    return step
