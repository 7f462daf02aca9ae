"""Profile on first use, then reuse: :func:`ensure_profile` for the deploy command's sim-vs-live table.

A cached profile is ``CACHE/profile-{testbed}-{key}.json``; the key hashes everything the
measurements depend on that is known without running anything: the profile format version,
the testbed (name, device type, nodes and device ids), the models, the profiler settings, the
torch version and the CPU model. A cached file is used only if it loads, describes the testbed's
device type and holds every requested model; anything else is profiled again (and ``refresh``
always profiles). Hardware changes the key cannot see (another GPU in the same slot, a driver)
need ``refresh=True``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path

from estimator.hardware import canonical_gpu_name
from estimator.profile import PROFILE_VERSION, ProfileError, load_profile
from real_runner.profiler.run import check_models, profile_testbed, write_profile
from real_runner.profiler.settings import ProfilerSettings, Progress
from real_runner.profiler.worker import host_description
from real_runner.testbed import Testbed

log = logging.getLogger(__name__)


def profile_key(testbed: Testbed, models: Sequence[str], settings: ProfilerSettings) -> str:
    """The cache key of a profile (see the module docstring)."""
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch_version = "none"
    text = json.dumps(
        [
            PROFILE_VERSION,
            testbed.name,
            testbed.device_type,
            [list(n.devices) for n in testbed.nodes],
            sorted(models),
            settings.to_dict(),
            torch_version,
            host_description(False) if testbed.is_cpu else "",
        ],
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_profile_path(
    testbed: Testbed, models: Sequence[str], cache_dir: str | Path, settings: ProfilerSettings | None = None
) -> Path:
    """Where :func:`ensure_profile` keeps the profile of this testbed, these models and settings."""
    names = check_models(models)
    return (
        Path(cache_dir) / f"profile-{testbed.name}-{profile_key(testbed, names, settings or ProfilerSettings())}.json"
    )


def _usable(path: Path, testbed: Testbed, models: Sequence[str]) -> bool:
    try:
        profile = load_profile(path)
    except ProfileError as exc:
        log.warning("ignoring cached profile: %s", exc)
        return False
    return all(profile.covers(m, canonical_gpu_name(testbed.device_type)) for m in models)


def ensure_profile(
    testbed: Testbed,
    models: Sequence[str],
    cache_dir: str | Path,
    *,
    env: Mapping[str, str],
    settings: ProfilerSettings | None = None,
    refresh: bool = False,
    cwd: str | Path | None = None,
    on_progress: Progress | None = None,
) -> Path:
    """The path of a profile of ``models`` on ``testbed``: the cached one, or a new one profiled now.

    ``env`` is the profiling ranks' base environment (the caller's ``os.environ``); ``cwd`` their
    working directory (the repository, when the package is not installed).
    """
    names = check_models(models)
    settings = settings or ProfilerSettings()
    path = cached_profile_path(testbed, names, cache_dir, settings)
    if not refresh and path.is_file() and _usable(path, testbed, names):
        log.info("using cached profile %s", path)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    log.info("profiling %s for %s (cached as %s)", testbed.name, ", ".join(names), path)
    with tempfile.TemporaryDirectory(prefix=".profile-", dir=path.parent) as work:
        profile = profile_testbed(testbed, names, settings, work, env=env, cwd=cwd, on_progress=on_progress)
    return write_profile(profile, path)
