"""A learned residual on Arena's Gittins order, urgency and sizing: the parameterised Arena action space.

The network sets, for every waiting and running job, two log-multipliers from what a real
scheduler sees (:data:`RESIDUAL_FEATURES`): one on its Gittins index (the queue order Arena
admits and restarts by) and one on its urgency (the weight the downgrade search gives its
samples/s, i.e. how many GPUs it keeps under sharing). A third row, the sizing head, reads the
same features and the cluster's size and load (:data:`SIZE_FEATURES`) and sets each job's GPU
target: the most GPUs the upgrade trial may grow it to, ``32 x 2^round(r)`` up to
:data:`SIZE_CEILING`. Arena's allocation machinery carries them out. The network is linear (one
weight row per output, residuals clipped to ``+-clip``), and zero weights are exactly the base
policy (``arena-gittins-32-f``).
Weights live in a small JSON file (:class:`ResidualWeights`) that records how they were trained.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from agents.arena import ArenaPolicy
from agents.arena.gittins import GittinsPriority
from agents.belief import WorkBelief, load_belief
from arena_gym.fields import check, check_fields, read_fields, short
from arena_gym.types import JobId, JobSpec, JobStatus, JobView, Snapshot
from envs.encoder import log_count, model_size_feature, squash

#: Per-job inputs of the residual network (none derived from a job's total or remaining work).
RESIDUAL_FEATURES: tuple[str, ...] = (
    "bias",  # 1
    "log_index",  # log10 of the Gittins index relative to the snapshot's mean, clipped to +-3
    "attained_iterations",  # log10(1 + iterations done) / 6, clipped
    "age",  # seconds since submission, squashed by 1 h
    "waiting",  # queued seconds, squashed by 1 h
    "holds_gpus",  # running or reconfiguring
    "gpus",  # current allocation's GPUs, (log2 + 1) / 5, 0 if none
    "requested_gpus",  # (log2 + 1) / 5, 0 if no request
    "model_size",  # (log10(parameters) - 8) / 4, clipped
    "batch",  # log2(global batch) / 12, clipped
    "reference_time",  # the belief's reference seconds per iteration, squashed by 1 s
    "preemptions",  # n / (n + 1)
)
#: Inputs of the sizing head: the per-job features, then three of the snapshot (the same for every job).
SIZE_FEATURES: tuple[str, ...] = (
    *RESIDUAL_FEATURES,
    "cluster_gpus",  # log2(the cluster's GPUs) / 11
    "demand",  # the listed jobs' requested GPUs / the cluster's GPUs, squashed by 1
    "waiting_share",  # the share of listed jobs that wait
)
#: The most GPUs a sizing target may grow a job to (the base's cap, 32, is a zero residual's target).
SIZE_CEILING = 128
#: The network's output rows, in the order of a flat parameter vector.
HEADS: tuple[str, ...] = ("order", "urgency", "size")
#: Arena's settings in the policy a zero residual reproduces (``arena-gittins-32-f``, whose index adapts to the episode).
BASE: dict[str, Any] = {"max_job_gpus": 32, "weighted_fits": True}
FORMAT = "arena-gym residual weights"


def _inputs(head: str) -> tuple[str, ...]:
    """The features a head's row weighs."""
    return SIZE_FEATURES if head == "size" else RESIDUAL_FEATURES


def _numbers(raw: Any, what: str, path: str) -> tuple[float, ...]:
    row, n = check(raw, list[float], f"residual weights {path}: {what!r}"), len(_inputs(what))
    if len(row) != n:
        raise ValueError(f"residual weights {path}: {what!r} must be a list of {n} numbers")
    if not all(math.isfinite(x) for x in row):
        raise ValueError(f"residual weights {path}: {what!r} holds a value that is not a finite number")
    return tuple(row)


def _trained(raw: Any, path: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"residual weights {path}: 'trained' must be an object, got {short(raw)}")
    return raw


@dataclass(frozen=True)
class ResidualWeights:
    """The residual network: ``order`` and ``urgency`` weight rows over :data:`RESIDUAL_FEATURES`, ``size``
    over :data:`SIZE_FEATURES` (zero: no sizing targets; a file without it has none).

    ``clip`` bounds each residual; ``belief`` is the packaged belief kind or belief file
    the Gittins index comes from; ``trained`` records how the weights were found (free-form JSON).
    """

    order: tuple[float, ...] = (0.0,) * len(RESIDUAL_FEATURES)
    urgency: tuple[float, ...] = (0.0,) * len(RESIDUAL_FEATURES)
    size: tuple[float, ...] = (0.0,) * len(SIZE_FEATURES)
    clip: float = 3.0
    belief: str = "real"
    trained: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)
        for name in HEADS:
            row, n = getattr(self, name), len(_inputs(name))
            if len(row) != n or not all(math.isfinite(x) for x in row):
                raise ValueError(f"ResidualWeights.{name} must be {n} finite numbers")
        if not (math.isfinite(self.clip) and self.clip > 0):
            raise ValueError(f"ResidualWeights.clip must be finite and > 0, got {self.clip}")

    @property
    def vector(self) -> np.ndarray:
        """The order and urgency rows as one flat parameter vector (order first)."""
        return self.head_vector(("order", "urgency"))

    def with_vector(self, vector: np.ndarray, trained: Mapping[str, Any] | None = None) -> ResidualWeights:
        """The same network with the order and urgency rows ``vector`` (see :attr:`vector`); the sizing row kept."""
        return self.with_heads(("order", "urgency"), vector, trained)

    def head_vector(self, heads: tuple[str, ...]) -> np.ndarray:
        """The rows of ``heads`` (names of :data:`HEADS`) as one flat parameter vector, in that order."""
        return np.array([x for head in heads for x in getattr(self, head)])

    def with_heads(
        self, heads: tuple[str, ...], vector: np.ndarray, trained: Mapping[str, Any] | None = None
    ) -> ResidualWeights:
        """The same network with the rows of ``heads`` set from the flat ``vector`` (see :meth:`head_vector`)."""
        values = [float(x) for x in np.asarray(vector, dtype=float).ravel()]
        sizes = [len(_inputs(head)) for head in heads]
        if len(values) != sum(sizes):
            raise ValueError(
                f"a residual parameter vector of {'+'.join(heads)} has {sum(sizes)} entries, got {len(values)}"
            )
        rows: dict[str, Any] = {}
        at = 0
        for head, n in zip(heads, sizes, strict=True):
            rows[head], at = tuple(values[at : at + n]), at + n
        return dataclasses.replace(self, **rows, trained=self.trained if trained is None else trained)

    def save(self, path: str | Path) -> Path:
        """Write the weights as JSON (features named, so a file for another feature set is refused; no sizing row
        when it is zero)."""
        out = Path(path)
        body = {
            "format": FORMAT,
            "features": list(RESIDUAL_FEATURES),
            "order": list(self.order),
            "urgency": list(self.urgency),
            **({"size_features": list(SIZE_FEATURES), "size": list(self.size)} if any(self.size) else {}),
            "clip": self.clip,
            "belief": self.belief,
            "trained": dict(self.trained),
        }
        out.write_text(json.dumps(body, indent=2) + "\n")
        return out

    @classmethod
    def load(cls, path: str | Path) -> ResidualWeights:
        """Read a weights file; a one-line ValueError naming the file and the problem."""
        if Path(path).is_dir():
            raise ValueError(f"residual weights {path}: is a directory; name the weights file (JSON) in it")
        try:
            raw = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"residual weights {path}: cannot read ({err})") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise ValueError(f"residual weights {path}: not a {FORMAT!r} file")
        if raw.get("features") != list(RESIDUAL_FEATURES):
            raise ValueError(f"residual weights {path}: its features are not {', '.join(RESIDUAL_FEATURES)}")
        if "size" in raw and raw.get("size_features") != list(SIZE_FEATURES):
            raise ValueError(f"residual weights {path}: its size features are not {', '.join(SIZE_FEATURES)}")
        body = {k: v for k, v in raw.items() if k not in ("format", "features", "size_features")}
        readers: dict[str, Callable[[Any], Any]] = {
            **{head: partial(_numbers, what=head, path=str(path)) for head in HEADS},
            "trained": lambda raw: _trained(raw, str(path)),
        }
        values = read_fields(cls, body, f"residual weights {path}", readers, require=("order", "urgency"))
        clip = values.get("clip")
        if clip is not None and not (math.isfinite(clip) and clip > 0):
            raise ValueError(f"residual weights {path}: 'clip' must be a finite number > 0, got {clip!r}")
        if values.get("belief") == "":
            raise ValueError(f"residual weights {path}: 'belief' must be a belief kind or file, got ''")
        return cls(**values)


def fixed_features(spec: JobSpec, reference: float) -> tuple[float, float, float, float]:
    """The features a job keeps all its life: requested GPUs, model size, batch and reference time, in that order."""
    return (
        log_count(spec.requested_gpus),
        model_size_feature(spec.model.size),
        min(1.0, math.log2(spec.global_batch) / 12.0),
        squash(reference, 1.0),
    )


def _squash(x: np.ndarray, scale: float) -> np.ndarray:
    """:func:`envs.encoder.squash` of every entry, to the last bit."""
    finite = np.isfinite(x)
    clipped = np.maximum(np.where(finite, x, 0.0), 0.0)
    return np.where(finite, clipped / (clipped + scale), 1.0)


def job_features(
    views: list[JobView],
    indexes: list[float],
    attained: list[float],
    snapshot: Snapshot,
    fixed: list[tuple[float, float, float, float]],
) -> np.ndarray:
    """The ``(jobs, features)`` matrix of :data:`RESIDUAL_FEATURES` for ``views`` (their indexes, iterations done
    at the snapshot and :func:`fixed_features`), built a column at a time."""
    now, holding, n = snapshot.now, (JobStatus.RUNNING, JobStatus.RECONFIGURING), len(views)
    out = np.empty((n, len(RESIDUAL_FEATURES)))
    if not views:
        return out
    logs = np.log10(np.maximum(np.asarray(indexes, dtype=float), 1e-300))
    # per job: submit time, queueing seconds, holds GPUs, GPUs held, preemptions
    raw = np.fromiter(
        chain.from_iterable(
            (
                v.spec.submit_time,
                v.queued_s(now),
                v.status in holding,
                a.num_gpus if (a := v.allocation) is not None else 0,
                v.preemptions,
            )
            for v in views
        ),
        dtype=float,
        count=5 * n,
    ).reshape(n, 5)
    held = raw[:, 3].tolist()
    counts = {c: log_count(int(c)) for c in set(held)}
    out[:, 0] = 1.0
    out[:, 1] = np.minimum(np.maximum(logs - logs.mean(), -3.0), 3.0)  # np.clip's values, without its overhead
    out[:, 2] = np.minimum(
        1.0, np.array(list(map(math.log10, (1.0 + np.asarray(attained, dtype=float)).tolist()))) / 6.0
    )
    out[:, 3] = _squash(now - raw[:, 0], 3600.0)
    out[:, 4] = _squash(raw[:, 1], 3600.0)
    out[:, 5] = raw[:, 2]
    out[:, 6] = [counts[c] for c in held]
    out[:, 7:11] = np.fromiter(chain.from_iterable(fixed), dtype=float, count=4 * n).reshape(n, 4)
    out[:, 11] = raw[:, 4] / (raw[:, 4] + 1.0)
    return out


def snapshot_features(listed: list[JobView], snapshot: Snapshot) -> np.ndarray:
    """The sizing head's three snapshot inputs (:data:`SIZE_FEATURES`' last three) for the ``listed`` jobs."""
    gpus = snapshot.cluster.total_gpus
    demand = sum(v.spec.requested_gpus or 0 for v in listed) / gpus
    waiting = sum(1 for v in listed if v.allocation is None) / max(len(listed), 1)
    return np.array([math.log2(gpus) / 11.0, demand / (demand + 1.0), waiting])


class ResidualPriority(GittinsPriority):
    """The Gittins order and urgency, each job's scaled by ``exp`` of its clipped linear residual, and sizing targets.

    Keys ``(-index x exp(r_order), submit time, job id)``; urgency the Gittins urgency x
    ``exp(r_urgency)``; with a sizing row, each job's target ``32 x 2^round(r_size)`` GPUs (a power of
    two, at most :data:`SIZE_CEILING`). Residuals are computed once per snapshot for every job it
    lists (non-clairvoyant: the features read attained work only).
    """

    def __init__(self, belief: WorkBelief, weights: ResidualWeights, adapt: bool = True) -> None:
        super().__init__(belief, adapt)
        self.weights = weights
        self._rows = np.array([weights.order, weights.urgency])
        self._size = np.array(weights.size) if any(weights.size) else None
        self._residuals_for: Snapshot | None = None
        self._residuals: dict[JobId, tuple[float, float]] = {}
        self._targets: dict[JobId, int] = {}
        self._fixed: dict[JobId, tuple[float, float, float, float]] = {}  # a known job's :func:`fixed_features`

    def reset(self) -> None:
        """Forget the episode."""
        super().reset()
        self._residuals_for, self._residuals, self._targets, self._fixed = None, {}, {}, {}

    def fork(self) -> ResidualPriority:
        """A copy with its own copy of the episode seen so far."""
        twin = super().fork()
        assert isinstance(twin, ResidualPriority)
        twin._residuals_for, twin._residuals, twin._targets, twin._fixed = None, {}, {}, dict(self._fixed)
        return twin

    def keys(self, snapshot: Snapshot) -> Callable[[JobView], tuple]:
        """``(-index x exp(order residual), submit time, job id)``."""
        base, found = super().keys(snapshot), self._scales(snapshot)

        def key(view: JobView) -> tuple:
            index, submit, job = base(view)
            scale = found.get(job)
            return (index if scale is None else index * scale[0]), submit, job

        return key

    def urgency(self, snapshot: Snapshot) -> Callable[[JobView], float]:
        """The Gittins urgency x exp(urgency residual)."""
        base, found = super().urgency(snapshot), self._scales(snapshot)

        def weight(view: JobView) -> float:
            scale = found.get(view.spec.job_id)
            return base(view) if scale is None else base(view) * scale[1]

        return weight

    def targets(self, snapshot: Snapshot) -> Callable[[JobView], int] | None:
        """Each listed job's sizing target (an unlisted job: the base's cap); None without a sizing row."""
        if self._size is None:
            return None
        self._scales(snapshot)
        found, cap = self._targets, BASE["max_job_gpus"]
        return lambda view: found.get(view.spec.job_id, cap)

    def features(self, views: list[JobView], snapshot: Snapshot) -> np.ndarray:
        """The network's inputs (:func:`job_features`) for ``views``, jobs ``snapshot`` lists: one row per view."""
        indexes, kept = self._indexes(snapshot), self._fixed
        jobs = [v.spec.job_id for v in views]
        fixed = [kept.get(job) for job in jobs]
        for i in [i for i, found in enumerate(fixed) if found is None]:
            job, view = jobs[i], views[i]
            fixed[i] = fixed_features(view.spec, self._reference(view))
            if job in self._slots:  # a listed known job: its reference time is kept, so are its features
                kept[job] = fixed[i]
        seen = self._log.seen  # the snapshot's views' attained work (it observed them)
        return job_features(views, [indexes[j] for j in jobs], [seen[j].work for j in jobs], snapshot, fixed)

    def listed_features(self, snapshot: Snapshot) -> np.ndarray:
        """The features of the jobs whose multipliers ``snapshot`` sets (the known jobs it lists), a row each."""
        self._indexes(snapshot)  # memoised for features, with the snapshot's views of known jobs
        return self.features(self._listed, snapshot)

    def _scales(self, snapshot: Snapshot) -> dict[JobId, tuple[float, float]]:
        """Each listed job's (order, urgency) multipliers by job id (a view the snapshot does not list has none: 1);
        the sizing targets are computed beside them."""
        if self._residuals_for is not snapshot:
            x, clip = self.listed_features(snapshot), self.weights.clip
            r = np.exp(np.minimum(np.maximum(x @ self._rows.T, -clip), clip))
            jobs = [v.spec.job_id for v in self._listed]
            self._residuals = dict(zip(jobs, map(tuple, r.tolist())))
            if self._size is not None:
                n = len(RESIDUAL_FEATURES)
                extra = snapshot_features(self._listed, snapshot) @ self._size[n:]
                size = np.minimum(np.maximum(x @ self._size[:n] + extra, -clip), clip)
                gpus = np.minimum(BASE["max_job_gpus"] * np.exp2(np.rint(size)), SIZE_CEILING)
                self._targets = dict(zip(jobs, gpus.astype(int).tolist()))
            self._residuals_for = snapshot
        return self._residuals


def residual_policy(weights: ResidualWeights, name: str = "arena-residual", **overrides: Any) -> ArenaPolicy:
    """``arena-gittins-32-f`` with the residual ``weights`` on its order, urgency and sizing (a sizing row lets the
    upgrade trial grow jobs up to :data:`SIZE_CEILING`, each to its target)."""
    sized = {"max_grow_gpus": SIZE_CEILING} if any(weights.size) else {}
    return arena_with(ResidualPriority(load_belief(weights.belief), weights), name, **{**sized, **overrides})


def arena_with(priority: ResidualPriority, name: str, **overrides: Any) -> ArenaPolicy:
    """``arena-gittins-32-f``'s allocation machinery ordered and weighted by ``priority``."""
    return ArenaPolicy(name, priority=priority, **{**BASE, **overrides})


def load_residual_policy(path: str) -> ArenaPolicy:
    """``residual:PATH``: the policy of a weights file written by ``arena-gym train --method es`` (or ``residual-ppo``)."""
    return residual_policy(ResidualWeights.load(path), f"residual:{path}")
