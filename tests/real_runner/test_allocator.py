"""The CPU ranks' allocator settings: freed memory stays in the process and is reused without page faults."""

from __future__ import annotations

import subprocess
import sys

import pytest

from real_runner.allocator import keep_freed_memory

# A step's pattern through the C allocator: 16 blocks of 1 MiB allocated, written, freed; page faults per step.
STEPS = """
import ctypes, resource, sys
from real_runner.allocator import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
def step():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc(1 << 20) for _ in range(16)]
    for b in blocks:
        libc.memset(b, 1, 1 << 20)
    for b in reversed(blocks):
        libc.free(b)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
print(*[step() for _ in range(4)])
"""


def faults_per_step(mode: str) -> list[int]:
    out = subprocess.run(
        [sys.executable, "-c", STEPS, mode], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    return [int(x) for x in out.split()]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_kept_memory_is_reused_without_page_faults():
    default, kept = faults_per_step("default"), faults_per_step("keep")
    assert min(default) >= 3500  # glibc unmaps the 16 MiB (4,096 pages) at every free and faults it in again
    assert kept[0] >= 3500 and kept[1:] == [0, 0, 0]  # kept: faulted in once, then reused


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_keep_freed_memory_reports_success_on_glibc():
    assert keep_freed_memory() is True
