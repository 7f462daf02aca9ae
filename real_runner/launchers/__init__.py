"""Launchers: how a generation of a job's ranks is started on the testbed (local processes or Ray), or faked.

:data:`LAUNCHERS` maps a name to its class (``module:attr``, resolved on use, so Ray is imported
only when asked for). ``fake`` starts no processes: its generations progress at a performance
model's times on an injected clock (:mod:`real_runner.launchers.fake`, for tests of the live
backend); a testbed names one of the others.
"""

from __future__ import annotations

from typing import Any

from arena_gym.registry import resolve
from real_runner.launchers.base import GenerationHandle, Launcher, LaunchRequest, RankSlot

#: Launcher name -> class target.
LAUNCHERS: dict[str, str] = {
    "local": "real_runner.launchers.local:LocalLauncher",
    "ray": "real_runner.launchers.ray_launcher:RayLauncher",
    "fake": "real_runner.launchers.fake:FakeLauncher",
}


def make_launcher(name: str, **kwargs: Any) -> Launcher:
    """Build a launcher by name; ValueError naming the valid ones otherwise."""
    target = LAUNCHERS.get(name)
    if target is None:
        raise ValueError(f"unknown launcher {name!r}; valid: {', '.join(LAUNCHERS)}")
    return resolve(target)(**kwargs)


__all__ = ["LAUNCHERS", "GenerationHandle", "LaunchRequest", "Launcher", "RankSlot", "make_launcher"]
