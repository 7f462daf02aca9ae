"""One rank's share of a job under an :class:`~real_runner.plans.ExecutedPlan`.

The ranks form a ``DeviceMesh`` of shape (pp, dp, tp) (row-major: rank = (pp_i * dp + dp_i) * tp + tp_i).
Each rank builds only its pipeline stage's layers (:class:`~real_runner.model.GPT` over the stage's
layer range), then applies, in this order:

* tensor parallelism on ``mesh["tp"]`` with DTensor: q/k/v and ``fc1`` column-wise, ``wo`` and
  ``fc2`` row-wise; attention then runs on ``heads / tp`` local heads (embedding, norms and head stay
  replicated);
* data parallelism on ``mesh["dp"]`` with FSDP2 (``fully_shard`` per block, then the stage root);
* pipeline parallelism over ``mesh["pp"]`` with ``PipelineStage`` and ``ScheduleGPipe`` /
  ``Schedule1F1B`` (``n_microbatches`` = the plan's micro-batches).

A single-stage plan with several micro-batches accumulates gradients over them. The optimizer is
AdamW (torch defaults, the job's learning rate), created after sharding. A one-rank plan runs the
plain model and needs no process group.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from arena_gym.types import PipeSchedule
from estimator.zoo import TransformerSpec
from real_runner.data import global_batch, replica_slice
from real_runner.model import GPT, loss_fn
from real_runner.plans import ExecutedPlan

log = logging.getLogger(__name__)

#: DTensor layout of one block under tensor parallelism (Megatron-style column/row split).
TP_LAYOUT = {
    "attn.wq": ColwiseParallel(),
    "attn.wk": ColwiseParallel(),
    "attn.wv": ColwiseParallel(),
    "attn.wo": RowwiseParallel(),
    "mlp.fc1": ColwiseParallel(),
    "mlp.fc2": RowwiseParallel(),
}

#: Pipeline schedule class of each plan schedule.
SCHEDULES = {PipeSchedule.GPIPE: ScheduleGPipe, PipeSchedule.ONE_F_ONE_B: Schedule1F1B}


def default_device() -> torch.device:
    """CUDA when available, else CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def backend_for(device: torch.device) -> str:
    """Process-group backend for a device type: nccl for CUDA, gloo for CPU."""
    return "nccl" if device.type == "cuda" else "gloo"


def reset_distributed_caches() -> None:
    """Clear DTensor's sharding-propagation caches; call after every ``destroy_process_group()``
    before forming a new group in the same process (a DeviceMesh compares equal whichever ranks hold
    it, so stale cached shardings would otherwise corrupt weights after ranks are permuted)."""
    DTensor._op_dispatcher.sharding_propagator.propagate_op_sharding.cache_clear()
    torch._C._clear_DTensor_sharding_propagator_cache()


@dataclass(frozen=True)
class Coordinates:
    """A rank's position in the (pp, dp, tp) mesh."""

    rank: int
    pp_rank: int
    dp_rank: int
    tp_rank: int

    @staticmethod
    def of(rank: int, executed: ExecutedPlan) -> Coordinates:
        """Coordinates of global ``rank`` (row-major over pp, dp, tp)."""
        dp, tp = executed.dp, executed.tp
        return Coordinates(rank, rank // (dp * tp), (rank // tp) % dp, rank % tp)


class Trainer:
    """This rank's stage of the model, its optimizer and (for pipelines) its schedule.

    ``rank`` is the rank in the default process group, whose size must equal the plan's world
    size when that is above one.
    """

    def __init__(
        self,
        spec: TransformerSpec,
        executed: ExecutedPlan,
        *,
        rank: int,
        global_batch: int,
        lr: float,
        seed: int,
        device: torch.device,
    ) -> None:
        self.spec, self.executed, self.device = spec, executed, device
        self.batch, self.seed = global_batch, seed
        self.coords = Coordinates.of(rank, executed)
        pp, dp, tp = executed.pp, executed.dp, executed.tp
        stage = executed.plan.stages[self.coords.pp_rank]
        self.model = GPT(spec, stage.layer_start, stage.layer_end, seed=seed).to(device)
        self.first = self.coords.pp_rank == 0
        self.last = self.coords.pp_rank == pp - 1
        self.schedule = None
        if executed.world_size > 1:
            if not dist.is_initialized() or dist.get_world_size() != executed.world_size:
                raise RuntimeError(f"plan {executed.describe()} needs a process group of {executed.world_size} ranks")
            mesh = init_device_mesh(device.type, (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
            if tp > 1:
                for block in self.model.blocks.values():
                    parallelize_module(block, mesh["tp"], TP_LAYOUT)
            if dp > 1:
                for block in self.model.blocks.values():
                    fully_shard(block, mesh=mesh["dp"], reshard_after_forward=pp == 1)
                fully_shard(self.model, mesh=mesh["dp"], reshard_after_forward=pp == 1)
            if pp > 1:
                pipe = PipelineStage(self.model, self.coords.pp_rank, pp, device, group=mesh["pp"].get_group())
                self.schedule = SCHEDULES[executed.plan.schedule](
                    pipe, n_microbatches=executed.plan.micro_batches, loss_fn=loss_fn
                )
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        log.debug(
            "rank %d: stage %d of %s, %d local parameters",
            rank,
            self.coords.pp_rank,
            executed.describe(),
            self.local_parameters(),
        )

    def local_parameters(self) -> int:
        """Parameter elements held by this rank (shards count their local part)."""
        return sum((p.to_local() if isinstance(p, DTensor) else p).numel() for p in self.model.parameters())

    def train_step(self, step: int) -> float:
        """Train on the global batch of ``step``; return its mean loss (the same on every rank)."""
        x, y = global_batch(self.seed, step, self.batch, self.spec.seq_len, self.spec.vocab)
        x, y = replica_slice(x, y, self.coords.dp_rank, self.executed.dp)
        x, y = x.to(self.device), y.to(self.device)
        micro = self.executed.plan.micro_batches
        loss = torch.zeros((), device=self.device)  # this rank's mean loss; stays 0 on non-final pipeline stages
        if self.schedule is None:
            for i, (xm, ym) in enumerate(zip(x.chunk(micro), y.chunk(micro))):
                if isinstance(self.model, FSDPModule):
                    self.model.set_requires_gradient_sync(i == micro - 1)
                part = loss_fn(self.model(xm), ym) / micro
                part.backward()
                loss += part.detach()
        elif self.first:
            self.schedule.step(x)
        elif self.last:
            losses: list[torch.Tensor] = []
            self.schedule.step(target=y, losses=losses)
            loss = torch.stack([v.detach() for v in losses]).mean()
        else:
            self.schedule.step()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.executed.world_size == 1:
            return float(loss)
        owner = self.last and self.coords.tp_rank == 0
        total = loss / self.executed.dp if owner else torch.zeros((), device=self.device)
        dist.all_reduce(total)
        return float(total)
