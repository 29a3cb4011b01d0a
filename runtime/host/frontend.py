"""Blocking helpers behind the daemon's front-end calls (ListCampaigns, assets, skill
settings, characters): plain Python over files, so the gRPC handlers stay thin.

Asset paths a front-end sees are ``campaign/<relative path>`` (a file of the
session's campaign folder) or ``data/<relative path>`` (a file of the session's
playthrough data folder, ``<data dir>/playthroughs/<playthrough id>/``: what the
daemon generates for that playthrough). :func:`resolve_asset` is the one place a
requested path becomes a file: it refuses ``..``, absolute paths, NUL bytes and
anything (symbolic links included) that resolves outside its folder, naming the
path; inside the campaign folder only files the campaign declares as assets are
served, never its content (a hidden stat's file, say).
"""

from __future__ import annotations

import mimetypes
import os
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Iterable, Literal

from narratoria.runtime.campaign.assets import AssetRecord
from narratoria.runtime.campaign.catalog import list_campaigns
from narratoria.runtime.campaign.manifest import load_manifest
from narratoria.runtime.campaign.package import open_campaign
from narratoria.runtime.campaign.problems import CampaignError
from narratoria.runtime.sessions.view import CAMPAIGN_PREFIX, DATA_PREFIX

MAX_ASSET_BYTES = 16 * 1024 * 1024
PLAYTHROUGHS_DIR = "playthroughs"
_SAFE_NAME = re.compile(r"^[\w.-]{1,200}$")
_EXTRA_TYPES = {"webp": "image/webp", "svg": "image/svg+xml", "ogg": "audio/ogg",
                "oga": "audio/ogg", "opus": "audio/opus", "flac": "audio/flac",
                "mp3": "audio/mpeg", "wav": "audio/wav", "webm": "video/webm",
                "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg",
                "gif": "image/gif", "mp4": "video/mp4"}


class AssetPathError(ValueError):
    """A requested asset path that leaves its folder or is malformed (INVALID_ARGUMENT)."""


class AssetNotFound(LookupError):
    """No such asset (NOT_FOUND)."""


class AssetTooLarge(Exception):
    """An asset over MAX_ASSET_BYTES (RESOURCE_EXHAUSTED)."""


# -- campaigns ---------------------------------------------------------------------------

@dataclass(frozen=True)
class CampaignSummary:
    id: str
    title: str
    description: str
    path: str
    builtin: bool
    free_text: bool
    valid: bool
    errors: list[str]
    version: str


def free_text_allowed(fields: dict[str, Any]) -> bool:
    """The manifest's ``allowFreeText``: free text is on unless a campaign turns it off
    (``allowFreeText: false``); the choices are offered either way."""
    return fields.get("allowFreeText") is not False


def campaign_summaries() -> list[CampaignSummary]:
    """Every campaign of the built-in then the user folder, validated."""
    out = []
    for entry in list_campaigns():
        fields: dict[str, Any] = {}
        try:
            with open_campaign(entry.path) as root:
                fields = load_manifest(root).fields
        except (CampaignError, OSError):
            pass
        description = fields.get("description")
        out.append(CampaignSummary(
            id=entry.id or "", title=entry.title or entry.path.name,
            description=str(description).strip() if isinstance(description, str) else "",
            path=str(entry.path), builtin=entry.source == "builtin",
            free_text=free_text_allowed(fields), valid=entry.valid, errors=list(entry.errors),
            version=entry.version or ""))
    return out


# -- assets --------------------------------------------------------------------------------

def media_type(name: str) -> str:
    ext = PurePosixPath(name).suffix[1:].lower()
    return _EXTRA_TYPES.get(ext) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def kind_of(media: str) -> Literal["image", "audio", "other"]:
    top = media.split("/", 1)[0]
    return top if top in ("image", "audio") else "other"  # type: ignore[return-value]


def playthrough_dir(data_dir: Path, playthrough_id: str) -> Path:
    """The playthrough's own data folder (it may not exist: nothing generated yet)."""
    if not _SAFE_NAME.match(playthrough_id) or playthrough_id in (".", ".."):
        raise AssetNotFound(f"playthrough {playthrough_id!r}: no data folder")
    return Path(data_dir) / PLAYTHROUGHS_DIR / playthrough_id


def _title(relative: str) -> str:
    stem = PurePosixPath(relative).name.split(".", 1)[0]
    return re.sub(r"[_\-]+", " ", stem).strip().title() or PurePosixPath(relative).name


@dataclass(frozen=True)
class AssetSummary:
    path: str
    kind: str
    media_type: str
    title: str
    keywords: list[str]
    size_bytes: int


def list_assets(records: Iterable[AssetRecord], data_folder: Path | None) -> list[AssetSummary]:
    """The campaign's accepted assets, then the files of the playthrough's data folder."""
    out = []
    for record in records:
        media = media_type(record.path)
        out.append(AssetSummary(CAMPAIGN_PREFIX + record.path, kind_of(media), media,
                                record.alt_text or _title(record.path), list(record.keywords),
                                record.size_bytes))
    if data_folder is not None and data_folder.is_dir():
        root = data_folder.resolve()
        for folder, dirs, files in os.walk(root):  # os.walk does not follow symlinked folders
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                path = Path(folder) / name
                if name.startswith(".") or path.is_symlink() or not path.is_file():
                    continue
                relative = path.relative_to(root).as_posix()
                media = media_type(name)
                out.append(AssetSummary(DATA_PREFIX + relative, kind_of(media), media,
                                        _title(relative), [], path.stat().st_size))
    return out


def _relative(path: str, given: str) -> str:
    """The part after the prefix, refused when it could leave its folder."""
    if not path:
        raise AssetPathError(f"path: {given!r}: names no file")
    if "\0" in path or "\\" in path:
        raise AssetPathError(f"path: {given!r}: must not hold NUL or backslash characters")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        raise AssetPathError(f"path: {given!r}: must be relative to its folder, not absolute")
    if any(part == ".." for part in pure.parts):
        raise AssetPathError(f"path: {given!r}: must not contain '..'")
    return pure.as_posix()


def resolve_asset(path: str, campaign_root: Path | None, campaign_assets: Iterable[str],
                  data_folder: Path | None) -> Path:
    """The file ``path`` names (``campaign/...`` or ``data/...``); AssetPathError when it
    is malformed or leaves its folder, AssetNotFound when there is no such asset."""
    if len(path) > 4096:
        raise AssetPathError(f"path: {len(path)} characters; at most 4096")
    if path.startswith(CAMPAIGN_PREFIX):
        relative, root = _relative(path[len(CAMPAIGN_PREFIX):], path), campaign_root
    elif path.startswith(DATA_PREFIX):
        relative, root = _relative(path[len(DATA_PREFIX):], path), data_folder
    else:
        raise AssetPathError(f"path: {path!r}: must start with {CAMPAIGN_PREFIX!r} or {DATA_PREFIX!r}")
    if root is None:
        raise AssetNotFound(f"path: {path!r}: the session has no such folder")
    try:
        base = root.resolve()
        target = (base / relative).resolve()
        if target != base and not target.is_relative_to(base):
            raise AssetPathError(f"path: {path!r}: leaves its folder (a symbolic link out of it?)")
        if path.startswith(CAMPAIGN_PREFIX) and relative not in set(campaign_assets):
            raise AssetNotFound(f"path: {path!r}: no such asset in the campaign")
        if not target.is_file():
            raise AssetNotFound(f"path: {path!r}: no such file")
    except OSError as exc:  # a name too long
        raise AssetNotFound(f"path: {path!r}: cannot be read: {exc.strerror or exc}") from None
    except RuntimeError:  # Path.resolve on a symbolic link loop
        raise AssetPathError(f"path: {path!r}: a symbolic link loop") from None
    return target


def read_asset(target: Path, path: str) -> bytes:
    try:
        size = target.stat().st_size
        if size > MAX_ASSET_BYTES:
            raise AssetTooLarge(f"path: {path!r} is {size} bytes, over the {MAX_ASSET_BYTES} "
                                "byte (16 MiB) limit")
        return target.read_bytes()
    except OSError as exc:
        raise AssetNotFound(f"path: {path!r}: cannot be read: {exc.strerror or exc}") from None


# -- skill settings ---------------------------------------------------------------------------

def field_problems(problems: Iterable[str], fields: Iterable[str]) -> list[tuple[str, str]]:
    """``"name: message"`` problems as (field, message) pairs; a problem that names
    no setting (the file's own) has field ""."""
    known = set(fields)
    out = []
    for problem in problems:
        head, sep, rest = problem.partition(": ")
        if sep and head in known:
            out.append((head, rest))
        else:
            out.append(("", problem))
    return out
