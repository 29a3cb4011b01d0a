"""One daemon per data dir: ``<data dir>/daemon.lock``, held for the daemon's whole life.

Invariants:

- The lock is an ``flock`` on a descriptor the daemon keeps open; the kernel drops it
  when the process ends, SIGKILL included, so a killed daemon never leaves a stale
  lock. The file itself stays (removing it would let two processes lock two different
  inodes at one path); what it says is only a hint, the ``flock`` is the truth.
- The file holds the holder's pid, written after the lock is taken; another process
  reads it only to name the holder in its refusal.
- The descriptor is not inherited (``os.open`` makes it close-on-exec): Ray's processes
  and skills cannot keep a dead daemon's data dir locked.
- Taken by ``serve`` before Ray starts or anything in the data dir is opened, so a
  second daemon on the same data dir is refused at once, not after Ray and DuckDB
  (the database's own lock, runtime/db.py, remains the last line).
- Plain Python, no Ray: the refusal must cost no more than a Python start.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = "daemon.lock"
# The holder writes its pid right after locking; a reader that comes in between waits
# this long for it before naming no one.
PID_WAIT_S = 1.0


class DataDirInUse(RuntimeError):
    """Another live process holds the data dir (``pid``: None when it wrote none)."""

    def __init__(self, data_dir: Path, pid: int | None) -> None:
        self.data_dir, self.pid = data_dir, pid
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"data dir {data_dir} in use by {holder} (another narratoria "
                         "serve); stop it or pass --data-dir")


def lock_path(data_dir: Path) -> Path:
    return Path(data_dir) / LOCK_NAME


def acquire(data_dir: Path) -> int:
    """Lock ``data_dir`` (created if missing, under the caller's umask) for this process;
    the descriptor to keep open (:func:`release` or the process's end frees it).

    DataDirInUse when a live process holds it; OSError when the lock file cannot be
    opened or locked (a read-only folder, a link planted at its path)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(data_dir), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise DataDirInUse(data_dir, holder(data_dir)) from None
        raise
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        os.close(fd)
        raise
    return fd


def release(fd: int) -> None:
    """Give the lock up; the file is emptied first so that it names no one."""
    try:
        os.ftruncate(fd, 0)
    except OSError:
        pass  # the lock still goes with the descriptor
    os.close(fd)


@contextmanager
def hold(data_dir: Path) -> Iterator[int]:
    """:func:`acquire` for the length of a ``with`` block."""
    fd = acquire(data_dir)
    try:
        yield fd
    finally:
        release(fd)


def holder(data_dir: Path, wait_s: float = PID_WAIT_S) -> int | None:
    """The pid the lock file names, waiting up to ``wait_s`` for a holder that has
    locked but not yet written; None when it names no one."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            text = lock_path(data_dir).read_text().strip()
        except (OSError, UnicodeDecodeError):
            text = ""
        if text.isdigit():
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
