"""Frozen domain types shared by every package: cluster, jobs, grids, plans, decisions, snapshots.

Also the two domain pieces every policy and backend plans with: the :class:`PerfModel`
protocol (iteration time and feasibility) and the :class:`OverheadModel` (what a
reconfiguration costs).
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NewType, Protocol, overload, runtime_checkable

import numpy as np

from arena_gym.families import canonical_family

JobId = NewType("JobId", str)
GpuType = NewType("GpuType", str)

#: GPU counts a job may hold (Arena: powers of two up to 16).
GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16)


def is_power_of_two(n: int) -> bool:
    """True for 1, 2, 4, 8, ..."""
    return n >= 1 and (n & (n - 1)) == 0


@dataclass(frozen=True, slots=True)
class ModelRef:
    """A model architecture by family and size label, e.g. ``gpt`` / ``1.3B``."""

    family: str
    size: str

    @property
    def name(self) -> str:
        """Canonical ``family__size`` name used in traces."""
        return f"{self.family}__{self.size}"

    @staticmethod
    def parse(text: str) -> ModelRef:
        """Parse ``family__size``; a family alias (the artifact's ``bert``) becomes its family's name."""
        spelled = ModelRef.spelled(text)
        return ModelRef(canonical_family(spelled.family), spelled.size)

    @staticmethod
    def spelled(text: str) -> ModelRef:
        """Parse ``family__size`` as written (family lower-cased, aliases not looked up: this does not
        load the family catalogue, so the catalogue's own modules may call it while they load)."""
        family, sep, size = text.strip().partition("__")
        if not sep or not family or not size:
            raise ValueError(f"model name {text!r} is not of the form family__size (e.g. gpt__1.3B)")
        return ModelRef(family.lower(), size)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """Nodes of one GPU type: count, GPUs per node and links (GB/s per direction)."""

    gpu_type: GpuType
    nodes: int
    gpus_per_node: int
    intra_node_gbps: float = 0.0  # 0 = take the catalogue's default for the type
    inter_node_gbps: float = 0.0

    @property
    def total_gpus(self) -> int:
        """All GPUs of the group (or cluster)."""
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A cluster: node groups, one per GPU type."""

    name: str
    groups: tuple[NodeGroup, ...]

    def __post_init__(self) -> None:
        types = [g.gpu_type for g in self.groups]
        if len(set(types)) != len(types):
            raise ValueError(f"cluster {self.name!r} lists a GPU type twice: {types}")
        for g in self.groups:
            if g.nodes < 1 or g.gpus_per_node < 1:
                raise ValueError(f"cluster {self.name!r}: group {g.gpu_type} needs >= 1 node and GPU")

    @property
    def gpu_types(self) -> tuple[GpuType, ...]:
        """The GPU types, in group order."""
        return tuple(g.gpu_type for g in self.groups)

    def group(self, gpu_type: str) -> NodeGroup:
        """The node group of a GPU type; ValueError naming the valid types otherwise."""
        for g in self.groups:
            if g.gpu_type == gpu_type:
                return g
        raise ValueError(f"unknown GPU type {gpu_type!r} in cluster {self.name!r}; valid: {', '.join(self.gpu_types)}")

    @property
    def total_gpus(self) -> int:
        """All GPUs of the group (or cluster)."""
        return sum(g.total_gpus for g in self.groups)


class DeadlineSource(enum.Enum):
    """Where a job's deadline comes from (docs/information_sets.md).

    ``DECLARED``: recorded by the source as what the user declared; every policy sees it.
    ``DERIVED``: computed from the job's true length by a recipe (ElasticFlow's
    ``submit + 1.5 x duration``): part of the truth, hidden from non-clairvoyant policies.
    """

    DECLARED = "declared"
    DERIVED = "derived"


#: The latest submit time a job may have (s): below 2**40 a float second keeps 0.25 ms precision, so
#: overheads and iteration times are not rounded away.
MAX_TIME_S = float(2**40)


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A training job as submitted: model, global batch, iterations, submit time, request.

    ``deadline_source`` says where ``deadline`` comes from (ignored when there is none).
    """

    job_id: JobId
    model: ModelRef
    global_batch: int
    iterations: int
    submit_time: float
    requested_gpu_type: GpuType | None = None
    requested_gpus: int | None = None
    deadline: float | None = None
    deadline_source: DeadlineSource = DeadlineSource.DECLARED

    def __post_init__(self) -> None:
        if self.global_batch < 1:
            raise ValueError(f"job {self.job_id}: global batch must be >= 1, got {self.global_batch}")
        if self.iterations < 1:
            raise ValueError(f"job {self.job_id}: iterations must be >= 1, got {self.iterations}")
        if not 0 <= self.submit_time <= MAX_TIME_S:
            raise ValueError(
                f"job {self.job_id}: submit time must be in 0..{MAX_TIME_S:.0f} s (2**40: float seconds keep "
                f"sub-millisecond precision there), got {self.submit_time}"
            )
        if self.requested_gpus is not None and not is_power_of_two(self.requested_gpus):
            raise ValueError(f"job {self.job_id}: requested GPU count {self.requested_gpus} is not a power of two")


class HiddenInformation(RuntimeError):
    """A policy read what its information set hides: a job's true total or remaining work.

    Not an AttributeError, so ``getattr(spec, "iterations", default)`` cannot swallow it.
    """


class HiddenSpec(JobSpec):
    """A :class:`JobSpec` as a non-clairvoyant policy sees it: what a real scheduler is told at submission.

    ``iterations`` is not stored; reading it raises :class:`HiddenInformation` naming the
    policy (``viewer``). A deadline derived from the true length (:class:`DeadlineSource`)
    is not stored either: ``deadline`` is None then. Equality and hashing go by the job id and
    the viewer. Build one with :meth:`of`; the model, batch, request, submit time and a
    declared deadline are kept.
    """

    __slots__ = ("viewer",)
    viewer: str

    #: The fields it keeps (all of JobSpec's but ``iterations``), and the viewer.
    _KEPT = (
        "job_id",
        "model",
        "global_batch",
        "submit_time",
        "requested_gpu_type",
        "requested_gpus",
        "deadline",
        "deadline_source",
    )

    @classmethod
    def of(cls, spec: JobSpec, viewer: str) -> HiddenSpec:
        """``spec`` without its iterations (and without a derived deadline), for the policy named ``viewer``."""
        declared = spec.deadline_source is DeadlineSource.DECLARED
        return cls._build(
            spec.job_id,
            spec.model,
            spec.global_batch,
            spec.submit_time,
            spec.requested_gpu_type,
            spec.requested_gpus,
            spec.deadline if declared else None,
            DeadlineSource.DECLARED,
            viewer,
        )

    @classmethod
    def _build(cls, *values: Any) -> HiddenSpec:
        hidden = object.__new__(cls)
        for name, value in zip((*cls._KEPT, "viewer"), values):
            object.__setattr__(hidden, name, value)
        return hidden

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Copies and pickles carry the kept fields only."""
        return (HiddenSpec._build, tuple(getattr(self, name) for name in (*self._KEPT, "viewer")))

    @property  # the field, hidden behind a property that raises
    def iterations(self) -> int:
        """Hidden: raises :class:`HiddenInformation`."""
        raise HiddenInformation(
            f"policy {self.viewer!r} is not clairvoyant: JobSpec.iterations (job {self.job_id}'s true length) is "
            "hidden; it sees attained work and service (declare clairvoyant = True to read the truth)"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HiddenSpec) and (other.job_id, other.viewer) == (self.job_id, self.viewer)

    def __hash__(self) -> int:
        return hash((self.job_id, self.viewer))

    def __repr__(self) -> str:
        return f"HiddenSpec({self.job_id!r}, {self.model}, batch {self.global_batch}, iterations hidden)"


@dataclass(frozen=True, slots=True, order=True)
class ResourceShape:
    """GPU type x count with uniform locality: ``n_nodes`` nodes of ``gpus_per_node`` GPUs."""

    gpu_type: GpuType
    n_nodes: int
    gpus_per_node: int

    def __post_init__(self) -> None:
        if not (is_power_of_two(self.n_nodes) and is_power_of_two(self.gpus_per_node)):
            raise ValueError(
                f"shape {self.n_nodes}x{self.gpus_per_node} {self.gpu_type}: degrees must be powers of two"
            )

    @property
    def num_gpus(self) -> int:
        """GPUs in total."""
        return self.n_nodes * self.gpus_per_node

    def __str__(self) -> str:
        return f"{self.gpu_type}:{self.n_nodes}x{self.gpus_per_node}"


@functools.lru_cache(maxsize=4096)
def best_locality(gpu_type: str, num_gpus: int, node_capacity: int) -> ResourceShape:
    """Pack ``num_gpus`` onto the fewest nodes: ``[n]`` or ``[cap] * (n / cap)``."""
    per_node = min(num_gpus, node_capacity)
    return ResourceShape(GpuType(gpu_type), max(1, num_gpus // per_node), per_node)


@functools.lru_cache(maxsize=4096)
def localities(gpu_type: str, num_gpus: int, node_capacity: int) -> tuple[ResourceShape, ...]:
    """All uniform localities of ``num_gpus`` from best (fewest nodes) to most spread."""
    best = best_locality(gpu_type, num_gpus, node_capacity)
    out = []
    per_node = best.gpus_per_node
    while per_node >= 1:
        out.append(ResourceShape(GpuType(gpu_type), num_gpus // per_node, per_node))
        per_node //= 2
    return tuple(out)


@dataclass(frozen=True, slots=True, order=True)
class Grid:
    """Arena's grid (the artifact's Cell): a resource shape plus a pipeline-stage count."""

    shape: ResourceShape
    n_stages: int

    def __post_init__(self) -> None:
        if not is_power_of_two(self.n_stages) or self.n_stages > self.shape.num_gpus:
            raise ValueError(f"grid {self.shape}: {self.n_stages} stages impossible on {self.shape.num_gpus} GPUs")


class PipeSchedule(enum.Enum):
    """Pipeline schedule used by a plan."""

    GPIPE = "gpipe"
    ONE_F_ONE_B = "1f1b"


@dataclass(frozen=True, slots=True)
class StagePlan:
    """One pipeline stage: layers ``[layer_start, layer_end)`` on a (dp, tp) mesh."""

    layer_start: int
    layer_end: int
    dp: int
    tp: int

    @property
    def num_gpus(self) -> int:
        """GPUs in total."""
        return self.dp * self.tp


@dataclass(frozen=True, slots=True)
class Plan:
    """A concrete adaptive-parallelism plan for a grid."""

    stages: tuple[StagePlan, ...]
    micro_batches: int
    schedule: PipeSchedule = PipeSchedule.GPIPE

    @property
    def num_gpus(self) -> int:
        """GPUs in total."""
        return sum(s.num_gpus for s in self.stages)

    @property
    def n_stages(self) -> int:
        """Pipeline stages."""
        return len(self.stages)

    def describe(self) -> str:
        """Compact text such as ``pp2[dp2tp1|dp1tp2]x16``."""
        meshes = "|".join(f"dp{s.dp}tp{s.tp}" for s in self.stages)
        return f"pp{self.n_stages}[{meshes}]x{self.micro_batches}"


@runtime_checkable
class PerfModel(Protocol):
    """Iteration time and feasibility of a (model, global batch) on a resource shape or grid.

    Times are seconds per iteration; ``math.inf`` means infeasible (out of memory, or no plan).
    """

    name: str

    def iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """Best adaptive-parallelism (proxy-plan) iteration time on ``shape``."""
        ...

    def grid_iter_time(self, model: ModelRef, global_batch: int, grid: Grid) -> float:
        """Best iteration time with the stage count fixed by ``grid``."""
        ...

    def dp_iter_time(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> float:
        """What a static-parallelism (data-parallel only) scheduler believes, DP memory rule applied."""
        ...

    def proxy_plan(self, model: ModelRef, global_batch: int, shape: ResourceShape) -> Plan | None:
        """The concrete plan behind ``iter_time``, or None when the model cannot name one."""
        ...


#: Reconfiguration-overhead classes: Arena's pruned AP search, an unpruned one (the baselines), none.
class OverheadClass(str, enum.Enum):
    """What a policy's (re)starts pay (its ``ap_search``): Arena's pruned AP search, an unpruned
    AP search (the baselines), or only the checkpoint resume. Equal to its string value."""

    PRUNED = "pruned"
    FULL = "full"
    NONE = "none"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: OverheadClass | str) -> OverheadClass:
        """``value`` as an OverheadClass; ValueError naming the valid ones otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown overhead class {value!r}; valid: {', '.join(OVERHEAD_CLASSES)}") from None


#: The overhead classes by name.
OVERHEAD_CLASSES: tuple[str, ...] = tuple(c.value for c in OverheadClass)


@dataclass(frozen=True)
class OverheadModel:
    """Reconfiguration overhead ``min(per_gpu_s * gpus, cap_s)`` per overhead class.

    Defaults are the Arena artifact's constants: pruned AP search 10 s per GPU capped at 40 s
    (Arena), unpruned AP search 150 s per GPU capped at 600 s (the baselines), plus a
    checkpoint-resume cost (0 s in the artifact's evaluation). Class ``none`` costs only the
    checkpoint resume. A measured restart cost (``restart_s``, a profile's figures:
    :mod:`arena_gym.restarts`) replaces the checkpoint-resume constant, multiplied by ``restart_scale``.
    """

    pruned_per_gpu_s: float = 10.0
    pruned_cap_s: float = 40.0
    full_per_gpu_s: float = 150.0
    full_cap_s: float = 600.0
    ckpt_resume_s: float = 0.0
    restart_scale: float = 1.0

    def __post_init__(self) -> None:
        for name in (
            "pruned_per_gpu_s",
            "pruned_cap_s",
            "full_per_gpu_s",
            "full_cap_s",
            "ckpt_resume_s",
            "restart_scale",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"OverheadModel.{name} must be finite and >= 0, got {value}")

    def seconds(self, overhead_class: OverheadClass | str, num_gpus: int, restart_s: float | None = None) -> float:
        """Overhead paid when a job (re)starts on ``num_gpus`` GPUs under ``overhead_class``; ``restart_s``
        (measured) in place of the checkpoint resume."""
        kind = OverheadClass.parse(overhead_class)
        if kind is OverheadClass.PRUNED:
            base = min(self.pruned_per_gpu_s * num_gpus, self.pruned_cap_s)
        elif kind is OverheadClass.FULL:
            base = min(self.full_per_gpu_s * num_gpus, self.full_cap_s)
        else:
            base = 0.0
        return base + (self.ckpt_resume_s if restart_s is None else restart_s * self.restart_scale)


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a job's GPUs are: node indices inside its GPU type's group, same count on each."""

    gpu_type: GpuType
    nodes: tuple[int, ...]
    gpus_per_node: int

    @property
    def num_gpus(self) -> int:
        """GPUs in total."""
        return len(self.nodes) * self.gpus_per_node

    @property
    def shape(self) -> ResourceShape:
        """The resource shape."""
        return ResourceShape(self.gpu_type, len(self.nodes), self.gpus_per_node)


@dataclass(frozen=True, slots=True)
class Allocation:
    """What a job runs on: a grid, its placement, and optionally a concrete plan."""

    grid: Grid
    placement: Placement
    plan: Plan | None = None

    def __post_init__(self) -> None:
        if self.placement.shape != self.grid.shape:
            raise ValueError(f"placement {self.placement.shape} does not match grid shape {self.grid.shape}")
        if self.plan is not None and self.plan.num_gpus != self.grid.shape.num_gpus:
            raise ValueError(f"plan uses {self.plan.num_gpus} GPUs but the grid has {self.grid.shape.num_gpus}")

    @property
    def shape(self) -> ResourceShape:
        """The resource shape."""
        return self.grid.shape

    @property
    def num_gpus(self) -> int:
        """GPUs in total."""
        return self.grid.shape.num_gpus


@dataclass(frozen=True, slots=True)
class Decision:
    """A policy's answer at one decision point.

    ``allocations`` (re)places jobs: start a pending job, or resize / retype / migrate a
    running one. ``preemptions`` suspends running jobs back to the queue. Jobs not named keep
    what they have. Preemptions are applied before allocations.
    """

    allocations: tuple[tuple[JobId, Allocation], ...] = ()
    preemptions: tuple[JobId, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when the decision changes nothing."""
        return not self.allocations and not self.preemptions


class JobStatus(enum.Enum):
    """Lifecycle state of a job inside a backend."""

    PENDING = "pending"
    RECONFIGURING = "reconfiguring"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class JobView:
    """A frozen view of one job at a decision point.

    Progress is linear between marks: ``iterations_done(t)`` extrapolates from the last mark
    at the job's current rate, so a view stays valid until its allocation changes.
    """

    spec: JobSpec
    status: JobStatus
    allocation: Allocation | None
    done_at_mark: float
    mark_time: float
    rate: float  # iterations per second now (0 while pending or reconfiguring)
    run_start: float | None  # when the current allocation began making progress
    first_start: float | None
    attained_gpu_s: float  # GPU-seconds of service at the mark
    queued_s_at_mark: float
    reconfigurations: int
    preemptions: int

    @property
    def job_id(self) -> JobId:
        """The job's id."""
        return self.spec.job_id

    def iterations_done(self, now: float) -> float:
        """Iterations completed by ``now`` (attained work: every policy may read it)."""
        if self.status is JobStatus.RUNNING and self.run_start is not None:
            done = self.done_at_mark + self.rate * (now - max(self.mark_time, self.run_start))
            return done if isinstance(self.spec, HiddenSpec) else min(self.spec.iterations, done)
        return self.done_at_mark

    def remaining_iterations(self, now: float) -> float:
        """Iterations still to run at ``now`` (the truth: HiddenInformation for a non-clairvoyant policy)."""
        if isinstance(self.spec, HiddenSpec):
            raise HiddenInformation(
                f"policy {self.spec.viewer!r} is not clairvoyant: JobView.remaining_iterations (job "
                f"{self.job_id}'s true remaining work) is hidden (declare clairvoyant = True to read the truth)"
            )
        return max(0.0, self.spec.iterations - self.iterations_done(now))

    def attained_gpu_seconds(self, now: float) -> float:
        """GPU-seconds of service received by ``now`` (Tiresias' attained service)."""
        if self.status is JobStatus.RUNNING and self.run_start is not None and self.allocation is not None:
            return self.attained_gpu_s + self.allocation.num_gpus * (now - max(self.mark_time, self.run_start))
        return self.attained_gpu_s

    def queued_s(self, now: float) -> float:
        """Seconds spent waiting in the queue by ``now`` (re-queues after preemption included)."""
        if self.status is JobStatus.PENDING:
            return self.queued_s_at_mark + (now - self.mark_time)
        return self.queued_s_at_mark


class JobViews(Sequence[JobView]):
    """The job views of a snapshot: a read-only sequence with lookup by job id.

    Built from any iterable of views it is a frozen tuple. Backends hand out lazy subclasses
    over their live state instead (see :mod:`arena_gym.core.views`): those build a view only
    when it is read and are valid until the backend next changes (``apply`` / ``advance``);
    after that every access raises ``RuntimeError``. Copy with ``tuple(...)`` to keep them.
    """

    __slots__ = ("_views", "_by_id", "_by_type")

    def __init__(self, views: Iterable[JobView] = ()) -> None:
        self._views = tuple(views)
        self._by_id: dict[JobId, JobView] | None = None
        self._by_type: dict[GpuType | None, tuple[JobView, ...]] | None = None

    def __len__(self) -> int:
        return len(self._views)

    @overload
    def __getitem__(self, index: int) -> JobView: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[JobView, ...]: ...

    def __getitem__(self, index: int | slice) -> JobView | tuple[JobView, ...]:
        return self._views[index]

    def __iter__(self) -> Iterator[JobView]:
        return iter(self._views)

    def get(self, job_id: str) -> JobView | None:
        """The view of ``job_id`` if it is in this sequence, else None."""
        if self._by_id is None:
            self._by_id = {v.job_id: v for v in self._views}
        return self._by_id.get(JobId(job_id))

    def placements(self) -> dict[JobId, Placement]:
        """Job id -> placement of every job here that holds GPUs, in this order (a new dict).

        Backends answer it from their state without building views (a policy's scratch copy
        of the cluster reads every running job's placement at each decision).
        """
        return {v.job_id: v.allocation.placement for v in self if v.allocation is not None}

    def requesting(self, gpu_type: str | None) -> Sequence[JobView]:
        """The views of jobs that requested ``gpu_type`` (None: no type requested), in this order.

        Backends answer it from an index, so a policy that serves one GPU type at a time
        reads only the jobs of that type.
        """
        if self._by_type is None:
            groups: dict[GpuType | None, list[JobView]] = {}
            for v in self:
                groups.setdefault(v.spec.requested_gpu_type, []).append(v)
            self._by_type = {t: tuple(vs) for t, vs in groups.items()}
        return self._by_type.get(GpuType(gpu_type) if gpu_type is not None else None, ())

    def by_config(self) -> Mapping[tuple[ModelRef, int], Sequence[JobView]]:
        """The views grouped by job configuration (model, global batch), each group in this order.

        Backends answer it from an index, so a policy that gives up on a configuration can
        pass over all its jobs at once.
        """
        groups: dict[tuple[ModelRef, int], list[JobView]] = {}
        for v in self:
            groups.setdefault((v.spec.model, v.spec.global_batch), []).append(v)
        return {config: tuple(vs) for config, vs in groups.items()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} jobs)"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a policy may look at in one decision point.

    ``free`` holds, per GPU type, a read-only array of free GPUs per node; ``perf`` is the
    performance model the policy plans with (a belief, not the ground truth). ``pending``
    (queued jobs in submission order) and ``running`` (jobs holding GPUs) are
    :class:`JobViews`; any sequence of views passed in is wrapped into one. Backends build
    them lazily, so a policy pays only for the views it reads.

    ``observe(viewer)``, where the backend can give it, returns the snapshot as the
    non-clairvoyant policy ``viewer`` observes it (:mod:`arena_gym.core.observed`); a
    non-clairvoyant policy is not shown it. A snapshot holds no copy function of its backend:
    a clairvoyant policy is shown a :class:`ForkableSnapshot` where the backend can fork.
    """

    now: float
    cluster: ClusterSpec
    free: Mapping[str, np.ndarray]
    pending: JobViews
    running: JobViews
    perf: PerfModel
    arrivals: tuple[JobId, ...] = ()
    departures: tuple[JobId, ...] = ()
    round_index: int = 0
    horizon: float = field(default=math.inf)
    observe: Callable[[str], Snapshot] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("pending", "running"):
            views = getattr(self, name)
            if not isinstance(views, JobViews):
                object.__setattr__(self, name, JobViews(views))

    def free_gpus(self, gpu_type: str) -> int:
        """Total free GPUs of a type."""
        return int(self.free[gpu_type].sum())

    def job(self, job_id: str) -> JobView | None:
        """The view of a pending or running job, or None (unknown, not yet submitted, or finished)."""
        view = self.pending.get(job_id)
        return view if view is not None else self.running.get(job_id)

    def plain(self, **changes: Any) -> Snapshot:
        """This moment as a plain :class:`Snapshot` with ``changes`` (a :class:`ForkableSnapshot`'s fork dropped)."""
        return Snapshot(**{**_fields_of(self), **changes})


@runtime_checkable
class Forkable(Protocol):
    """A backend that can copy itself at a decision point (the simulator; a live cluster cannot)."""

    def fork(self, horizon_s: float | None = None) -> Any:
        """An independent copy at this moment, its episode ending at ``horizon_s`` if given."""
        ...


@dataclass(frozen=True, slots=True)
class ForkableSnapshot(Snapshot):
    """A snapshot as a clairvoyant policy is shown it by a backend that can fork (:class:`Forkable`).

    ``fork(horizon_s)`` returns an independent copy of the backend at this moment, its episode
    ending at ``horizon_s`` if given: the true state and the true future, for the clairvoyant
    search ablations. Only the information layer builds one
    (:func:`arena_gym.core.information.information_set`), and only for a clairvoyant policy.
    """

    fork: Callable[[float | None], Any] = field(kw_only=True, compare=False, repr=False)

    @classmethod
    def of(cls, snapshot: Snapshot, fork: Callable[[float | None], Any]) -> ForkableSnapshot:
        """``snapshot`` with ``fork``."""
        return cls(**_fields_of(snapshot), fork=fork)


def _fields_of(snapshot: Snapshot) -> dict[str, Any]:
    """A snapshot's :class:`Snapshot` fields by name."""
    return {name: getattr(snapshot, name) for name in _SNAPSHOT_FIELDS}


_SNAPSHOT_FIELDS = tuple(f.name for f in fields(Snapshot))
