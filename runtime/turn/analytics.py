"""The analytics log: one JSON line per plan attempt, appended to a file.

The fields: docs/plans.md, "Analytics".
"""

from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()


class AnalyticsLog:
    """Appends records as JSON lines; each write is a single ``write`` of one line,
    so concurrent writers and a crash never leave an interleaved or partial line
    short of a torn final write."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        doc = {"ts": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), **record}
        line = _encoder.encode(doc) + b"\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [msgspec.json.decode(line) for line in self.path.read_bytes().splitlines() if line]
