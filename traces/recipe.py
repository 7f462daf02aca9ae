"""The Arena artifact's job-field sampling recipe, as reusable seeded code.

The artifact (GitHub sjtu-epcc/arena, ``traces/regenerate_sim_trace.py`` and
``traces/regenerate_rt_trace.py``; ``docs/arena.md`` section 8.3) gives each job of a raw
trace a model family, a size, a global batch, a GPU count and a GPU type, drawn from fixed
weights, and re-draws *all* fields until the job is feasible.

Model sizes and batches per family (the artifact's ``supported_model_cfgs``; the Philly trace
uses GPT 760M-6.7B, MoE 690M-27B and WRN 500M-6.8B of these; index 0..5 as in the recipe). Each
family's record holds its own (``ModelFamily.trace``, in ``estimator/families/``; a family
without one is never sampled)::

    gpt          760M 1.3B 2.6B 6.7B 15B 39B     batches 128 256 512
    moe          690M 1.3B 2.4B 10B  27B 70B     batches 256 512 1024
    wide_resnet  500M 1B   2B   4B   6.8B 13B    batches 256 512 1024

Mixes (weights; see :data:`MIXES`):

- ``philly`` (also used for the artifact's Helios and PAI traces): family WRN 15 / GPT 25 /
  MoE 60; size index weights 10/15/25/20/15/10; batch index weights 50/10/5; GPU count over
  1/2/4/8/16 with weights 10/15/20/20/15, the count index capped at size index + 2; GPU type
  a100 15 / v100 15 / a40 30 / a10 30.
- ``testbed`` (the artifact's real-testbed trace): family 20/30/50; sizes 20/20/20/15/10/5;
  batches 50/5/1; counts 10/15/20/25/10, no cap; types a40 10 / a10 15.

All randomness comes from a ``numpy.random.Generator`` handed in; nothing global is seeded.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from arena_gym.families import TraceMix, families, get_family
from arena_gym.hardware import get_gpu
from arena_gym.types import GPU_COUNTS, ModelRef

#: ``feasible(model, global_batch, gpu_type, num_gpus) -> bool``
FeasibleFn = Callable[[ModelRef, int, str, int], bool]
#: ``iter_time(model, global_batch, gpu_type, num_gpus) -> seconds per iteration``
IterTimeFn = Callable[[ModelRef, int, str, int], float]


def trace_mix(family: str) -> TraceMix:
    """The recipe's sizes, batches, fewest GPUs and nominal times of ``family`` (its record's ``trace``)."""
    mix = get_family(family).trace
    if mix is None:
        raise ValueError(f"model family {family!r} has no trace mix (ModelFamily.trace): the recipe cannot sample it")
    return mix


def family_sizes() -> dict[str, tuple[str, ...]]:
    """Sizes per family that the recipe samples (index 0 first), for every family with a trace mix."""
    return {name: f.trace.sizes for name, f in families().items() if f.trace is not None}


def family_batches() -> dict[str, tuple[int, ...]]:
    """Global batches per family that the recipe samples (index 0 first)."""
    return {name: f.trace.batches for name, f in families().items() if f.trace is not None}


@dataclass(frozen=True)
class Mix:
    """Sampling weights of one recipe (weights need not sum to 1).

    ``count_cap_offset``: when set, a job of size index ``s`` draws its GPU count index from
    ``0 .. s + count_cap_offset`` only (the artifact's Philly rule, offset 2).
    """

    name: str
    family_weights: tuple[tuple[str, float], ...]
    size_weights: tuple[float, ...]
    batch_weights: tuple[float, ...]
    count_weights: tuple[float, ...]  # over GPU_COUNTS
    gpu_type_weights: tuple[tuple[str, float], ...]
    count_cap_offset: int | None = None


MIXES: dict[str, Mix] = {
    "philly": Mix(
        name="philly",
        family_weights=(("wide_resnet", 15.0), ("gpt", 25.0), ("moe", 60.0)),
        size_weights=(10.0, 15.0, 25.0, 20.0, 15.0, 10.0),
        batch_weights=(50.0, 10.0, 5.0),
        count_weights=(10.0, 15.0, 20.0, 20.0, 15.0),
        gpu_type_weights=(("a100", 15.0), ("v100", 15.0), ("a40", 30.0), ("a10", 30.0)),
        count_cap_offset=2,
    ),
    "testbed": Mix(
        name="testbed",
        family_weights=(("wide_resnet", 20.0), ("gpt", 30.0), ("moe", 50.0)),
        size_weights=(20.0, 20.0, 20.0, 15.0, 10.0, 5.0),
        batch_weights=(50.0, 5.0, 1.0),
        count_weights=(10.0, 15.0, 20.0, 25.0, 10.0),
        gpu_type_weights=(("a40", 10.0), ("a10", 15.0)),
        count_cap_offset=None,
    ),
}


def get_mix(name: str) -> Mix:
    """The mix called ``name``; ValueError listing the valid names otherwise."""
    try:
        return MIXES[name]
    except KeyError:
        raise ValueError(f"unknown mix {name!r}; valid: {', '.join(MIXES)}") from None


# -- built-in feasibility and nominal speed ------------------------------------------------


def default_feasible(model: ModelRef, global_batch: int, gpu_type: str, num_gpus: int) -> bool:
    """Coarse built-in feasibility, used when no estimator-backed ``feasible`` is given.

    Feasible iff the size is one the artifact has performance data for (the family's
    ``TraceMix.min_gpus``: the fewest 40-48 GB GPUs on which it ran in the artifact's traces,
    arena/traces/{philly,pai,testbed}.csv) and ``num_gpus >= min_gpus[size]``, doubled on GPUs with less than 40 GB (V100, A10; the
    memory is the hardware catalogue's, and a type outside it is a ValueError).
    The batch is ignored. Pass the estimator's feasibility for the recipe proper.
    """
    family = families().get(model.family)
    need = family.trace.min_gpus.get(model.size) if family is not None and family.trace is not None else None
    if need is None:
        return False
    if get_gpu(gpu_type).memory_gb < 40.0:
        need *= 2
    return num_gpus >= need


def nominal_iter_time(model: ModelRef, global_batch: int, gpu_type: str, num_gpus: int) -> float:
    """Built-in nominal iteration time (s): the family's ``TraceMix.nominal_iter_s`` (one
    A40-equivalent at the family's smallest batch) scaled by batch, type and count.

    ``base x batch / smallest_batch / speed / doubling^log2(count)``, with the type's
    ``trace_speed`` and ``trace_doubling`` from the hardware catalogue (a type outside it is a
    ValueError). A rough stand-in for the estimator, used to turn durations into iteration
    counts when no ``iter_time`` callable is given.
    """
    family = families().get(model.family)
    mix = family.trace if family is not None else None
    base = mix.nominal_iter_s.get(model.size) if mix is not None else None
    if mix is None or base is None:
        raise ValueError(f"no nominal iteration time for {model.name}; pass an iter_time callable")
    batch0 = mix.batches[0]
    spec = get_gpu(gpu_type)
    speed = spec.trace_speed or spec.fp16_tflops / get_gpu("a40").fp16_tflops
    speed *= (spec.trace_doubling or 1.5) ** math.log2(num_gpus)
    return base * global_batch / batch0 / speed


# -- the sampler ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SampledFields:
    """Sampled per-job fields (parallel tuples)."""

    models: tuple[ModelRef, ...]
    batches: tuple[int, ...]
    gpu_types: tuple[str, ...]
    num_gpus: tuple[int, ...]


#: Most re-draws per job ``sample_fields`` accepts.
MAX_TRIES = 100_000


class InfeasibleJobError(ValueError):
    """No feasible draw for job ``index`` within the allowed tries (``tries`` 0: none exists)."""

    def __init__(self, index: int, tries: int) -> None:
        self.index = index
        self.tries = tries
        found = f"drawn in {tries} tries" if tries else "exists in the mix"
        super().__init__(
            f"no feasible (model, batch, GPU type, GPU count) {found}; check feasible / gpu_types / max_gpus"
        )


def _probs(weights: Sequence[float], what: str) -> np.ndarray:
    w = np.asarray(weights, dtype=float)
    if len(w) == 0 or np.any(w < 0) or not np.isfinite(w).all() or w.sum() <= 0:
        raise ValueError(f"{what} weights must be non-negative with a positive sum, got {list(weights)}")
    return w / w.sum()


def type_weights(mix: Mix, gpu_types: Sequence[str] | None) -> tuple[tuple[str, ...], np.ndarray]:
    """GPU types and probabilities, restricted to ``gpu_types`` when given.

    Types the mix does not weigh (e.g. h100) get the mix's mean type weight.
    """
    table = dict(mix.gpu_type_weights)
    if gpu_types is None:
        names = tuple(table)
    else:
        names = tuple(dict.fromkeys(t.strip().lower() for t in gpu_types))
        if not names or any(not t for t in names):
            raise ValueError(f"gpu_types must name at least one GPU type, got {list(gpu_types)}")
    mean = sum(table.values()) / len(table)
    return names, _probs([table.get(t, mean) for t in names], "GPU type")


def sample_fields(
    rng: np.random.Generator,
    n: int,
    mix: Mix,
    *,
    feasible: FeasibleFn | None = None,
    gpu_types: Sequence[str] | None = None,
    max_gpus: int | None = None,
    max_tries: int = 1000,
) -> SampledFields:
    """Draw ``n`` jobs' (model, batch, GPU type, GPU count) from ``mix``, re-drawing each
    infeasible job (all fields, as the artifact does) up to ``max_tries`` times.

    ``feasible`` defaults to :func:`default_feasible`; ``gpu_types`` restricts the types and
    ``max_gpus`` caps the count. Raises :class:`InfeasibleJobError` naming the first job
    that never became feasible. Vectorised: all pending jobs are drawn together per try.
    """
    if not 1 <= max_tries <= MAX_TRIES:
        raise ValueError(f"max_tries must be in 1..{MAX_TRIES}, got {max_tries}")
    check = feasible or default_feasible
    fam_names = tuple(f for f, _ in mix.family_weights)
    mixes = {f: trace_mix(f) for f in fam_names}
    p_fam = _probs([w for _, w in mix.family_weights], "family")
    p_size = _probs(mix.size_weights, "size")
    p_batch = _probs(mix.batch_weights, "batch")
    type_names, p_type = type_weights(mix, gpu_types)
    counts = np.asarray(GPU_COUNTS, dtype=np.int64)
    cdf = np.cumsum(_probs(mix.count_weights, "GPU count"))
    if len(cdf) != len(counts):
        raise ValueError(f"mix {mix.name!r}: {len(cdf)} count weights for {len(counts)} GPU counts")
    top = len(counts) - 1
    if max_gpus is not None:
        if max_gpus < 1:
            raise ValueError(f"max_gpus must be >= 1, got {max_gpus}")
        top = int(np.searchsorted(counts, max_gpus, side="right")) - 1

    fam = np.zeros(n, dtype=np.int64)
    size = np.zeros(n, dtype=np.int64)
    batch = np.zeros(n, dtype=np.int64)
    gtype = np.zeros(n, dtype=np.int64)
    cnt = np.zeros(n, dtype=np.int64)
    cache: dict[tuple[int, int, int, int, int], bool] = {}

    def fits(key: tuple[int, int, int, int, int]) -> bool:
        if key not in cache:
            family = mixes[fam_names[key[0]]]
            model = ModelRef(fam_names[key[0]], family.sizes[key[1]])
            cache[key] = bool(check(model, family.batches[key[2]], type_names[key[3]], int(counts[key[4]])))
        return cache[key]

    def any_fits() -> bool:
        """Whether any draw of positive probability is feasible (checked once, when a try makes no progress)."""
        p_count = np.diff(cdf, prepend=0.0)
        for f, s, b, t in itertools.product(*(np.flatnonzero(p) for p in (p_fam, p_size, p_batch, p_type))):
            cap_s = top if mix.count_cap_offset is None else min(top, int(s) + mix.count_cap_offset)
            if any(fits((int(f), int(s), int(b), int(t), c)) for c in range(cap_s + 1) if p_count[c] > 0):
                return True
        return False

    pending = np.arange(n, dtype=np.int64)
    exhausted_checked = False
    for _ in range(max_tries):
        if len(pending) == 0:
            break
        k = len(pending)
        f = rng.choice(len(fam_names), size=k, p=p_fam)
        b = rng.choice(len(p_batch), size=k, p=p_batch)
        s = rng.choice(len(p_size), size=k, p=p_size)
        cap = np.full(k, top)
        if mix.count_cap_offset is not None:
            cap = np.minimum(cap, s + mix.count_cap_offset)
        u = rng.random(k) * cdf[cap]
        c = np.minimum(np.searchsorted(cdf, u, side="right"), cap)
        t = rng.choice(len(type_names), size=k, p=p_type)
        fam[pending], size[pending], batch[pending], cnt[pending], gtype[pending] = f, s, b, c, t
        ok = np.fromiter(
            (fits((int(f[j]), int(s[j]), int(b[j]), int(t[j]), int(c[j]))) for j in range(k)), dtype=bool, count=k
        )
        pending = pending[~ok]
        if not ok.any() and not exhausted_checked:
            exhausted_checked = True
            if not any_fits():
                raise InfeasibleJobError(int(pending[0]), 0)
    if len(pending):
        raise InfeasibleJobError(int(pending[0]), max_tries)

    models = tuple(ModelRef(fam_names[f], mixes[fam_names[f]].sizes[s]) for f, s in zip(fam, size))
    return SampledFields(
        models=models,
        batches=tuple(mixes[m.family].batches[b] for m, b in zip(models, batch)),
        gpu_types=tuple(type_names[t] for t in gtype),
        num_gpus=tuple(int(counts[c]) for c in cnt),
    )


def cached_iter_time(fn: IterTimeFn) -> IterTimeFn:
    """Memoise an ``iter_time`` callable over its (hashable) arguments."""
    memo: dict[tuple[ModelRef, int, str, int], float] = {}

    def wrapped(model: ModelRef, global_batch: int, gpu_type: str, num_gpus: int) -> float:
        key = (model, global_batch, gpu_type, num_gpus)
        if key not in memo:
            memo[key] = float(fn(model, global_batch, gpu_type, num_gpus))
        return memo[key]

    return wrapped


def child_rngs(seed: int | np.random.SeedSequence, n: int) -> list[np.random.Generator]:
    """``n`` independent generators derived from one seed (the seed itself is not consumed)."""
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(int(seed))
    return [
        np.random.default_rng(np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (k,)))
        for k in range(n)
    ]
