"""FailedFits: fits that failed without reading their target, so that a fit that would repeat them is skipped.

A ``fit_one_job`` search whose every placement of the target failed for want of free GPUs read
nothing of the target but its request (GPU type and count) and how its own halvings compared
with the best victim of their type (:data:`OwnHalving`). On the same workspace state, a fit of
the same request whose own halvings compare alike walks the same search and fails the same way.
Under the search's tie rule (:mod:`agents.arena.search`) a failed fit leaves the state as it
found it, so skipping it changes nothing. The state is the workspace's edit log, the same while
its length and last entry (by identity) are.
"""

from __future__ import annotations

from collections.abc import Callable

from agents.common import Workspace

#: One comparison a search made: (GPU type, the target's count there, the best victim's change or None, own won).
OwnHalving = tuple[str, int, float | None, bool]


def own_wins(change: float | None, threshold: float | None) -> bool:
    """Whether the target halving itself (``change``; None when infeasible) beats the best victim (``threshold``)."""
    return change is not None and (threshold is None or change >= threshold)


class FailedFits:
    """Failed fits of one workspace, by request, each with the own-halving comparisons its search made."""

    def __init__(self, workspace: Workspace) -> None:
        self._ws = workspace
        self._known: dict[tuple[str, int], tuple[int, object, list[tuple[OwnHalving, ...]]]] = {}

    def record(self, gpu_type: str, num_gpus: int, trace: tuple[OwnHalving, ...]) -> None:
        """A fit of ``num_gpus`` GPUs of ``gpu_type`` failed on the current state, after the comparisons ``trace``."""
        length, last = self._ws.version()
        known = self._known.get((gpu_type, num_gpus))
        if known is None or known[0] != length or known[1] is not last:
            known = self._known[gpu_type, num_gpus] = (length, last, [])
        if trace not in known[2]:
            known[2].append(trace)

    def known(self, gpu_type: str, num_gpus: int, own: Callable[[str, int], float | None]) -> bool:
        """Whether a fit of the request whose own halving changes are ``own(type, count)`` fails on the current state."""
        known = self._known.get((gpu_type, num_gpus))
        if known is None:
            return False
        length, last = self._ws.version()
        if known[0] != length or known[1] is not last:
            return False
        return any(all(own_wins(own(t, n), threshold) == won for t, n, threshold, won in trace) for trace in known[2])
