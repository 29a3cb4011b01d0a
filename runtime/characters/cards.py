"""SillyTavern character cards (Character Card V1, V2 and V3): reading and writing.

A card is JSON describing one chat character. It comes as

- a PNG whose ``chara`` text chunk holds the base64 of V1 (flat) or V2 JSON
  (``{"spec": "chara_card_v2", "data": {...}}``), and, for V3, a ``ccv3`` chunk that
  wins over ``chara`` when both are there (writers keep ``chara`` for old readers);
- a plain JSON file, V1, V2 or V3;
- CHARX: a zip with ``card.json`` (V3) and the assets it names, the portrait being
  the ``icon`` asset called ``main`` (``embeded://assets/icon/images/main.png``,
  the spec's spelling).

What maps onto ours: name, description, personality, scenario, first message
(``first_mes``), tags and the image. A fresh player character has only a name, a
description and a portrait, and the daemon's character calls carry only those, so the
other four travel inside the description as titled sections (``fresh_description``)
that ``card_fields`` splits out again on export: import(export(x)) keeps them all.
Everything else a card holds is listed by ``unmapped`` so that the caller can say
what was left behind; nothing is dropped silently.

Plain Python and Pillow: no CLI, no store. Errors are ``CardError`` (a
``CharacterError``), whose message starts with the field it is about and names the file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import re
import struct
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from PIL import Image, ImageDraw
from PIL.PngImagePlugin import PngInfo

from narratoria.runtime.characters.store import (DESCRIPTION_MAX, DESCRIPTION_MIN,
                                                 PORTRAIT_MAX_BYTES, CharacterError)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CARD_FILE_MAX = 64 * 1024 * 1024     # a card PNG with a big lorebook is megabytes, not more
CARD_JSON_MAX = 16 * 1024 * 1024     # decompressed card JSON, from any container
CHARX_CARD = "card.json"
EMBEDDED_SCHEMES = ("embeded://", "embedded://")  # the spec's spelling, and the fixed one

# The four card fields a fresh character keeps as sections of its description, in order.
SECTIONS = {"personality": "Personality", "scenario": "Scenario",
            "first_mes": "First message", "tags": "Tags"}
_SECTION_LINE = re.compile(r"^## (" + "|".join(SECTIONS.values()) + r")[ \t]*$", re.MULTILINE)
_TITLE_FIELD = {title: key for key, title in SECTIONS.items()}
# When the whole does not fit a description, sections are left out in this order.
_DROP_ORDER = ("first_mes", "scenario", "tags", "personality")

# Old TavernAI / Pygmalion names for the V1 fields.
_V1_ALIASES = {"char_name": "name", "char_persona": "personality", "world_scenario": "scenario",
               "char_greeting": "first_mes", "example_dialogue": "mes_example"}
_TEXT_FIELDS = ("name", "description", "personality", "scenario", "first_mes")
# Fields that are about the card file itself, not the character: nothing is lost without them.
_META_FIELDS = frozenset({"spec", "spec_version", "character_book", "assets"})
_MACROS = ((re.compile(r"\{\{\s*char\s*\}\}|<bot>", re.IGNORECASE), "char"),
           (re.compile(r"\{\{\s*user\s*\}\}|<user>", re.IGNORECASE), "user"))

Target = Literal["player", "npc"]


class CardError(CharacterError):
    """A card that cannot be read: the message starts with the field and names the file."""


@dataclass(frozen=True)
class Card:
    """The parts of a character card we use, and the rest of it (``data``)."""

    file: str                        # the file's name, for messages and provenance
    spec: str                        # chara_card_v1, chara_card_v2 or chara_card_v3
    container: str                   # where the JSON was: "PNG ccv3 chunk", "CHARX card.json"...
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    first_mes: str = ""
    tags: list[str] = field(default_factory=list)
    image: bytes | None = None       # the portrait as an image file (PNG, JPEG or WebP)
    character_book: dict | None = None
    data: dict[str, Any] = field(default_factory=dict)  # the card's fields, as written
    notes: list[str] = field(default_factory=list)      # what reading itself left behind (assets)


# -- reading -------------------------------------------------------------------------------

def card_kind(path: Path) -> Literal["png", "charx", "json", "narratoria", "unknown"]:
    """What ``path`` holds, from its first bytes (and a zip's member names), not its name."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise CardError(f"import: cannot read {path}: {exc.strerror or exc}") from None
    if head.startswith(PNG_SIGNATURE):
        return "png"
    if head.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (OSError, zipfile.BadZipFile):
            return "unknown"
        if CHARX_CARD in names:
            return "charx"
        return "narratoria"  # the store's import names what is wrong with any other zip
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"{", b"[")) or path.suffix.lower() == ".json":
        return "json"
    return "unknown"


def read_card(path: Path) -> Card:
    """The card in ``path`` (PNG, JSON or CHARX); CardError naming the file and field."""
    kind = card_kind(path)
    if kind == "png":
        return _read_png(path)
    if kind == "charx":
        return _read_charx(path)
    if kind == "json":
        data = _read_bounded(path, CARD_JSON_MAX)
        return card_from_json(_json(data, path.name, "the file"), path.name, "JSON file")
    raise CardError(f"import: {path.name} is not a character card (a PNG with a chara or ccv3 "
                    f"chunk, a JSON card or a CHARX file) nor a .narratoria-character file")


def _read_bounded(path: Path, limit: int) -> bytes:
    try:
        size = path.stat().st_size
        if size > limit:
            raise CardError(f"import: {path.name} is {size} bytes, over the {limit} byte limit")
        return path.read_bytes()
    except OSError as exc:
        raise CardError(f"import: cannot read {path}: {exc.strerror or exc}") from None


def png_text_chunks(png: bytes, file: str) -> dict[str, str]:
    """The PNG's text chunks (tEXt, zTXt, iTXt), keyword (lower case) -> text; the first
    of a keyword wins. Read by hand: Pillow caps a text chunk at 1 MB, and cards with a
    lorebook are larger."""
    if not png.startswith(PNG_SIGNATURE):
        raise CardError(f"import: {file} is not a PNG")
    chunks: dict[str, str] = {}
    pos = len(PNG_SIGNATURE)
    while pos + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if len(body) < length:
            raise CardError(f"import: {file}: truncated PNG (a {kind.decode('latin-1')} chunk "
                            f"runs past the end of the file)")
        if kind in (b"tEXt", b"zTXt", b"iTXt"):
            keyword, text = _text_chunk(kind, body, file)
            chunks.setdefault(keyword.lower(), text)
        if kind == b"IEND":
            break
        pos += 12 + length
    return chunks


def _text_chunk(kind: bytes, body: bytes, file: str) -> tuple[str, str]:
    keyword, _, rest = body.partition(b"\0")
    name = keyword.decode("latin-1")
    try:
        if kind == b"tEXt":
            return name, rest.decode("latin-1")
        if kind == b"zTXt":  # one compression-method byte, then zlib
            return name, _inflate(rest[1:], name, file).decode("latin-1")
        flag, _method, rest = rest[0], rest[1], rest[2:]   # iTXt
        _language, _, rest = rest.partition(b"\0")
        _translated, _, text = rest.partition(b"\0")
        return name, (_inflate(text, name, file) if flag else text).decode("utf-8")
    except (IndexError, UnicodeDecodeError, zlib.error) as exc:
        raise CardError(f"import: {file}: unreadable {name!r} text chunk: {exc}") from None


def _inflate(data: bytes, name: str, file: str) -> bytes:
    # Bounded: a small compressed chunk can inflate to gigabytes.
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, CARD_JSON_MAX + 1)
    if len(out) > CARD_JSON_MAX:
        raise CardError(f"import: {file}: the {name!r} chunk inflates past {CARD_JSON_MAX} bytes")
    return out


def _strip_text_chunks(png: bytes) -> bytes:
    """The PNG without its text chunks: the portrait, not the card riding in it."""
    out = [PNG_SIGNATURE]
    pos = len(PNG_SIGNATURE)
    while pos + 8 <= len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        if kind not in (b"tEXt", b"zTXt", b"iTXt"):
            out.append(png[pos:pos + 12 + length])
        if kind == b"IEND":
            break
        pos += 12 + length
    return b"".join(out)


def _read_png(path: Path) -> Card:
    png = _read_bounded(path, CARD_FILE_MAX)
    chunks = png_text_chunks(png, path.name)
    chosen = "ccv3" if "ccv3" in chunks else "chara" if "chara" in chunks else None
    if chosen is None:
        raise CardError(f"import: {path.name} is a PNG without a 'chara' or 'ccv3' text chunk: "
                        f"an image, not a character card")
    where = f"the {chosen} chunk"
    doc = _json(_unbase64(chunks[chosen], path.name, where), path.name, where)
    card = card_from_json(doc, path.name, f"PNG {chosen} chunk")
    image, notes = _png_portrait(card, chunks, _strip_text_chunks(png))
    return _with(card, image=image, notes=[*card.notes, *notes])


def _png_portrait(card: Card, chunks: dict[str, str], plain: bytes) -> tuple[bytes, list[str]]:
    """A V3 card may point its icon at an asset chunk; otherwise the PNG is the portrait."""
    icon = _main_icon(card.data)
    if icon is None:
        return plain, []
    uri = str(icon.get("uri", ""))
    for scheme in EMBEDDED_SCHEMES:
        if uri.startswith(scheme):
            wanted = uri[len(scheme):]
            for key in (f"chara-ext-asset_:{wanted}", f"chara-ext-asset_{wanted}"):
                if key.lower() in chunks:
                    return _unbase64(chunks[key.lower()], card.file, key), []
            return plain, [f"assets: the icon {uri!r} is not in {card.file}; "
                           f"the PNG itself is the portrait"]
    if uri.startswith("data:"):
        return _data_uri(uri, card.file), []
    if uri and uri != "ccdefault:":
        return plain, [f"assets: the icon {uri!r} was not fetched (nothing is downloaded); "
                       f"the PNG itself is the portrait"]
    return plain, []


def _read_charx(path: Path) -> Card:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        raise CardError(f"import: {path.name} is not a CHARX (zip) file: {exc}") from None
    with archive:
        members = {info.filename: info for info in archive.infolist()}
        doc = _json(_member(archive, members[CHARX_CARD], CARD_JSON_MAX, path.name),
                    path.name, CHARX_CARD)
        card = card_from_json(doc, path.name, f"CHARX {CHARX_CARD}")
        icon = _main_icon(card.data)
        image, notes = None, []
        if icon is not None:
            uri = str(icon.get("uri", ""))
            inside = next((uri[len(s):] for s in EMBEDDED_SCHEMES if uri.startswith(s)), None)
            if inside is not None:
                if inside not in members:
                    raise CardError(f"portrait: {path.name}: the icon asset {uri!r} is not in "
                                    f"the archive")
                image = _member(archive, members[inside], PORTRAIT_MAX_BYTES, path.name, "portrait")
            elif uri.startswith("data:"):
                image = _data_uri(uri, path.name)
            else:
                notes.append(f"assets: the icon {uri!r} was not fetched (nothing is downloaded)")
    return _with(card, image=image, notes=[*card.notes, *notes])


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, file: str,
            field_name: str = "import") -> bytes:
    # The header's size can lie (a zip bomb): read at most one byte past the limit.
    with archive.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise CardError(f"{field_name}: {file}: {info.filename} is over the {limit} byte limit")
    return data


def _main_icon(data: dict[str, Any]) -> dict[str, Any] | None:
    """The V3 asset that is the portrait: the icon called ``main``, else the first icon."""
    assets = data.get("assets")
    if not isinstance(assets, list):
        return None
    icons = [a for a in assets if isinstance(a, dict) and a.get("type") == "icon"]
    return next((a for a in icons if a.get("name") == "main"), icons[0] if icons else None)


def _data_uri(uri: str, file: str) -> bytes:
    head, _, payload = uri.partition(",")
    if not head.endswith(";base64"):
        raise CardError(f"portrait: {file}: the icon's data: URI is not base64")
    return _unbase64(payload, file, "the icon's data: URI")


def _unbase64(text: str, file: str, where: str) -> bytes:
    compact = "".join(text.split())
    try:
        return base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise CardError(f"import: {file}: {where} is not valid base64: {exc}") from None


def _json(data: bytes, file: str, where: str) -> Any:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise CardError(f"import: {file}: {where} is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise CardError(f"import: {file}: {where} is not valid JSON: {exc.msg} at line "
                        f"{exc.lineno} column {exc.colno}") from None


def card_from_json(doc: Any, file: str, container: str) -> Card:
    """A parsed card document (V1 flat, or V2/V3 ``{"spec", "data"}``) as a Card."""
    if not isinstance(doc, dict):
        raise CardError(f"import: {file}: a character card is a JSON object, got "
                        f"{type(doc).__name__}")
    if "data" in doc or "spec" in doc:
        data = doc.get("data")
        if not isinstance(data, dict):
            raise CardError(f"data: {file}: a {doc.get('spec') or 'V2/V3'} card needs a 'data' "
                            f"object, got {type(data).__name__}")
        spec = str(doc.get("spec") or "chara_card_v2")
        prefix = "data."
    else:
        # V1: the fields at the top level, maybe under their TavernAI names.
        data = {_V1_ALIASES.get(k, k): v for k, v in doc.items()}
        spec, prefix = "chara_card_v1", ""
    texts = {key: _text(data, key, file, prefix) for key in _TEXT_FIELDS}
    if not texts["name"]:
        raise CardError(f"name: {file}: the card has no name ({prefix}name is missing or empty)")
    book = data.get("character_book")
    if book is not None and not isinstance(book, dict):
        raise CardError(f"character_book: {file}: must be an object, got {type(book).__name__}")
    return Card(file=file, spec=spec, container=container, tags=_tags(data, file, prefix),
                character_book=book or None, data=data, **texts)


def _text(data: dict[str, Any], key: str, file: str, prefix: str) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CardError(f"{key}: {file}: {prefix}{key} must be text, got {type(value).__name__}")
    return value.strip()


def _tags(data: dict[str, Any], file: str, prefix: str) -> list[str]:
    value = data.get("tags")
    if value is None:
        return []
    if isinstance(value, str):  # some exporters write one comma-separated string
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(t, (str, int, float)) for t in value):
        raise CardError(f"tags: {file}: {prefix}tags must be a list of words")
    return list(dict.fromkeys(str(t).strip() for t in value if str(t).strip()))


def _with(card: Card, **changes: Any) -> Card:
    return replace(card, **changes)


# -- what a card holds that we do not keep -----------------------------------------------

def unmapped(card: Card, target: Target) -> list[str]:
    """One line per card field that has no equivalent in a ``target`` character, with
    what it held; empty fields are not listed (nothing is lost with them)."""
    kept = {"name", "description", "personality", "scenario", "tags"}
    if target == "player":
        kept.add("first_mes")
    where = "an NPC file" if target == "npc" else "a player character"
    lines = []
    for key, value in card.data.items():
        if key in kept or key in _META_FIELDS or value in (None, "", [], {}):
            continue
        if key == "extensions" and isinstance(value, dict):
            lines.append(f"extensions: not imported (no equivalent in {where}): "
                         + ", ".join(sorted(str(k) for k in value)))
            continue
        lines.append(f"{key}: not imported (no equivalent in {where}): {_describe(value)}")
    lines.extend(_asset_lines(card))
    return [*lines, *card.notes]


def _asset_lines(card: Card) -> list[str]:
    assets = card.data.get("assets")
    if not isinstance(assets, list):
        return []
    icon = _main_icon(card.data)
    others = [a for a in assets if a is not icon]
    if not others:
        return []
    kinds = ", ".join(sorted({str(a.get("type", "?")) if isinstance(a, dict) else "?"
                              for a in others}))
    return [f"assets: {len(others)} besides the portrait not imported ({kinds})"]


def _describe(value: Any) -> str:
    if isinstance(value, str):
        flat = " ".join(value.split())
        return repr(flat if len(flat) <= 60 else flat[:59] + "…") + f" ({len(value)} character{'' if len(value) == 1 else 's'})"
    if isinstance(value, list):
        return f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}"
    if isinstance(value, dict):
        return f"an object with {len(value)} field{'' if len(value) == 1 else 's'}"
    return repr(value)


# -- a player character's description ---------------------------------------------------

def fresh_description(card: Card) -> tuple[str, list[str]]:
    """The description of the fresh character made from ``card`` and the lines saying
    which sections did not fit (left out, first message first). CardError when the
    card's own description is over the limit, or the whole too short to be one."""
    sections = {key: getattr(card, key) for key in SECTIONS}
    sections["tags"] = ", ".join(card.tags)
    left_out: list[str] = []
    text = compose_description(card.description, sections)
    for key in _DROP_ORDER:
        if len(text) <= DESCRIPTION_MAX:
            break
        if sections[key]:
            left_out.append(f"{key}: not imported: a player character's description holds at "
                            f"most {DESCRIPTION_MAX} characters ({len(sections[key])} would not fit)")
            sections[key] = ""
            text = compose_description(card.description, sections)
    if len(text) > DESCRIPTION_MAX:
        raise CardError(f"description: {card.file}: {len(card.description)} characters; a player "
                        f"character's description is at most {DESCRIPTION_MAX}")
    if len(text) < DESCRIPTION_MIN:
        raise CardError(f"description: {card.file}: the card's description, personality and "
                        f"scenario make {len(text)} characters; a player character needs at "
                        f"least {DESCRIPTION_MIN}")
    return text, left_out


def compose_description(description: str, sections: dict[str, str]) -> str:
    parts = [description.strip()] if description.strip() else []
    parts += [f"## {SECTIONS[key]}\n{sections[key].strip()}" for key in SECTIONS
              if sections.get(key, "").strip()]
    return "\n\n".join(parts)


def card_fields(description: str) -> dict[str, Any]:
    """A fresh character's description split back into card fields: the text before
    the first section is the description, each ``## Title`` line opens a section."""
    found: dict[str, list[str]] = {key: [] for key in ("description", *SECTIONS)}
    marks = list(_SECTION_LINE.finditer(description))
    found["description"].append(description[:marks[0].start()] if marks else description)
    for mark, after in zip(marks, [*marks[1:], None]):
        body = description[mark.end():after.start() if after else len(description)]
        found[_TITLE_FIELD[mark.group(1)]].append(body)
    fields: dict[str, Any] = {key: "\n\n".join(p.strip() for p in parts if p.strip())
                              for key, parts in found.items()}
    fields["tags"] = [t.strip() for t in fields["tags"].split(",") if t.strip()]
    return fields


# -- writing a V2 card ---------------------------------------------------------------------

def card_v2(name: str, description: str) -> dict[str, Any]:
    """The V2 document of a fresh character (V1 fields mirrored at the top, as
    SillyTavern writes them, for readers that only know V1)."""
    fields = card_fields(description)
    data = {"name": name, "description": fields["description"],
            "personality": fields["personality"], "scenario": fields["scenario"],
            "first_mes": fields["first_mes"], "mes_example": "",
            "creator_notes": "", "system_prompt": "",
            "post_history_instructions": "", "alternate_greetings": [],
            "tags": fields["tags"], "creator": "", "character_version": "", "extensions": {}}
    legacy = {k: data[k] for k in ("name", "description", "personality", "scenario",
                                   "first_mes", "mes_example", "tags")}
    return {**legacy, "spec": "chara_card_v2", "spec_version": "2.0", "data": data}


def card_png(card: dict[str, Any], portrait_png: bytes | None) -> bytes:
    """A PNG card: the portrait (or a plain generated image) with a ``chara`` tEXt
    chunk holding the card's JSON in base64, which is what SillyTavern reads."""
    image_bytes = portrait_png if portrait_png else placeholder_png(str(card["data"]["name"]))
    with Image.open(io.BytesIO(image_bytes)) as image:
        image.load()
        info = PngInfo()
        encoded = base64.b64encode(json.dumps(card, ensure_ascii=False).encode("utf-8"))
        info.add_text("chara", encoded.decode("ascii"))
        out = io.BytesIO()
        image.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def placeholder_png(name: str, size: tuple[int, int] = (400, 600)) -> bytes:
    """A plain portrait for a character without one: a colour from the name, and the
    initial. Deterministic, so exporting twice gives the same file."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    background = tuple(60 + b % 120 for b in digest[:3])
    image = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(image)
    initial = (name.strip()[:1] or "?").upper()
    draw.text((size[0] // 2, size[1] // 2), initial, fill=(240, 240, 240), anchor="mm",
              font_size=size[0] // 3)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


# -- an NPC file ---------------------------------------------------------------------------

def entity_slug(name: str) -> str:
    """A name as an entity id: ascii lower case and ``_``; a name with no latin letters
    gets one from its digest, so two such names do not collide."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "_", ascii_name.lower()).strip("_")[:60].strip("_")
    return slug or "npc_" + hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]


def npc_markdown(card: Card, entity_id: str, portrait_asset: str | None) -> str:
    """The campaign NPC file: front matter as the campaign's other NPC files carry it,
    the body the card's description, personality and scenario. ``{{char}}`` and
    ``{{user}}`` become the name and "the player": the narrator reads these as canon,
    not as a chat template."""
    front: dict[str, Any] = {"entity_type": "npc", "entity_id": entity_id, "name": card.name,
                             "content_type": "personality", "priority": 3}
    if portrait_asset:
        front["portrait_asset"] = portrait_asset
    if card.tags:
        front["tags"] = card.tags
    parts = [_unmacro(card.description, card.name)]
    if card.personality:
        parts.append("Personality: " + _unmacro(card.personality, card.name))
    if card.scenario:
        parts.append("Scenario: " + _unmacro(card.scenario, card.name))
    body = "\n\n".join(p for p in parts if p.strip())
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{head}---\n\n{body}\n"


def _unmacro(text: str, name: str) -> str:
    for pattern, who in _MACROS:
        text = pattern.sub(name if who == "char" else "the player", text)
    return text.strip()


def lore_target(relative: str) -> PurePosixPath:
    """A lore file's path under a ``--lore-dir`` folder: ``lore/x.md`` is ``x.md`` there
    (the folder *is* the lore folder), ``.disabled/lore/x.md`` is ``.disabled/x.md``."""
    return PurePosixPath(*[p for p in PurePosixPath(relative).parts if p != "lore"])
