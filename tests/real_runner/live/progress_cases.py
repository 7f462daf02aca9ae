"""Progress records of one job for the unit tests of the trajectory check and the step audit."""

from __future__ import annotations

from real_runner.progress import ProgressRecord


def rec(
    event: str,
    step: int,
    loss: float | None = None,
    ckpt: int | None = None,
    resumed: int | None = None,
    set_resumed: bool = False,
    t: float = 0.0,
) -> ProgressRecord:
    info = {"resumed_from": resumed} if event == "start" else {}
    return ProgressRecord(
        t, event, "j", step, loss=loss, iter_s=0.1 if event == "step" else None, ckpt_step=ckpt, info=info
    )


def loss(step: int) -> float:
    return 7.0 - 0.5 * step


def good() -> list[ProgressRecord]:
    """Fresh start, checkpoint at 3, killed at 4, relaunched from 3 (step 4 again), stopped at 5, resumed, done at 6."""
    return [
        rec("start", 0),
        *(rec("step", s, loss(s)) for s in (1, 2, 3)),
        rec("checkpoint", 3, ckpt=3),
        rec("step", 4, loss(4)),
        rec("start", 3, ckpt=3, resumed=3),
        rec("step", 4, loss(4)),
        rec("step", 5, loss(5)),
        rec("stopped", 5, ckpt=5),
        rec("start", 5, ckpt=5, resumed=5),
        rec("step", 6, loss(6)),
        rec("done", 6, ckpt=6),
    ]
