"""Files replaced in one step: a reader sees the old file or the new one, never half.

The bytes go to a temporary file beside the target (same file system, so the
rename is atomic), are flushed to disk, and replace the target with ``os.replace``.
The temporary file is created with mode 0600 (``mkstemp``): several of these files
(skill settings, characters) hold a player's secrets or personal data.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
