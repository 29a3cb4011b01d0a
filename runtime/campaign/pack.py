"""Writing a campaign package: ``narratoria campaigns pack DIR -o NAME.narratoria``.

Only a valid campaign is packed (the problems are the author's to fix first).
The package holds the campaign under ``campaign/`` and a ``version.txt`` beside
it. It is deterministic: the same folder gives the same
bytes (sorted entries, fixed timestamps and modes), so packages can be compared
and cached by digest. Hidden files (``.git``, notes) are the author's tooling
and stay out; a symbolic link is refused, since it would pack whatever it
points at, possibly outside the campaign.
"""

from __future__ import annotations

import os
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from narratoria.runtime.campaign.package import open_campaign
from narratoria.runtime.campaign.problems import CampaignError, Problem
from narratoria.runtime.campaign.validate import validate

PACKED_FOLDER = "campaign"          # where the campaign's files go inside the package
VERSION_FILE = "version.txt"        # format metadata beside that folder
FORMAT_VERSION = "1"
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can hold


@dataclass(frozen=True)
class PackResult:
    output: Path
    campaign_id: str
    version: str
    files: int
    bytes: int


def packable_files(root: Path, skip: Path | None = None) -> list[tuple[str, Path]]:
    """(relative "/" name, path) of every file to pack, sorted; CampaignError on a link."""
    found: list[tuple[str, Path]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .git and the like
        for name in [*dirs, *(f for f in files if not f.startswith("."))]:
            path = Path(folder) / name
            if path.is_symlink():
                # A link would pack what it points at, which may be outside the campaign.
                raise CampaignError([Problem(path.relative_to(root).as_posix(), 1, "-",
                                             "symbolic link: a campaign to pack may not contain links")])
            if name in files and (skip is None or path.resolve() != skip):
                found.append((path.relative_to(root).as_posix(), path))
    return sorted(found)


def pack(folder: Path, output: Path) -> PackResult:
    """Write the valid campaign ``folder`` as the package ``output``; CampaignError if invalid."""
    with open_campaign(Path(folder)) as root:
        report = validate(root)
        if not report.ok:
            raise CampaignError(report.errors)
        assert report.manifest is not None  # a report without errors has one
        output = Path(output)
        files = packable_files(root, skip=output.resolve())
        output.parent.mkdir(parents=True, exist_ok=True)
        # Written beside the output then renamed: a failed pack leaves no half package.
        fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=output.parent)
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
                _write(archive, VERSION_FILE,
                       f"format_version: {FORMAT_VERSION}\n".encode())
                for name, path in files:
                    _write(archive, f"{PACKED_FOLDER}/{name}", path.read_bytes())
            os.replace(tmp, output)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return PackResult(output, report.manifest.id, report.manifest.version, len(files),
                      output.stat().st_size)


def _write(archive: zipfile.ZipFile, name: str, data: bytes) -> None:
    # A fixed time, mode and system: the bytes depend only on names and contents.
    info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.create_system = 3  # unix, whatever system packs
    info.external_attr = (stat.S_IFREG | 0o644) << 16
    archive.writestr(info, data)

