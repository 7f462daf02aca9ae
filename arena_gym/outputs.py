"""Safe output paths: checks before any work, atomic files, results directories built aside.

- :func:`check_out_dir` / :func:`check_out_file` refuse, with a one-line ValueError, an output
  path that cannot be written or would destroy something (a device such as ``/dev/null``, an
  existing file where a directory is wanted, a path below a file, the current directory, a
  non-empty directory that holds something other than earlier results).
- :func:`atomic_write` writes a file through a temporary sibling and a rename: a reader never
  sees half a file, and an error or Ctrl-C leaves the old file as it was.
- :func:`staged_dir` builds a results directory under a hidden temporary name and moves it into
  place only when complete; on an error or Ctrl-C the partial directory is removed.
- :func:`write_json` / :func:`write_csv` write result files atomically; :func:`code_version`
  is the version written beside every result.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: A results directory holds this file (with a ``code_version`` key); only such a directory is replaced.
RESULTS_MARKER = "config.json"


def _label(flag: str, path: str | os.PathLike[str]) -> str:
    return f"{flag} {os.fspath(path)}".strip()


def _absolute(path: str | os.PathLike[str], flag: str) -> Path:
    text = os.fspath(path)
    if not str(text).strip():
        raise ValueError(f"{flag or 'path'}: empty path")
    if "\0" in str(text):
        raise ValueError(f"{_label(flag, repr(text))}: path contains a NUL byte")
    return Path(os.path.abspath(text))


def _check_ancestors(path: Path, label: str) -> None:
    """The nearest existing ancestor of ``path`` must be a directory."""
    for parent in path.parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise ValueError(f"{label}: {parent} is not a directory")
            return


def is_results_dir(path: Path) -> bool:
    """Whether ``path`` holds an earlier arena-gym results directory (its ``config.json`` has a code version)."""
    try:
        data = json.loads((path / RESULTS_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "code_version" in data


def check_out_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """An absolute results-directory path that can be (re)written without destroying anything else.

    Refused: an existing non-directory (``/dev/null``, a file), a path below a file, the current
    directory or one of its parents, and a non-empty directory that is not an earlier results
    directory. One-line ValueError naming ``flag`` and the path.
    """
    out = _absolute(path, flag)
    label = _label(flag, path)
    if os.path.lexists(out) and not out.is_dir():
        raise ValueError(f"{label}: exists and is not a directory")
    cwd = Path.cwd().resolve()
    if out.resolve() == cwd or out.resolve() in cwd.parents:
        raise ValueError(f"{label}: is the current directory or one of its parents; name a new directory")
    _check_ancestors(out, label)
    try:
        occupied = out.is_dir() and any(out.iterdir())
    except OSError as exc:
        raise ValueError(f"{label}: cannot read it: {exc.strerror or exc}") from None
    if occupied and not is_results_dir(out):
        raise ValueError(
            f"{label}: a non-empty directory that is not an arena-gym results directory; name a new or empty directory"
        )
    return out


def check_out_file(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """An absolute file path that can be written atomically.

    Refused: an existing directory (``.``), an existing non-regular file (``/dev/null``: an atomic
    rename would replace the device), a path ending in a separator, a path below a file.
    """
    out = _absolute(path, flag)
    label = _label(flag, path)
    if os.fspath(path).endswith(("/", os.sep)) or out.is_dir():
        raise ValueError(f"{label}: is a directory; name a file")
    if os.path.lexists(out) and not stat.S_ISREG(os.lstat(out).st_mode):
        raise ValueError(f"{label}: exists and is not a regular file")
    _check_ancestors(out, label)
    return out


def _make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; return the ones created (deepest last)."""
    missing = [p for p in (directory, *directory.parents) if not os.path.lexists(p)]
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot create {directory}: {exc.strerror or exc}") from None
    return list(reversed(missing))


def _remove_empty(created: list[Path]) -> None:
    for directory in reversed(created):
        try:
            directory.rmdir()
        except OSError:
            return


def atomic_write(path: str | os.PathLike[str], write: Callable[[Path], object], mode: int = 0o644) -> Path:
    """Write ``path`` by calling ``write(temporary sibling)`` and renaming it over ``path``.

    Missing parent directories are created (and removed again if the write fails); on any
    error or Ctrl-C the temporary file is deleted and an existing ``path`` is left unchanged.
    """
    target = Path(path)
    created = _make_parents(target.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        _remove_empty(created)
        raise ValueError(f"cannot write to {target.parent}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        _remove_empty(created)
        raise
    return target


@contextmanager
def staged_dir(out_dir: str | os.PathLike[str], flag: str = "--out") -> Iterator[Path]:
    """Yield a hidden temporary directory beside ``out_dir``; move it to ``out_dir`` when the block ends.

    ``out_dir`` is checked first (:func:`check_out_dir`). An earlier results directory there is
    replaced only once the new one is complete. On an error or Ctrl-C the temporary directory
    (and any parent created for it) is removed and ``out_dir`` is untouched.
    """
    out = check_out_dir(out_dir, flag)
    created = _make_parents(out.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:
        _remove_empty(created)
        raise ValueError(f"{_label(flag, out_dir)}: cannot write to {out.parent}: {exc.strerror or exc}") from None
    try:
        os.chmod(tmp, 0o755)
        yield tmp
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(created)
        raise


def _swap_in(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first and deleted after."""
    if out.is_dir() and any(out.iterdir()):
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
        os.replace(out, old)
        try:
            os.replace(tmp, out)
        except BaseException:
            os.replace(old, out)
            raise
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, out)  # an empty directory is replaced by rename(2) itself


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Package version plus the git commit (``+dirty`` when the tree has changes), if available.

    Asked once per process (a comparison writes one results directory per run)."""
    from arena_gym import __version__ as version

    here = Path(__file__).resolve().parent
    try:
        # one git process: the short commit, "-dirty" when tracked files differ from it (tags ignored)
        described = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--exclude=*"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return version
    commit, dirty = described.removesuffix("-dirty"), described.endswith("-dirty")
    return f"{version}+{commit}{'.dirty' if dirty else ''}"


def shown_path(path: Path, root: Path) -> str:
    """``path`` (resolved) relative to ``root`` when it lies inside it, else absolute: results name no machine paths."""
    resolved = path.resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)


def machine(load_before: Sequence[float]) -> dict[str, Any]:
    """What a benchmark ran on, for its results file: CPUs, this process's CPU affinity, Python, platform,
    and the load average before (``load_before``, taken when the benchmark started) and now."""
    import platform
    import sys

    return {
        "cpus": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "loadavg_before": tuple(load_before),
        "loadavg_after": os.getloadavg(),
    }


def jsonable(value: Any) -> Any:
    """``value`` as JSON-ready data: dataclasses as dicts, non-finite floats as null/"inf"/"-inf"."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def write_json(path: Path, data: Any) -> Path:
    """Write JSON atomically (temp file, then rename); non-finite floats become null/"inf"."""
    text = json.dumps(jsonable(data), indent=2, sort_keys=True) + "\n"
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    """Write a CSV atomically with the csv module (cells as :meth:`pandas.DataFrame.to_csv` writes them:
    None and NaN as empty cells)."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(columns)
            # ``v != v`` holds exactly for NaN; the csv module writes None as an empty cell itself
            writer.writerows([v if v == v else "" for v in row] for row in rows)

    return atomic_write(path, write)


def write_csv(path: Path, frame: pd.DataFrame) -> Path:
    """Write a CSV atomically."""
    return atomic_write(path, lambda tmp: frame.to_csv(tmp, index=False))
