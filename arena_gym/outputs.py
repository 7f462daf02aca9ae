"""Result files written atomically, and the code version written beside every result.

- :func:`atomic_write` writes a file through a temporary sibling and a rename: a reader never
  sees half a file, and an error or Ctrl-C leaves the old file as it was.
- :func:`write_json` / :func:`write_rows` / :func:`write_csv` write result files atomically;
  :func:`code_version` is the version written beside every result.

Output paths of the commands (checks before any work, results directories built aside) are the
harness's: :mod:`arena_gym.harness.out_dirs`.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import json
import math
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd


def make_parents(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; return the ones created (deepest last)."""
    missing = [p for p in (directory, *directory.parents) if not os.path.lexists(p)]
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot create {directory}: {exc.strerror or exc}") from None
    return list(reversed(missing))


def remove_empty(created: list[Path]) -> None:
    """Remove the directories :func:`make_parents` created, deepest first, while they are empty."""
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
    created = make_parents(target.parent)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        remove_empty(created)
        raise ValueError(f"cannot write to {target.parent}: {exc.strerror or exc}") from None
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        remove_empty(created)
        raise
    return target


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """Package version plus the git commit (``.dirty`` when tracked files have changes), if available.

    Asked once per process (a comparison writes one results directory per run)."""
    from arena_gym import __version__ as version

    commit = git_commit(Path(__file__).resolve().parent)
    return f"{version}+{commit}" if commit else version


def git_commit(folder: Path) -> str | None:
    """The short commit of the git checkout holding ``folder``, ``.dirty`` appended when a tracked file differs from
    it; None outside a checkout or without git.

    One git process that writes nothing (``--no-optional-locks``): ``git describe --dirty`` rewrites the index, and a
    signal that stops the command while it does (Ctrl-C to the process group) left ``.git/index.lock`` behind, so
    that the user's next git command refused to run."""
    try:
        status = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain=v2", "--branch", "--untracked-files=no"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    oid = next((line.split()[2] for line in status if line.startswith("# branch.oid ")), "(initial)")
    if oid == "(initial)":
        return None
    dirty = any(not line.startswith("#") for line in status)
    return f"{oid[:7]}{'.dirty' if dirty else ''}"


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
