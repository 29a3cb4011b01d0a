"""Campaign packages: a ``.narratoria`` or ``.zip`` archive of a campaign folder
(docs/campaigns.md, "Packages").

A package is accepted wherever a folder is: ``open_campaign`` extracts it into a
temporary folder for the length of a ``with`` block, and the rest of the
pipeline only ever sees folders. The temporary folder is named after the
package (``tiny.narratoria`` → ``tiny/``) because a manifest without an ``id``
takes its id from the folder name, and a package must give the same id as the
folder it was packed from.

A package comes from anywhere, so it is checked before a byte is written: every
entry must stay inside its folder (no ``../``, absolute path, drive letter or
symbolic link), names must not collide on a case-insensitive disk, and the
total uncompressed size is capped (a zip bomb is refused, not extracted).
Entries may sit at the archive's root or under one top-level folder
(``campaign/`` as ``pack`` writes, or whatever folder a user zipped).

Writing packages is ``pack.py``.
"""

from __future__ import annotations

import re
import stat
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from narratoria.runtime.campaign.manifest import MANIFEST_NAMES, slug
from narratoria.runtime.campaign.problems import CampaignError, Problem

PACKAGE_SUFFIXES = (".narratoria", ".zip")
# Campaigns with art and music run to hundreds of MB (a shared one up to 500 MB).
MAX_UNCOMPRESSED_BYTES = 1 << 30
MAX_ENTRIES = 50_000
_DRIVE = re.compile(r"^[A-Za-z]:")
_IGNORED_TOP = ("__MACOSX",)  # the resource forks macOS adds when it zips a folder
_COPY_BLOCK = 1 << 16


def is_package(path: Path) -> bool:
    return Path(path).suffix.lower() in PACKAGE_SUFFIXES and Path(path).is_file()


def _refuse(entry: str, message: str) -> CampaignError:
    return CampaignError([Problem(entry, 1, "-", message)])


# -- reading ---------------------------------------------------------------------------

def check_entries(archive: zipfile.ZipFile, max_bytes: int = MAX_UNCOMPRESSED_BYTES
                  ) -> list[tuple[str, zipfile.ZipInfo]]:
    """(normalised "/" name, entry) of every file entry; CampaignError on the first unsafe one."""
    infos = archive.infolist()
    if len(infos) > MAX_ENTRIES:
        raise _refuse(".", f"{len(infos)} entries, more than the {MAX_ENTRIES} a package may hold")
    seen: dict[str, str] = {}
    files: list[tuple[str, zipfile.ZipInfo]] = []
    total = 0
    for info in infos:
        raw = info.filename
        name = raw.replace("\\", "/")  # some Windows tools write backslashes
        if name.startswith("/") or _DRIVE.match(name):
            raise _refuse(raw, "absolute path: a package's entries must stay inside its folder")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise _refuse(raw, "'..' in the path: a package's entries must stay inside its folder")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise _refuse(raw, "symbolic link: a package may not link outside its folder")
        if not parts:
            continue
        clean = "/".join(parts)
        # Two names one case-insensitive disk (macOS, Windows) would write as one file.
        other = seen.setdefault(clean.casefold(), raw)
        if other != raw:
            raise _refuse(raw, f"same name as {other} on a case-insensitive disk")
        if info.is_dir():
            continue
        total += info.file_size
        if total > max_bytes:
            raise _refuse(raw, f"package unpacks to more than {max_bytes} bytes")
        files.append((clean, info))
    return files


def campaign_prefix(names: list[str]) -> str:
    """The folder inside the archive that holds the manifest: "" (the root) or "top/"."""
    if any(n in MANIFEST_NAMES for n in names):
        return ""
    tops = {n.split("/", 1)[0] for n in names if "/" in n and n.split("/", 1)[0] not in _IGNORED_TOP}
    if len(tops) == 1:
        return f"{tops.pop()}/"
    return ""  # no manifest found: validation says so


def extract(package: Path, dest: Path, max_bytes: int = MAX_UNCOMPRESSED_BYTES) -> Path:
    """The campaign in ``package`` written to the new folder ``dest``; CampaignError if unsafe."""
    try:
        with zipfile.ZipFile(package) as archive:
            files = check_entries(archive, max_bytes)
            prefix = campaign_prefix([name for name, _ in files])
            dest.mkdir(parents=True)
            written = 0
            for name, info in files:
                if not name.startswith(prefix):
                    continue  # version.txt, __MACOSX/…: beside the campaign, not in it
                target = dest / name[len(prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(info) as src, open(target, "wb") as out:
                    # Counted as written: the sizes in the entry headers may lie.
                    while block := src.read(_COPY_BLOCK):
                        written += len(block)
                        if written > max_bytes:
                            raise _refuse(info.filename,
                                          f"package unpacks to more than {max_bytes} bytes")
                        out.write(block)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError) as exc:
        # RuntimeError: an encrypted entry; NotImplementedError: an unknown compression.
        raise _refuse(package.name, f"not a readable zip package: {exc}") from None
    return dest


@contextmanager
def open_campaign(path: Path, max_bytes: int = MAX_UNCOMPRESSED_BYTES) -> Iterator[Path]:
    """The campaign at ``path`` as a folder: the folder itself, or a package extracted."""
    path = Path(path)
    if not is_package(path):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="narratoria-campaign-") as tmp:
        yield extract(path, Path(tmp) / slug(path.stem), max_bytes)
