"""Fresh player characters on disk (docs/campaigns.md, "Player characters").

Layout, under the daemon's data directory (``NARRATORIA_DATA_DIR``, else
``$XDG_DATA_HOME/narratoria``)::

    characters/
    ├── char_<16 hex>.json                     # the record (FreshCharacter)
    └── char_<16 hex>_portrait_<8 hex>.png     # 512×512 PNG, named by content digest

Each character belongs to the identity that created it (``owner``: ``local``, the
device's user, or ``client:NAME``, ``runtime/host/identity.py``); a record without one
(written before owners were kept) is the local user's. Calls that pass ``owner`` see,
change and delete only that owner's characters (the daemon passes the caller's); the
local CLI passes none, as the data dir's owner.

The JSON file is the commit point of every change. A new portrait is written
under a new (digest) name *before* the JSON that points at it replaces the old
one, and the old portrait is removed only after, so a crash or a failed edit
never leaves a record pointing at a missing or half-written image. Every write
is a temp file plus ``os.replace``; validation (description, portrait decoding,
an import's contents) runs before anything is written, so a refused create,
edit or import leaves the directory as it was. Mutations of one directory are
serialised with an advisory lock, because a realisation recorded by the daemon
and an edit from the CLI may race on the same record.

Export files (``.narratoria-character``) are zip archives holding
``character.json`` and, when the character has one, ``portrait.png``. Import
reads the two members into memory (never extracting to disk), refuses any other
entry name, absolute or ``..`` paths included, and takes the description and
portrait through the same validation as ``create``; the imported character gets
a new id and no realisations (those belong to the exporting machine's campaigns).
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import re
import uuid
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import msgspec
from PIL import Image, ImageOps, UnidentifiedImageError

from narratoria.runtime.files import write_atomic
from narratoria.runtime.host.identity import LOCAL_OWNER
from narratoria.runtime.host.paths import default_data_dir

DESCRIPTION_MIN = 10
DESCRIPTION_MAX = 5000
NAME_MAX = 200
PORTRAIT_MAX_BYTES = 5 * 1024 * 1024
PORTRAIT_SIZE = 512
PORTRAIT_FORMATS = ("PNG", "JPEG", "WEBP")
# A 5 MB WebP or PNG can still decode to gigabytes; refuse before allocating it.
PORTRAIT_MAX_PIXELS = 40_000_000
EXPORT_FORMAT = "narratoria-character"
EXPORT_JSON = "character.json"
EXPORT_PORTRAIT = "portrait.png"
_EXPORT_JSON_MAX = 64 * 1024
_ID = re.compile(r"^char_[0-9a-f]{8,32}$")

UTC = timezone.utc


class CharacterError(ValueError):
    """A description, portrait, id or export file was refused; the message names the field."""


class CharacterNotFound(LookupError):
    """No fresh character has this id."""


class CharacterForbidden(Exception):
    """The character belongs to another identity than the caller."""


class RealizationRecord(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """One campaign's use of a fresh character (an entry of its ``realizations``)."""

    campaign_id: str
    campaign_title: str
    realization_id: str
    realized_at: datetime
    realized_name: str
    violation_state: Literal["none", "warning", "incompatible"] = "none"
    last_played: datetime | None = None
    playtime_hours: float = 0.0
    completed: bool = False


class FreshCharacter(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A fresh character's record, as stored in ``characters/<id>.json``.

    Snake-case keys, as the spec's schema writes them. ``portrait_path`` is
    relative to the data directory (``characters/<id>_portrait_<digest>.png``).
    """

    id: str
    status: Literal["fresh", "used"]
    created_at: datetime
    updated_at: datetime
    description: str
    name: str | None = None
    portrait_path: str | None = None
    realizations: list[RealizationRecord] = []
    owner: str | None = None  # None: written before owners were kept, the local user's

    def realization_for(self, campaign_id: str) -> RealizationRecord | None:
        return next((r for r in self.realizations if r.campaign_id == campaign_id), None)


class _ExportDoc(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """``character.json`` inside an export file: the template, nothing machine-specific."""

    format: str
    version: int
    description: str
    name: str | None = None
    portrait: str | None = None   # the member holding the portrait, when there is one
    created_at: datetime | None = None


_encoder = msgspec.json.Encoder()


def characters_dir(data_dir: Path | None = None) -> Path:
    return Path(data_dir if data_dir is not None else default_data_dir()) / "characters"


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


# -- validation: each message starts with the field it is about -----------------------

def validate_description(description: object) -> str:
    if not isinstance(description, str):
        raise CharacterError(f"description: must be text, got {type(description).__name__}")
    text = description.strip()
    if not DESCRIPTION_MIN <= len(text) <= DESCRIPTION_MAX:
        raise CharacterError(f"description: must be {DESCRIPTION_MIN}-{DESCRIPTION_MAX} characters, "
                             f"got {len(text)}")
    return text


def _validate_name(name: object) -> str | None:
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > NAME_MAX:
        got = f"{len(name.strip())} characters" if isinstance(name, str) else type(name).__name__
        raise CharacterError(f"name: must be 1-{NAME_MAX} characters of text, got {got}")
    return name.strip()


def check_id(character_id: str) -> str:
    # Ids become file names: anything else (``../x``, ``/etc``) must not reach the filesystem.
    if not isinstance(character_id, str) or not _ID.match(character_id):
        # Quoted only when short: an id is a caller's input, and may be megabytes.
        shown = (repr(character_id) if isinstance(character_id, str) and len(character_id) <= 40
                 else f"{len(character_id) if isinstance(character_id, str) else 0} characters")
        raise CharacterError(f"id: not a character id (char_ followed by 8-32 hex digits): {shown}")
    return character_id


def owner_of(character: FreshCharacter) -> str:
    return character.owner or LOCAL_OWNER


def _read_portrait_source(portrait: bytes | str | os.PathLike[str]) -> bytes:
    if isinstance(portrait, (bytes, bytearray)):
        return bytes(portrait)
    path = Path(portrait)
    try:
        size = path.stat().st_size
        if size > PORTRAIT_MAX_BYTES:  # checked before reading: the file may be huge
            raise CharacterError(f"portrait: {path.name} is {size} bytes, over the "
                                 f"{PORTRAIT_MAX_BYTES} byte (5 MB) limit")
        return path.read_bytes()
    except OSError as exc:
        raise CharacterError(f"portrait: cannot read {path}: {exc.strerror or exc}") from None


def prepare_portrait(portrait: bytes | str | os.PathLike[str]) -> bytes:
    """The portrait as the 512×512 PNG that is stored; CharacterError if refused.

    The format is decided by the bytes (Pillow's sniffing, limited to PNG, JPEG
    and WebP), never by the file name. Aspect ratio is preserved: the image is
    scaled (up or down) until its longer side is 512 px and centred on a
    transparent 512×512 canvas, so a non-square portrait is letterboxed
    rather than cropped or stretched.
    """
    data = _read_portrait_source(portrait)
    if len(data) > PORTRAIT_MAX_BYTES:
        raise CharacterError(f"portrait: {len(data)} bytes, over the {PORTRAIT_MAX_BYTES} byte (5 MB) limit")
    try:
        with Image.open(io.BytesIO(data), formats=PORTRAIT_FORMATS) as image:
            if image.width * image.height > PORTRAIT_MAX_PIXELS:
                raise CharacterError(f"portrait: {image.width}×{image.height} pixels is too large "
                                     f"(at most {PORTRAIT_MAX_PIXELS} pixels)")
            image.load()
            # Phone JPEGs store rotation in EXIF; apply it or the portrait lies on its side.
            upright = ImageOps.exif_transpose(image).convert("RGBA")
    except CharacterError:
        raise
    except (UnidentifiedImageError, Image.DecompressionBombError):
        raise CharacterError("portrait: not a PNG, JPEG or WebP image") from None
    except (OSError, ValueError, SyntaxError) as exc:  # truncated or corrupt data
        raise CharacterError(f"portrait: cannot decode the image: {exc}") from None
    fitted = ImageOps.contain(upright, (PORTRAIT_SIZE, PORTRAIT_SIZE), Image.Resampling.LANCZOS)
    canvas = Image.new("RGBA", (PORTRAIT_SIZE, PORTRAIT_SIZE), (0, 0, 0, 0))
    canvas.paste(fitted, ((PORTRAIT_SIZE - fitted.width) // 2, (PORTRAIT_SIZE - fitted.height) // 2))
    out = io.BytesIO()
    canvas.save(out, format="PNG", optimize=True)
    return out.getvalue()


class CharacterStore:
    """The fresh characters of one data directory."""

    def __init__(self, data_dir: Path | None = None) -> None:
        self.data_dir = Path(data_dir if data_dir is not None else default_data_dir())
        self.root = characters_dir(self.data_dir)

    # -- reading -----------------------------------------------------------------

    def _json_path(self, character_id: str) -> Path:
        return self.root / f"{check_id(character_id)}.json"

    def get(self, character_id: str, owner: str | None = None) -> FreshCharacter:
        """The character; with ``owner``, CharacterForbidden when it is another's."""
        path = self._json_path(character_id)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise CharacterNotFound(f"no character {character_id!r}") from None
        try:
            character = msgspec.json.decode(data, type=FreshCharacter)
        except msgspec.DecodeError as exc:
            raise CharacterError(f"{path.name}: unreadable character record: {exc}") from None
        if owner is not None and owner_of(character) != owner:
            raise CharacterForbidden(f"character {character_id!r} belongs to another identity "
                                     f"than {owner}")
        return character

    def list(self, owner: str | None = None) -> list[FreshCharacter]:
        """Every readable character (``owner``'s only, when given), oldest first; an
        unreadable record is skipped."""
        if not self.root.is_dir():
            return []
        found = []
        for path in self.root.glob("char_*.json"):
            try:
                character = self.get(path.stem)
            except (CharacterError, CharacterNotFound):
                continue  # a stray or foreign file is not a character
            if owner is None or owner_of(character) == owner:
                found.append(character)
        return sorted(found, key=lambda c: (c.created_at, c.id))

    def portrait_file(self, character: FreshCharacter) -> Path | None:
        return self.data_dir / character.portrait_path if character.portrait_path else None

    # -- writing -----------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def _commit(self, character: FreshCharacter, portrait_png: bytes | None,
                previous: FreshCharacter | None) -> FreshCharacter:
        """Write the portrait (if new), then the record; then drop a replaced portrait."""
        if portrait_png is not None:
            digest = hashlib.sha256(portrait_png).hexdigest()[:8]
            relative = f"characters/{character.id}_portrait_{digest}.png"
            write_atomic(self.data_dir / relative, portrait_png)
            character = msgspec.structs.replace(character, portrait_path=relative)
        write_atomic(self._json_path(character.id), _encoder.encode(character))
        old = previous.portrait_path if previous else None
        if old and old != character.portrait_path:
            (self.data_dir / old).unlink(missing_ok=True)
        return character

    def create(self, description: str, portrait: bytes | str | os.PathLike[str] | None,
               name: str | None = None, owner: str = LOCAL_OWNER) -> FreshCharacter:
        """A fresh character of ``owner``: the player's description and portrait
        (both are required, as the on-device models cannot draw one)."""
        text = validate_description(description)
        name = _validate_name(name)
        if portrait is None:
            raise CharacterError("portrait: required (PNG, JPEG or WebP, at most 5 MB); "
                                 "the on-device models cannot draw one")
        png = prepare_portrait(portrait)
        now = _now()
        character = FreshCharacter(id=f"char_{uuid.uuid4().hex[:16]}", status="fresh",
                                   created_at=now, updated_at=now, description=text, name=name,
                                   owner=owner)
        with self._locked():
            return self._commit(character, png, None)

    def edit(self, character_id: str, *, description: str | None = None,
             portrait: bytes | str | os.PathLike[str] | None = None,
             name: str | None = None, owner: str | None = None) -> FreshCharacter:
        """Change what is given (of ``owner``'s character, when given); everything is
        validated before anything is written."""
        text = validate_description(description) if description is not None else None
        name = _validate_name(name)
        png = prepare_portrait(portrait) if portrait is not None else None
        with self._locked():
            current = self.get(character_id, owner)
            changes: dict[str, object] = {"updated_at": _now()}
            if text is not None:
                changes["description"] = text
            if name is not None:
                changes["name"] = name
            return self._commit(msgspec.structs.replace(current, **changes), png, current)

    def delete(self, character_id: str, owner: str | None = None) -> FreshCharacter:
        """Remove the character (``owner``'s, when given); the record as it was."""
        with self._locked():
            character = self.get(character_id, owner)
            # The record goes first: a portrait without a record is litter, the reverse a broken record.
            self._json_path(character_id).unlink()
            if character.portrait_path:
                (self.data_dir / character.portrait_path).unlink(missing_ok=True)
        return character

    def record_realization(self, character_id: str, record: RealizationRecord) -> FreshCharacter:
        """Add or replace the campaign's entry in ``realizations``; the character becomes "used"."""
        with self._locked():
            current = self.get(character_id)
            others = [r for r in current.realizations if r.campaign_id != record.campaign_id]
            updated = msgspec.structs.replace(current, status="used",
                                              realizations=[*others, record])
            return self._commit(updated, None, current)

    # -- export / import ---------------------------------------------------------

    def export(self, character_id: str, destination: str | os.PathLike[str]) -> Path:
        """Write the character as one ``.narratoria-character`` (zip) file at ``destination``."""
        character = self.get(character_id)
        portrait = self.portrait_file(character)
        try:
            png = portrait.read_bytes() if portrait else None
        except OSError as exc:
            raise CharacterError(f"portrait: cannot read {portrait}: {exc.strerror}") from None
        target = Path(destination)
        write_atomic(target, export_archive(character.description, character.name,
                                            character.created_at, png))
        return target

    def import_file(self, source: str | os.PathLike[str]) -> FreshCharacter:
        """Add the character in export file ``source`` under a new id; CharacterError if refused."""
        doc, portrait = _read_export(Path(source))
        return self.create(doc.description, portrait, doc.name)


def export_archive(description: str, name: str | None, created_at: datetime | None,
                   portrait_png: bytes | None) -> bytes:
    """The bytes of a ``.narratoria-character`` file (also built from a daemon's answer)."""
    doc = _ExportDoc(format=EXPORT_FORMAT, version=1, description=description, name=name,
                     created_at=created_at, portrait=EXPORT_PORTRAIT if portrait_png else None)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(EXPORT_JSON, msgspec.json.format(_encoder.encode(doc), indent=2))
        if portrait_png:
            archive.writestr(EXPORT_PORTRAIT, portrait_png)
    return buffer.getvalue()


def read_export(source: str | os.PathLike[str]) -> tuple[str, str | None, bytes | None]:
    """The description, name and portrait in export file ``source``, checked as import
    checks them (CharacterError if refused); the portrait is not yet validated."""
    doc, portrait = _read_export(Path(source))
    return doc.description, doc.name, portrait


def _read_export(path: Path) -> tuple[_ExportDoc, bytes | None]:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise CharacterError(f"import: {path.name} is not a character export file: {exc}") from None
    with archive:
        members = {info.filename: info for info in archive.infolist()}
        for name in members:
            # Nothing is extracted, but a hostile name is a sign of a hostile file: refuse it whole.
            if name.startswith(("/", "\\")) or "\\" in name or ".." in Path(name).parts:
                raise CharacterError(f"import: unsafe entry name {name!r} in {path.name}")
            if name not in (EXPORT_JSON, EXPORT_PORTRAIT):
                raise CharacterError(f"import: unexpected entry {name!r} in {path.name}")
        if EXPORT_JSON not in members:
            raise CharacterError(f"import: {path.name} has no {EXPORT_JSON}")
        doc = _decode_export(_member(archive, members[EXPORT_JSON], _EXPORT_JSON_MAX), path.name)
        portrait = None
        if doc.portrait is not None:
            if doc.portrait not in members or doc.portrait != EXPORT_PORTRAIT:
                raise CharacterError(f"import: portrait {doc.portrait!r} is not in {path.name}")
            portrait = _member(archive, members[EXPORT_PORTRAIT], PORTRAIT_MAX_BYTES)
    return doc, portrait


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    # The header's size can lie (a zip bomb): read at most one byte past the limit.
    with archive.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        field = "portrait" if info.filename == EXPORT_PORTRAIT else "import"
        raise CharacterError(f"{field}: {info.filename} is over the {limit} byte limit")
    return data


def _decode_export(data: bytes, file: str) -> _ExportDoc:
    try:
        doc = msgspec.json.decode(data, type=_ExportDoc)
    except msgspec.DecodeError as exc:
        raise CharacterError(f"import: {file}: {EXPORT_JSON}: {exc}") from None
    if doc.format != EXPORT_FORMAT or doc.version != 1:
        raise CharacterError(f"import: {file}: not a version 1 {EXPORT_FORMAT} file "
                             f"(format {doc.format!r}, version {doc.version})")
    return doc
