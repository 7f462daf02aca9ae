"""Host memory allocator settings of CPU ranks: keep freed memory in the process, as CUDA's caching allocator does.

glibc's malloc serves tensors above its mmap threshold with fresh mappings and returns a freed top of the heap to
the kernel. A training step frees its activations at the end of backward and allocates them again in the next
forward, so every step faults its activation pages back in; a pipeline schedule that holds many micro-batches'
activations (GPipe) pays that most (``benchmarks/bench_pipeline_order.py``: 21-27 thousand page faults per stage
step of gpt__mini GPipe x8, 70-110 ms of system time). :func:`keep_freed_memory` turns trimming off and serves
allocations up to glibc's largest mmap threshold from the heap, so a step reuses the previous step's memory. The
profiler's ranks use the same settings as the training ranks, so the profile measures what training runs.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc malloc.h
TRIM_OFF = 2**31 - 1
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's upper bound on 64-bit hosts


def keep_freed_memory() -> bool:
    """Apply the settings through glibc's ``mallopt``; False (logged) where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        log.info("no glibc mallopt in %s: the allocator keeps its defaults", name)
        return False
    ok = bool(mallopt(M_TRIM_THRESHOLD, TRIM_OFF)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX))
    if not ok:
        log.info("mallopt refused the thresholds: the allocator keeps its defaults")
    return ok
