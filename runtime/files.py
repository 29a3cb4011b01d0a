"""Files replaced in one step: a reader sees the old file or the new one, never half.

The bytes go to a temporary file beside the target (same file system, so the
rename is atomic), are flushed to disk, and replace the target with ``os.replace``.
The temporary file is created with mode 0600 (``mkstemp``): several of these files
(skill settings, characters) hold a player's secrets or personal data.

The data dir is private to its user: processes that write it run with
``PRIVATE_UMASK`` (files 0600, folders 0700 at creation), and ``make_private``
corrects a data dir made before that, once at start.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

# Group and other get nothing: the database, its WAL, the memory journal, the daemon
# token, clients.json and characters hold secrets and personal data.
PRIVATE_UMASK = 0o077


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def make_private(root: Path) -> list[str]:
    """Take group and other permissions off ``root`` and everything under it that this
    user owns (the owner's own bits are kept); return the paths changed, relative to
    ``root``, in walk order.

    ``root`` itself may be a symbolic link (the user's choice of data dir); below it no
    link is followed or changed, so nothing outside the folder is touched, even by a
    link swapped in during the walk: every change goes through a descriptor opened
    without following links (``os.fwalk`` and ``O_NOFOLLOW``). Entries that cannot be
    opened (sockets, files the owner cannot read) are left as they are.
    """
    changed: list[str] = []
    top = os.path.realpath(root)
    if not os.path.isdir(top):
        return changed
    for folder, _dirs, files, dir_fd in os.fwalk(top, follow_symlinks=False):
        relative = os.path.relpath(folder, top)
        if _private_fd(dir_fd):
            changed.append(relative)
        for name in files:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                             dir_fd=dir_fd)
            except OSError:  # a link (ELOOP), a socket (ENXIO), unreadable: not ours to fix
                continue
            try:
                if _private_fd(fd):
                    changed.append(os.path.normpath(os.path.join(relative, name)))
            finally:
                os.close(fd)
    return changed


def _private_fd(fd: int) -> bool:
    """Clear group/other bits of the open file or folder ``fd`` if this user owns it."""
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return False
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o077:
        return False
    os.fchmod(fd, mode & ~0o077)
    return True
