"""Run directories with an owner: a lock file beside the directory, held while a command writes it.

:class:`RunLock` takes ``.NAME.lock`` in the parent of a run directory (or an output file), so
the lock survives a results directory that is built aside and renamed into place. The file
records the owner (command, pid, host, start time); its modification time is the owner's
heartbeat, refreshed while it runs; and the owner holds an exclusive ``flock`` on it, which the
kernel releases when the process dies, however it dies.

A second writer, or a resume, while the owner lives is refused with one line naming the owner
(:class:`RunDirInUse`). A stale lock (the owner is gone: on this host its ``flock`` is free,
which means its pid no longer holds it; on another host, sharing the filesystem, its heartbeat is
older than ``stale_after_s``) is taken over, with a warning naming the dead owner. Taking the
lock also proves the place writable: it fails, before any work, where nothing can be written.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from arena_gym.safe_points import signals_held

log = logging.getLogger(__name__)

#: Seconds between heartbeats, and the heartbeat age after which an owner on another host is presumed dead.
HEARTBEAT_S = 10.0
STALE_AFTER_S = 120.0


class RunDirInUse(ValueError):
    """The run directory is owned by a live process (one-line message naming it)."""


@dataclass(frozen=True)
class LockOwner:
    """Who holds (or held) a run directory's lock: command, pid, host, start and last heartbeat (Unix times)."""

    command: str
    pid: int
    host: str
    started: float
    heartbeat: float

    def describe(self, now: float | None = None) -> str:
        """``arena-gym deploy (pid 123@host, since 2026-12-01 10:00:00, heartbeat 3 s ago)``."""
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started))
        age = max((time.time() if now is None else now) - self.heartbeat, 0.0)
        return f"arena-gym {self.command} (pid {self.pid}@{self.host}, since {since}, heartbeat {age:.0f} s ago)"


def lock_path(target: str | os.PathLike[str]) -> Path:
    """The lock file of a run directory or output file: ``.NAME.lock`` beside it."""
    path = Path(os.path.abspath(os.fspath(target)))
    return path.parent / f".{path.name}.lock"


def _read_owner(fd: int) -> LockOwner | None:
    """The owner recorded in an open lock file, or None when it is empty or unreadable."""
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        return LockOwner(
            str(data["command"]),
            int(data["pid"]),
            str(data["host"]),
            float(data["started"]),
            os.fstat(fd).st_mtime,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class RunLock:
    """The lock on one run directory (or output file), as a context manager; see the module docstring.

    ``command`` names the owner in the refusals of others; ``flag`` starts every message
    (``--out DIR``, ``--resume DIR``). Entering creates the missing parent directories (removed
    again, if still empty, on exit; with ``create=False`` the target must exist instead) and raises :class:`RunDirInUse` while a live owner holds the
    lock, ValueError where the lock (so anything) cannot be written.
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        command: str,
        flag: str = "--out",
        heartbeat_s: float = HEARTBEAT_S,
        stale_after_s: float = STALE_AFTER_S,
        create: bool = True,
    ) -> None:
        self.target = Path(os.path.abspath(os.fspath(target)))
        self.path = lock_path(target)
        self.command = command
        self.label = f"{flag} {os.fspath(target)}".strip()
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.create = create
        self.taken_over: LockOwner | None = None
        self._fd: int | None = None
        self._created: list[Path] = []
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> RunLock:
        try:
            with signals_held():  # a stop between creating the lock file and holding it would leave the file
                self.acquire()
        except BaseException:
            self.release()  # taken, then stopped by the signal held meanwhile: let go again
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        with signals_held():  # a signal meanwhile is delivered once the lock file is gone
            self.release()

    def acquire(self) -> None:
        """Take the lock (taking over a stale one), record this process, start the heartbeat."""
        parent = self.path.parent
        if not self.create and not os.path.lexists(self.target):
            raise ValueError(f"{self.label}: no such file or directory")
        self._created = [p for p in (parent, *parent.parents) if not os.path.lexists(p)][::-1]
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(f"{self.label}: cannot create {parent}: {exc.strerror or exc}") from None
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = self._wait_for_owner(fd)
                os.close(fd)
                self._remove_created()
                raise RunDirInUse(self._in_use(owner)) from None
            if self._same_file(fd):
                break
            os.close(fd)  # the previous owner removed the file after we opened it: try again
        owner = _read_owner(fd)
        if owner is not None and owner.host != socket.gethostname() and not self._stale(owner):
            os.close(fd)
            self._remove_created()
            raise RunDirInUse(self._in_use(owner))
        if owner is not None:
            log.warning("%s: taking over the lock of %s, which is no longer running", self.label, owner.describe())
        self.taken_over = owner
        record = {"command": self.command, "pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode("utf-8"), 0)
        self._fd = fd
        self._check_writable()
        self._stop.clear()
        self._beat = threading.Thread(target=self._heartbeat, name=f"runlock-{self.target.name}", daemon=True)
        self._beat.start()

    def release(self) -> None:
        """Stop the heartbeat, remove the lock file and let go of it (a no-op when not held)."""
        if self._fd is None:
            return
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        try:
            self.path.unlink(missing_ok=True)  # while still holding the flock: no one can take it in between
        finally:
            os.close(self._fd)
            self._fd = None
        self._remove_created()

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._fd is not None

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            self._remove_created()
            raise ValueError(f"{self.label}: cannot write to {self.path.parent}: {exc.strerror or exc}") from None

    def _same_file(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def _wait_for_owner(self, fd: int) -> LockOwner | None:
        """The live owner's record (it may be writing it just now: a short wait)."""
        for _ in range(20):
            owner = _read_owner(fd)
            if owner is not None:
                return owner
            time.sleep(0.01)
        return None

    def _stale(self, owner: LockOwner) -> bool:
        return time.time() - owner.heartbeat > self.stale_after_s

    def _in_use(self, owner: LockOwner | None) -> str:
        who = owner.describe() if owner is not None else "another process (not yet recorded)"
        return f"{self.label}: in use by {who}; wait for it to finish or stop it"

    def _check_writable(self) -> None:
        """An existing target directory must take a file (so a read-only one fails before any work)."""
        if not self.target.is_dir():
            return
        try:
            fd, probe = tempfile.mkstemp(prefix=".write-check.", dir=self.target)
        except OSError as exc:
            self.release()
            raise ValueError(f"{self.label}: cannot write to it: {exc.strerror or exc}") from None
        os.close(fd)
        os.unlink(probe)

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            fd = self._fd
            if fd is None:
                return
            try:
                os.utime(fd)
            except OSError as exc:  # a full or vanished filesystem: the owner goes on, others see an old heartbeat
                log.debug("heartbeat of %s failed: %s", self.path, exc)

    def _remove_created(self) -> None:
        for directory in reversed(self._created):
            try:
                directory.rmdir()
            except OSError:
                break
        self._created = []
