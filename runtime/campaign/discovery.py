"""Phase 1 of ingestion: every file of a campaign folder, content or asset (§6.2.15).

Text the pipeline reads (``.txt``, ``.md``, ``.yml``, ``.yaml``, ``.json``) is
content; every other file is a binary asset kept on disk and described, never
read as text. Hidden files and folders (``.git``, ``.DS_Store``) are the
author's tooling, not the campaign, and are skipped; so is the manifest, which
is configuration rather than searchable content (phase 9). Symbolic links are
skipped too: a campaign must not reach outside its folder.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from .manifest import MANIFEST_NAMES

CONTENT_FORMATS = frozenset({"txt", "md", "yml", "yaml", "json"})
STRUCTURED_FORMATS = frozenset({"yml", "yaml", "json"})
SIDECAR_SUFFIX = ".keywords.txt"  # keywords for the asset it sits beside (§6.2.12)


@dataclass(frozen=True)
class CampaignFile:
    path: Path                          # on disk
    relative: str                       # "/"-separated, relative to the campaign folder
    kind: Literal["content", "asset", "sidecar"]
    format: str                         # extension without the dot, lower case ("" if none)
    size_bytes: int


def discover(root: Path) -> list[CampaignFile]:
    """Every campaign file under ``root``, sorted by relative path so runs are repeatable."""
    found: list[CampaignFile] = []
    for folder, dirs, files in os.walk(root):
        # Pruned in place so os.walk does not descend into hidden folders at all.
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                         and not os.path.islink(os.path.join(folder, d)))
        for name in files:
            path = Path(folder) / name
            if name.startswith(".") or path.is_symlink():
                continue
            relative = path.relative_to(root).as_posix()
            if relative in MANIFEST_NAMES:
                continue
            fmt = path.suffix[1:].lower()
            if name.lower().endswith(SIDECAR_SUFFIX):
                kind = "sidecar"
            elif fmt in CONTENT_FORMATS:
                kind = "content"
            else:
                kind = "asset"
            found.append(CampaignFile(path, relative, kind, fmt, path.stat().st_size))
    return sorted(found, key=lambda f: f.relative)
