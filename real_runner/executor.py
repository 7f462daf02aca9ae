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
AdamW (torch defaults, the job's learning rate; the fused kernel on CUDA, the foreach one
elsewhere), created after sharding. A one-rank plan runs the plain model and needs no process group.

Precision (:mod:`real_runner.precision`): with data parallelism FSDP2's ``MixedPrecisionPolicy``
gathers parameters in the compute dtype; without it the model's forward runs under autocast. fp16
scales the loss with a gradient scaler whose overflow check is agreed by every rank. ``remat`` makes
every block recompute its activations in the backward pass.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.amp import GradScaler
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.experimental import implicit_replication
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from arena_gym.types import PipeSchedule
from estimator.zoo import TransformerSpec
from real_runner.data import global_batch, replica_slice
from real_runner.model import GPT, loss_fn
from real_runner.plans import ExecutedPlan
from real_runner.precision import PRECISIONS, Precision

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


#: AdamW's implementation per device type (any other type: ``foreach``).
ADAMW_KERNELS = {"cuda": "fused"}


def make_optimizer(params: list[torch.nn.Parameter], lr: float, device: torch.device) -> torch.optim.AdamW:
    """AdamW over ``params`` with the fastest implementation the device has (fused on CUDA, foreach elsewhere).

    DTensor and plain parameters (tensor parallelism shards blocks, not the embedding or head) go in
    separate parameter groups: a multi-tensor kernel takes one kind per call.
    """
    kernel = ADAMW_KERNELS.get(device.type, "foreach")
    kinds = [[p for p in params if isinstance(p, DTensor)], [p for p in params if not isinstance(p, DTensor)]]
    return torch.optim.AdamW([{"params": group} for group in kinds if group], lr=lr, **{kernel: True})


def make_scaler(precision: Precision, device: torch.device, world_size: int) -> GradScaler | None:
    """The gradient scaler of a loss-scaled precision (None otherwise); with several ranks its overflow
    check is all-reduced over the default group, so every rank skips or takes the same steps."""
    if not precision.scaled:
        return None
    scaler = ShardedGradScaler(device.type) if world_size > 1 else GradScaler(device.type)
    scaler.scale(torch.ones((), device=device))  # sets the scale on every rank, also where no loss is computed
    return scaler


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
    size when that is above one. ``precision`` is the compute precision (parameters and optimizer
    stay fp32), ``remat`` whether blocks recompute their activations in the backward pass.
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
        precision: Precision = PRECISIONS["fp32"],
        remat: bool = False,
    ) -> None:
        self.spec, self.executed, self.device = spec, executed, device
        self.batch, self.seed = global_batch, seed
        self.precision, self.remat = precision, remat
        self.coords = Coordinates.of(rank, executed)
        pp, dp, tp = executed.pp, executed.dp, executed.tp
        stage = executed.plan.stages[self.coords.pp_rank]
        autocast = precision.compute_dtype if dp == 1 else None  # with dp > 1 FSDP2 casts instead
        self.model = GPT(spec, stage.layer_start, stage.layer_end, seed=seed, remat=remat, autocast=autocast)
        self.model.to(device)
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
                    fully_shard(
                        block, mesh=mesh["dp"], reshard_after_forward=pp == 1, mp_policy=precision.fsdp_policy(False)
                    )
                fully_shard(
                    self.model, mesh=mesh["dp"], reshard_after_forward=pp == 1, mp_policy=precision.fsdp_policy(True)
                )
            if pp > 1:
                pipe = PipelineStage(self.model, self.coords.pp_rank, pp, device, group=mesh["pp"].get_group())
                self.schedule = SCHEDULES[executed.plan.schedule](
                    pipe, n_microbatches=executed.plan.micro_batches, loss_fn=self._loss
                )
        self.optimizer = make_optimizer(list(self.model.parameters()), lr, device)
        self.scaler = make_scaler(precision, device, executed.world_size)
        log.debug(
            "rank %d: stage %d of %s, %d local parameters",
            rank,
            self.coords.pp_rank,
            executed.describe(),
            self.local_parameters(),
        )

    def _loss(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The loss that backward starts from: scaled when the precision scales gradients."""
        loss = loss_fn(logits, targets)
        return loss if self.scaler is None else self.scaler.scale(loss)

    def _unscaled(self, loss: torch.Tensor) -> torch.Tensor:
        return loss if self.scaler is None else loss / self.scaler.get_scale()

    def _optimizer_step(self) -> None:
        if self.scaler is None:
            self.optimizer.step()
        else:
            # the scaler's overflow flag is a one-element plain tensor beside DTensor gradients
            with implicit_replication(), warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*implicitly creating a replicated DTensor.*")
                self.scaler.step(self.optimizer)
            self.scaler.update()

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
                part = self._loss(self.model(xm), ym) / micro
                part.backward()
                loss += self._unscaled(part.detach())
        elif self.first:
            self.schedule.step(x)
        elif self.last:
            losses: list[torch.Tensor] = []
            self.schedule.step(target=y, losses=losses)
            loss = self._unscaled(torch.stack([v.detach() for v in losses]).mean())
        else:
            self.schedule.step()
        self._optimizer_step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.executed.world_size == 1:
            return float(loss)
        owner = self.last and self.coords.tp_rank == 0
        total = loss / self.executed.dp if owner else torch.zeros((), device=self.device)
        dist.all_reduce(total)
        return float(total)
