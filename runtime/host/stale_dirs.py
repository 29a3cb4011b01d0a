"""Per-daemon scratch folders that outlive a killed daemon, found and removed.

Each daemon gives Ray a short folder of its own (``/tmp/nr-ray-*``: Ray's socket
paths must fit 107 bytes). A clean stop removes it; a SIGKILL cannot. The next daemon
sweeps such leftovers: a folder is stale when the daemon that made it (its
``owner.pid``) is gone and no live process still names it (a Ray process that
survived its daemon). A folder younger than a minute is never touched: its daemon
may not have written its pid yet.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

OWNER_FILE = "owner.pid"
GRACE_S = 60.0


def claim(prefix: str, parent: str = "/tmp") -> Path:
    """A new folder, marked as this process's."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    (folder / OWNER_FILE).write_text(str(os.getpid()))
    return folder


def sweep(prefix: str, parent: str = "/tmp") -> list[Path]:
    """Remove this user's stale ``prefix*`` folders under ``parent``; the ones removed."""
    candidates = [p for p in Path(parent).glob(f"{prefix}*") if _ours_and_old(p)]
    if not candidates:
        return []
    named = _named_by_live_processes([str(p) for p in candidates])
    removed = []
    for folder in candidates:
        if str(folder) in named or _owner_alive(folder):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _ours_and_old(path: Path) -> bool:
    try:
        info = path.lstat()
    except OSError:
        return False
    return (path.is_dir() and not path.is_symlink() and info.st_uid == os.getuid()
            and time.time() - info.st_mtime > GRACE_S)


def _owner_alive(folder: Path) -> bool:
    try:
        pid = int((folder / OWNER_FILE).read_text().strip())
    except (OSError, ValueError):
        return False  # a folder from before owner files, or a torn write: its mtime is old
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone's live process (a recycled pid): keep, to be safe
    return True


def _named_by_live_processes(paths: list[str]) -> set[str]:
    """Which of ``paths`` a live process's command line mentions (Ray's raylet and GCS
    name their session folder)."""
    wanted = [(p, p.encode()) for p in paths]
    named: set[str] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        named.update(p for p, raw in wanted if raw in cmdline)
    return named
