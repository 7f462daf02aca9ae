"""One profiling rank, as a library: :func:`run_rank` (the process entry point is :mod:`real_runner.profiler.worker.__main__`).

Each rank joins the group (nccl with CUDA, gloo on CPU), runs the computation phase on its own
device (all ranks at once when the job's neighbours are ``busy``, rank 0 alone when ``idle``), then
the collective tables and the wrapped layers on real groups (:mod:`real_runner.profiler.grouped`)
with every rank, and writes ``OUT/rank{R}.json``. Rank 0 appends progress lines
``{"phase", "done", "total"}`` to ``OUT/progress.jsonl``.
"""

from __future__ import annotations

import datetime
import json
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING

from real_runner.allocator import keep_freed_memory

if TYPE_CHECKING:
    from real_runner.profiler.settings import ProfileJob

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2


def host_description(cuda: bool) -> str:
    """The device's model name: the GPU's, or the CPU's from /proc/cpuinfo."""
    if cuda:
        import torch  # noqa: PLC0415

        return torch.cuda.get_device_name()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class _Progress:
    """Rank 0's progress lines (other ranks write nothing)."""

    def __init__(self, path: Path, active: bool) -> None:
        self.fh = open(path, "a", encoding="utf-8") if active else None  # noqa: SIM115 - closed in close()

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.fh is not None:
            self.fh.write(json.dumps({"t": time.time(), "phase": phase, "done": done, "total": total}) + "\n")
            self.fh.flush()

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


def run_rank(job: ProfileJob, rank: int, world: int, local_rank: int, main_at: float, launched_at: float | None) -> int:
    """Profile this rank's device for ``job`` (``main_at``, ``launched_at``: start-up wall times); return :data:`EXIT_OK`.

    Any exception is a failure of the rank.
    """
    import torch  # noqa: PLC0415 - after the argument checks
    import torch.distributed as dist  # noqa: PLC0415

    from real_runner.profiler.comm import profile_comm  # noqa: PLC0415
    from real_runner.profiler.compute import profile_compute  # noqa: PLC0415
    from real_runner.profiler.grouped import profile_grouped  # noqa: PLC0415

    cuda = job.device == "cuda" or (job.device == "auto" and torch.cuda.is_available())
    if cuda:
        index = job.device_ids[local_rank] if local_rank < len(job.device_ids) else local_rank
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        device = torch.device("cpu")
        torch.set_num_threads(1)
        keep_freed_memory()
    out = Path(job.out_dir)
    progress = _Progress(out / "progress.jsonl", rank == 0)
    t_ready = time.time()
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method="env://",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=job.group_timeout_s),
    )
    try:
        own, _ = dist.new_subgroups(group_size=1)
        timings = {"launch_to_ready_s": t_ready - launched_at if launched_at else 0.0, "start_s": t_ready - main_at}
        t0 = time.time()
        compute = None
        if job.settings.neighbours == "busy" or rank == 0:
            compute = profile_compute(job, own, device, progress)
        timings["compute_s"] = time.time() - t0
        (out / f"compute.done{rank}").touch()
        while not all((out / f"compute.done{r}").exists() for r in range(world)):  # no group timeout applies here
            time.sleep(0.05)
        dist.barrier()
        t1 = time.time()
        comm = profile_comm(job, rank, device, progress)
        timings["comm_s"] = time.time() - t1
        t2 = time.time()
        grouped = profile_grouped(job, rank, device, progress) if job.settings.grouped and world > 1 else []
        timings["grouped_s"] = time.time() - t2
        record = {
            "rank": rank,
            "world_size": world,
            "device": str(device),
            "backend": "nccl" if cuda else "gloo",
            "host": host_description(cuda),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "compute": compute,
            "comm": comm,
            "grouped": grouped,
            "timings": timings,
        }
        tmp = out / f".rank{rank}.json.tmp"
        tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
        tmp.replace(out / f"rank{rank}.json")
        dist.barrier()
    finally:
        progress.close()
        if dist.is_initialized():
            dist.destroy_process_group()
    return EXIT_OK
