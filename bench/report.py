"""What every benchmark report shares: the machine it ran on, progress lines on
stderr (stdout stays clean for --json), percentiles."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform()}


def say(progress: bool, text: str) -> None:
    if progress:
        print(f"  {text}", file=sys.stderr, flush=True)


def pct(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank below; ``values`` not empty)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def append_section(path: Path, text: str) -> None:
    """Append ``text`` (a markdown section) to ``path``, a new one titled "# Benchmarks"."""
    if not path.exists():
        path.write_text("# Benchmarks\n")
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)
