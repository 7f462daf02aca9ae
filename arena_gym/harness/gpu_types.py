"""The GPU types a workload requests, checked against the hardware catalogue and the chosen cluster.

Harness code (the CLI and ``compare`` use it): it reads the hardware catalogue (``arena_gym.hardware``). A type that
is not in the catalogue (``zz``, ``tpu``) is an error; a catalogue type that the cluster lacks
is a warning (an error when strict) and is counted: policies that honour a job's requested type
cannot place such a job, type-flexible ones (Arena) may run it on another type.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from arena_gym.types import ClusterSpec, JobSpec

log = logging.getLogger(__name__)


def check_catalogue(jobs: Iterable[JobSpec], source: str) -> None:
    """ValueError (one line, naming the job) for the first requested GPU type outside the catalogue."""
    from arena_gym.hardware import canonical_gpu_name, known_gpus

    seen: set[str] = set()
    for job in jobs:
        gpu_type = job.requested_gpu_type
        if gpu_type is None or gpu_type in seen:
            continue
        try:
            canonical_gpu_name(gpu_type)
        except ValueError:
            raise ValueError(
                f"{source}: job {job.job_id!r} requests GPU type {gpu_type!r}, which is not in the "
                f"hardware catalogue (known: {', '.join(known_gpus())})"
            ) from None
        seen.add(gpu_type)


def missing_types(jobs: Iterable[JobSpec], cluster: ClusterSpec) -> dict[str, list[JobSpec]]:
    """Jobs by requested GPU type, for the types ``cluster`` lacks (in order of first request)."""
    have = set(cluster.gpu_types)
    out: dict[str, list[JobSpec]] = {}
    for job in jobs:
        if job.requested_gpu_type is not None and job.requested_gpu_type not in have:
            out.setdefault(job.requested_gpu_type, []).append(job)
    return out


def check_requested_types(jobs: Iterable[JobSpec], cluster: ClusterSpec, *, strict: bool, source: str) -> int:
    """Check every requested type; return how many jobs request a type ``cluster`` lacks.

    Outside the catalogue: ValueError. Missing from the cluster: one warning naming the types,
    their job counts and a first job (ValueError instead when ``strict``).
    """
    jobs = tuple(jobs)
    check_catalogue(jobs, source)
    missing = missing_types(jobs, cluster)
    if not missing:
        return 0
    total = sum(len(v) for v in missing.values())
    detail = "; ".join(f"{t}: {len(v)} (first {v[0].job_id!r})" for t, v in missing.items())
    message = (
        f"{source}: {total} job(s) request GPU types that cluster {cluster.name!r} lacks "
        f"({detail}); a policy that honours the request cannot place them"
    )
    if strict:
        raise ValueError(message)
    log.warning("%s", message)
    return total
