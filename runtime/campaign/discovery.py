"""Phase 1 of ingestion: every file of a campaign folder, content or asset
(docs/campaigns.md, "Layout").

Text the pipeline reads (``.txt``, ``.md``, ``.yml``, ``.yaml``, ``.json``) is
content; every other file is a binary asset kept on disk and described, never
read as text. Hidden files and folders (``.git``, ``.DS_Store``) are the
author's tooling, not the campaign, and are skipped; so is the manifest, which
is configuration rather than searchable content (phase 9). Symbolic links are
skipped too: a campaign must not reach outside its folder. So are text files over
``MAX_TEXT_FILE_BYTES``: validation reports them (``discover(..., oversized=True)``),
which makes the campaign invalid, and nothing else reads them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from narratoria.runtime.campaign.manifest import MANIFEST_NAMES

CONTENT_FORMATS = frozenset({"txt", "md", "yml", "yaml", "json"})
STRUCTURED_FORMATS = frozenset({"yml", "yaml", "json"})
SIDECAR_SUFFIX = ".keywords.txt"  # keywords for the asset it sits beside
# A text file is read, parsed, chunked and embedded whole, and ingestion embeds about ten
# chunks (~800 bytes each) a second on a 2-core machine: 1 MiB is ~1,300 chunks, about two
# minutes of the embedder. The built-in campaigns' largest text file is 3.5 KB. A larger
# file is a validation error naming it and its size, and no other reader opens it.
MAX_TEXT_FILE_BYTES = 1 << 20
# All text files of a campaign together: past this, ingestion would hold the embedder
# for most of an hour here.
MAX_CAMPAIGN_TEXT_BYTES = 16 << 20


@dataclass(frozen=True)
class CampaignFile:
    path: Path                          # on disk
    relative: str                       # "/"-separated, relative to the campaign folder
    kind: Literal["content", "asset", "sidecar"]
    format: str                         # extension without the dot, lower case ("" if none)
    size_bytes: int

    @property
    def too_large(self) -> bool:
        """A text file past MAX_TEXT_FILE_BYTES (assets are never read as text)."""
        return self.kind != "asset" and self.size_bytes > MAX_TEXT_FILE_BYTES


def discover(root: Path, *, oversized: bool = False) -> list[CampaignFile]:
    """Every campaign file under ``root``, sorted by relative path so runs are repeatable;
    text files over MAX_TEXT_FILE_BYTES only with ``oversized`` (validation, which reports
    them), so that no reader ever parses one."""
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
    return sorted((f for f in found if oversized or not f.too_large), key=lambda f: f.relative)
