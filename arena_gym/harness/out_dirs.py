"""Output paths of the commands: checks before any work, results directories built aside.

- :func:`check_out_dir` / :func:`check_out_file` refuse, with a one-line ValueError, an output
  path that cannot be written or would destroy something (a device such as ``/dev/null``, an
  existing file where a directory is wanted, a path below a file, the current directory, a
  non-empty directory that holds something other than earlier results).
- One rule for every command that writes a results directory (its ``kind``, recorded as
  ``"kind"`` in the directory's ``config.json``): the directory is new, empty, an unfinished run
  of the same kind that the command resumes, or a finished one of the same kind, replaced only
  with ``--replace``; never another command's results. A directory that records no kind (one
  written before kinds were recorded) counts as the writer's own only with ``--replace``.
- :func:`staged_dir` builds a results directory under a hidden temporary name and moves it into
  place only when complete; on an error or Ctrl-C the partial directory is removed.
  :func:`filled_dir` is where a writer that fills its directory as it goes writes: the directory
  itself when it is new or empty, else a staged one that replaces the earlier run when complete;
  :func:`aside_dir` always stages (a writer that cannot resume).
- :func:`shown_path` and :func:`machine` describe where a result came from without machine paths.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arena_gym.outputs import make_parents, remove_empty

#: A results directory holds this file (with a ``code_version`` key); only such a directory is replaced.
RESULTS_MARKER = "config.json"
#: Kind of results directory (``config.json``'s ``"kind"``) -> what a refusal calls it.
KINDS: dict[str, str] = {
    "simulate": "a simulation",
    "compare": "a comparison",
    "evaluate": "an evaluation",
    "deploy": "a deployment",
    "tune": "a tuning study",
    "train:sb3": "an sb3 training run",
    "train:es": "an es training run",
    "train:residual-ppo": "a residual-ppo training run",
    "train:expert-iteration": "an expert-iteration training run",
}


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


def _marker(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / RESULTS_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "code_version" in data else None


def is_results_dir(path: Path) -> bool:
    """Whether ``path`` holds an earlier arena-gym results directory (its ``config.json`` has a code version)."""
    return _marker(path) is not None


def results_kind(path: Path) -> str | None:
    """The kind a results directory records (``config.json``'s ``"kind"``), or None when it records none."""
    kind = (_marker(path) or {}).get("kind")
    return kind if isinstance(kind, str) else None


def _check_kind(label: str, out: Path, kind: str, replace: bool, resume: bool) -> None:
    """The rule of the module docstring for a non-empty results directory ``out``."""
    if kind not in KINDS:
        raise ValueError(f"unknown results kind {kind!r}; known: {', '.join(KINDS)}")
    found = results_kind(out)
    if found is not None and found != kind:
        raise ValueError(f"{label}: holds {found} results, not {KINDS[kind]}; name a new directory")
    if replace or (resume and found == kind):
        return
    if found is None:
        raise ValueError(f"{label}: holds results that record no kind; pass --replace if they are {KINDS[kind]}")
    raise ValueError(f"{label}: holds {KINDS[kind]} already; pass --replace to replace it, or name a new directory")


def check_out_dir(
    path: str | os.PathLike[str],
    flag: str = "--out",
    *,
    kind: str | None = None,
    replace: bool = False,
    resume: bool = False,
) -> Path:
    """An absolute results-directory path that can be (re)written without destroying anything else.

    Refused: an existing non-directory (``/dev/null``, a file), a path below a file, the current
    directory or one of its parents, and a non-empty directory that is not an earlier results
    directory. With ``kind`` (a key of :data:`KINDS`) an earlier results directory is also
    refused when it holds another kind, and, unless ``replace``, when it holds this kind (but
    not with ``resume``: the writer continues it) or records none (the refusal names
    ``--replace``). One-line ValueError naming ``flag`` and the path.
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
    if occupied and kind is not None:
        _check_kind(label, out, kind, replace, resume)
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


@contextmanager
def staged_dir(
    out_dir: str | os.PathLike[str], flag: str = "--out", *, kind: str, replace: bool = False
) -> Iterator[Path]:
    """Yield a hidden temporary directory beside ``out_dir``; move it to ``out_dir`` when the block ends.

    ``out_dir`` is checked first (:func:`check_out_dir` with ``kind`` and ``replace``). An earlier
    results directory there is replaced only once the new one is complete, and its ``.gitignore``
    (what a committed results directory does not commit) is kept unless the writer wrote one. On an error or Ctrl-C
    the temporary directory (and any parent created for it) is removed and ``out_dir`` is untouched.
    """
    out = check_out_dir(out_dir, flag, kind=kind, replace=replace)
    with _staging(out, _label(flag, out_dir)) as tmp:
        yield tmp


@contextmanager
def aside_dir(out: Path, flag: str = "--out") -> Iterator[Path]:
    """Where a writer that cannot resume writes (``out`` already checked, :func:`check_out_dir`): a staged directory
    that replaces ``out`` once complete, and is removed on an error or Ctrl-C (a stopped run leaves nothing)."""
    with _staging(out, _label(flag, out)) as tmp:
        yield tmp


@contextmanager
def filled_dir(out: Path, flag: str = "--out") -> Iterator[Path]:
    """Where a writer that fills ``out`` as it goes writes (``out`` already checked, :func:`check_out_dir`).

    ``out`` itself (made) when it is new or empty, so that an interrupted run stays there to be
    resumed; else (an earlier run the writer replaces) a staged directory that replaces it only
    once complete, and is removed on an error or Ctrl-C.
    """
    if out.is_dir() and any(out.iterdir()):
        with _staging(out, _label(flag, out)) as tmp:
            yield tmp
    else:
        out.mkdir(parents=True, exist_ok=True)
        yield out


@contextmanager
def _staging(out: Path, label: str) -> Iterator[Path]:
    created = make_parents(out.parent)
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    except OSError as exc:
        remove_empty(created)
        raise ValueError(f"{label}: cannot write to {out.parent}: {exc.strerror or exc}") from None
    try:
        os.chmod(tmp, 0o755)
        yield tmp
        _swap_in(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        remove_empty(created)
        raise


def _swap_in(tmp: Path, out: Path) -> None:
    """Rename ``tmp`` to ``out``; an existing ``out`` is moved aside first and deleted after (its ``.gitignore`` kept)."""
    if out.is_dir() and any(out.iterdir()):
        ignore = out / ".gitignore"
        if ignore.is_file() and not (tmp / ".gitignore").exists():
            shutil.copy2(ignore, tmp / ".gitignore")
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
