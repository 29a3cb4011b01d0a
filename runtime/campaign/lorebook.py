"""Lorebooks from other story tools as campaign lore files (docs/campaigns.md, "Importing lorebooks").

Three formats are read: a SillyTavern World Info JSON, a NovelAI ``.lorebook``
and a character card's ``character_book`` (Character Card V2/V3, as a card or a
bare book). Each entry becomes one markdown lore file: its keys are the file's
``tags`` (the keywords our lore files carry), its text the body, and a
``provenance`` mapping names the source file, format, entry index and uid, so an
author can always find where a file came from.

Fields with no equivalent here (insertion order, position, depth, selective
logic, probability, NovelAI's contextConfig, extensions...) are not written into
the files, where they would ride in the binding frontmatter chunk as noise, but
every one is reported per entry (``Converted.unmapped``): nothing is dropped
silently. A ``constant`` (always-on) entry becomes priority 5, our highest.

A disabled entry is kept, not lost, but must not reach play: it is written under
``.disabled/lore/`` with ``enabled: false``. Hidden folders are never ingested
or packed (discovery.py), so the author re-enables one by moving it to ``lore/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from narratoria.runtime.bounded import shown

LORE_DIR = "lore"
DISABLED_DIR = ".disabled/lore"
CONSTANT_PRIORITY = 5
FORMATS = {"sillytavern": "SillyTavern World Info", "novelai": "NovelAI lorebook",
           "character_book": "character card book"}
_MACRO = re.compile(r"\{\{\s*(char|user)\s*\}\}", re.IGNORECASE)
_EMPTY = (None, "", [], {})


class LorebookError(ValueError):
    """Input that cannot be imported: the source file, where in it (``entries[2].content``)
    and what is wrong."""

    def __init__(self, source: str, where: str, message: str) -> None:
        self.source, self.where, self.message = source, where, message
        super().__init__(f"{source}: {where}: {message}")


@dataclass(frozen=True)
class Entry:
    """One lorebook entry in the fields every format shares."""

    where: str                      # its place in the source: entries["3"], entries[0]
    index: int                      # position among the book's entries, from 0
    uid: Any                        # the source's own id, as written (None if it has none)
    title: str
    keys: list[str]
    secondary_keys: list[str]
    content: str
    enabled: bool
    constant: bool
    unmapped: dict[str, Any]        # fields present in the source with no equivalent here


@dataclass
class Converted:
    """A lorebook as campaign files, and everything the conversion could not carry over."""

    format: str                     # a key of FORMATS
    title: str | None               # the book's own name, if it has one
    description: str | None = None  # the book's own description, if it has one
    files: dict[str, str] = field(default_factory=dict)       # relative path -> text
    entries: list[dict[str, Any]] = field(default_factory=list)  # per entry: file, uid, ...
    unmapped: list[dict[str, Any]] = field(default_factory=list)  # per entry with any
    report: list[str] = field(default_factory=list)           # one line per thing to know


# -- the public entry point for character cards ------------------------------------------

def book_lore_files(book: dict, *, source: str) -> tuple[dict[str, str], list[str]]:
    """A character card's ``character_book`` as lore files: ({"lore/<slug>.md": text},
    [report lines: unmapped fields, disabled entries, macros]). ``source`` names the
    file the book came from (provenance). LorebookError on an entry it cannot read."""
    converted = convert(book, "character_book", source=source)
    return converted.files, converted.report


# -- reading -------------------------------------------------------------------------------

def detect(data: Any, source: str) -> tuple[str, dict]:
    """(format, the book) of parsed JSON: a card yields its ``character_book``."""
    if not isinstance(data, dict):
        raise LorebookError(source, "-", f"expected a JSON object, got {type(data).__name__}")
    if "lorebookVersion" in data:
        return "novelai", data
    spec = data.get("spec")
    if isinstance(spec, str) and spec.startswith("chara_card") or isinstance(data.get("data"), dict):
        card = data.get("data")
        if not isinstance(card, dict):
            raise LorebookError(source, "data", "a character card needs a 'data' object")
        book = card.get("character_book")
        if not isinstance(book, dict):
            raise LorebookError(source, "data.character_book",
                                "this character card has no character_book (no lore to import)")
        book = dict(book)
        if not book.get("name") and isinstance(card.get("name"), str):
            book["name"] = card["name"]
        return "character_book", book
    entries = data.get("entries")
    if entries is None:
        raise LorebookError(source, "entries", "unknown format: no 'entries' (expected SillyTavern "
                                               "World Info, a NovelAI .lorebook or a character card)")
    first = next(iter(entries.values() if isinstance(entries, dict) else entries or []), None)
    if isinstance(first, dict):
        if "text" in first and "content" not in first:
            return "novelai", data
        if "key" in first or "uid" in first or "disable" in first:
            return "sillytavern", data
        if "keys" in first:
            return "character_book", data
    if isinstance(entries, dict):
        return "sillytavern", data
    raise LorebookError(source, "entries[0]", "unknown format: the entries are neither SillyTavern "
                                              "('key'), NovelAI ('text') nor character book ('keys')")


def read_lorebook(path: Path) -> tuple[str, dict]:
    """(format, book) of a lorebook file; LorebookError naming the file otherwise."""
    source = path.name
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LorebookError(source, "-", f"cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LorebookError(source, f"line {exc.lineno}, column {exc.colno}",
                            f"not JSON: {exc.msg}") from None
    return detect(data, source)


# -- converting ----------------------------------------------------------------------------

# Per format: source field -> our field. Whatever else an entry holds is reported.
_MAPPED = {
    "sillytavern": {"uid": "uid", "key": "keys", "keysecondary": "secondary_keys",
                    "comment": "title", "content": "content", "disable": "disabled",
                    "constant": "constant"},
    "novelai": {"id": "uid", "displayName": "title", "keys": "keys", "text": "content",
                "enabled": "enabled", "forceActivation": "constant"},
    "character_book": {"id": "uid", "name": "title", "comment": "title", "keys": "keys",
                       "secondary_keys": "secondary_keys", "content": "content",
                       "enabled": "enabled", "constant": "constant"},
}
# Book-level fields that are the book's own (entries, name) rather than settings lost.
_BOOK_MAPPED = {"entries", "name", "description", "originalData"}


def convert(book: dict, fmt: str, *, source: str) -> Converted:
    """The book's entries as lore files (enabled under lore/, disabled under .disabled/lore/)."""
    if fmt not in FORMATS:
        raise LorebookError(source, "-", f"unknown format {shown(fmt)}")
    if not isinstance(book, dict):
        raise LorebookError(source, "-",
                            f"a lorebook must be a JSON object, got {type(book).__name__}")
    name = book.get("name") if isinstance(book.get("name"), str) and book["name"].strip() else None
    about = book.get("description")
    out = Converted(fmt, name.strip() if name else None,
                    about.strip() if isinstance(about, str) and about.strip() else None)
    entries = [_entry(raw, where, i, fmt, source)
               for i, (where, raw) in enumerate(_raw_entries(book, source))]
    if not entries:
        raise LorebookError(source, "entries", "the lorebook has no entries")
    taken: set[str] = set()
    for e in entries:
        slug = _unique(_slug(e.title) or _slug(e.keys[0] if e.keys else "")
                       or f"entry_{e.index}", taken)
        path = f"{LORE_DIR if e.enabled else DISABLED_DIR}/{slug}.md"
        out.files[path] = _lore_text(e, slug, fmt, source)
        label = f"entry {e.index}" + ("" if e.uid is None else f" (uid {e.uid})") + f" -> {path}"
        out.entries.append({"index": e.index, "uid": e.uid, "where": e.where, "title": e.title,
                            "file": path, "enabled": e.enabled})
        if not e.enabled:
            out.report.append(f"{label}: disabled in the source; kept out of play under "
                              f"{DISABLED_DIR}/ (move it to {LORE_DIR}/ to enable it)")
        if e.unmapped:
            out.unmapped.append({"index": e.index, "uid": e.uid, "where": e.where, "file": path,
                                 "fields": e.unmapped})
            fields = ", ".join(f"{k}={_short(v)}" for k, v in e.unmapped.items())
            out.report.append(f"{label}: unmapped {fields}")
        if e.secondary_keys:
            out.report.append(f"{label}: secondary keys kept as 'secondary_keys' (no AND/NOT "
                              "matching here)")
        if _MACRO.search(e.content):
            out.report.append(f"{label}: {{{{char}}}}/{{{{user}}}} macros kept verbatim")
    book_rest = {k: v for k, v in book.items() if k not in _BOOK_MAPPED and v not in _EMPTY}
    if book_rest:
        out.unmapped.append({"index": None, "uid": None, "where": "(book)", "file": None,
                             "fields": book_rest})
        out.report.append("book: unmapped "
                          + ", ".join(f"{k}={_short(v)}" for k, v in book_rest.items()))
    return out


def _raw_entries(book: dict, source: str) -> list[tuple[str, Any]]:
    entries = book.get("entries")
    if isinstance(entries, dict):  # SillyTavern: {"0": {...}, "1": {...}}
        return [(f"entries[{json.dumps(str(k))}]", v) for k, v in entries.items()]
    if isinstance(entries, list):
        return [(f"entries[{i}]", v) for i, v in enumerate(entries)]
    raise LorebookError(source, "entries",
                        f"must be a list or an object of entries, got {shown(entries)}")


def _entry(raw: Any, where: str, index: int, fmt: str, source: str) -> Entry:
    if not isinstance(raw, dict):
        raise LorebookError(source, where, f"an entry must be a JSON object, got {shown(raw)}")
    mapped = _MAPPED[fmt]
    content = raw.get(_mapped_key(mapped, "content"))
    if not isinstance(content, str) or not content.strip():
        raise LorebookError(source, f"{where}.{_mapped_key(mapped, 'content')}",
                            f"the entry has no content (got {shown(content)})")
    keys = _keys(raw, _mapped_key(mapped, "keys"), where, source)
    secondary = [] if fmt == "novelai" else _keys(
        raw, "keysecondary" if fmt == "sillytavern" else "secondary_keys", where, source)
    if fmt == "sillytavern":
        enabled = not bool(raw.get("disable", False))
    else:
        enabled = raw.get("enabled", True) is not False
    constant = bool(raw.get("forceActivation" if fmt == "novelai" else "constant", False))
    title = next((raw[k].strip() for k in ("name", "comment", "displayName")
                  if k in mapped and isinstance(raw.get(k), str) and raw[k].strip()), "")
    uid = raw.get("id" if fmt != "sillytavern" else "uid")
    unmapped = {k: v for k, v in raw.items() if k not in mapped and v not in _EMPTY}
    if fmt == "character_book" and title and raw.get("comment") not in _EMPTY \
            and str(raw["comment"]).strip() != title:
        unmapped["comment"] = raw["comment"]  # a card entry with both: the name is the title
    return Entry(where, index, uid, title or (keys[0] if keys else f"Entry {index}"), keys,
                 secondary, content.strip(), enabled, constant, unmapped)


def _mapped_key(mapped: dict[str, str], ours: str) -> str:
    """The source field that holds ``ours`` (the first one, for title)."""
    return next(k for k, v in mapped.items() if v == ours)


def _keys(raw: dict, key: str, where: str, source: str) -> list[str]:
    value = raw.get(key, [])
    if isinstance(value, str):  # some exporters write one comma-separated string
        value = value.split(",")
    if not isinstance(value, list):
        raise LorebookError(source, f"{where}.{key}",
                            f"must be a list of keywords, got {shown(value)}")
    return list(dict.fromkeys(str(k).strip() for k in value
                              if isinstance(k, (str, int, float)) and str(k).strip()))


def _lore_text(e: Entry, slug: str, fmt: str, source: str) -> str:
    fm: dict[str, Any] = {"entity_type": "lore", "entity_id": slug, "title": e.title}
    if e.keys:
        fm["tags"] = e.keys
    if e.secondary_keys:
        fm["secondary_keys"] = e.secondary_keys
    if e.constant:
        fm["priority"] = CONSTANT_PRIORITY
    if not e.enabled:
        fm["enabled"] = False
    fm["provenance"] = {"source_file": source, "format": fmt, "entry": e.index,
                        **({"uid": e.uid} if e.uid is not None else {})}
    head = yaml.safe_dump(fm, sort_keys=False, allow_unicode=True, width=100,
                          default_flow_style=None)
    return f"---\n{head}---\n\n{e.content}\n"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:60].strip("_")


def _unique(slug: str, taken: set[str]) -> str:
    name, n = slug, 2
    while name in taken:
        name, n = f"{slug}_{n}", n + 1
    taken.add(name)
    return name


def _short(value: Any, limit: int = 60) -> str:
    """A value as JSON for a report line, cut: an extensions object can be long."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


# -- writing a campaign folder ---------------------------------------------------------------

@dataclass
class Imported:
    output: Path
    campaign_id: str
    title: str
    converted: Converted
    source: str


class OutputExists(LorebookError):
    """The output folder holds files and ``force`` was not given."""


def import_lorebook(path: Path, output: Path, *, force: bool = False) -> Imported:
    """The lorebook file ``path`` as a new campaign folder ``output``.

    Written into a hidden temporary folder beside ``output``, validated there, and only
    then renamed into place: a failure (bad entry, invalid result, full disk) leaves
    no half-written campaign, and ``--force`` replaces the old folder only at the end.
    """
    from narratoria.runtime.campaign.manifest import slug
    from narratoria.runtime.campaign.validate import validate

    # Resolved: "-o ." must stage beside the folder, not inside it.
    output = Path(output).resolve()
    if output.exists() and not output.is_dir():
        raise OutputExists(str(output), "-", "exists and is not a folder")
    if output.is_dir() and any(output.iterdir()) and not force:
        raise OutputExists(str(output), "-", "is not empty: pass --force to replace it")
    fmt, book = read_lorebook(path)
    converted = convert(book, fmt, source=path.name)
    campaign_id = slug(output.resolve().name)
    title = converted.title or path.stem
    files = {"campaign.yml": _manifest(campaign_id, title, fmt, path.name, converted), **converted.files}
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.import-", dir=output.parent))
    try:
        for relative, text in files.items():
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, "utf-8")
        report = validate(staging)
        if not report.ok:
            first = report.errors[0]
            raise LorebookError(path.name, first.file, f"the converted campaign does not validate: "
                                                       f"{first}")
        _swap(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return Imported(output, campaign_id, title, converted, path.name)


def _manifest(campaign_id: str, title: str, fmt: str, source: str, converted: Converted) -> str:
    enabled = sum(e["enabled"] for e in converted.entries)
    description = (f"Imported from {source} ({FORMATS[fmt]}) by `narratoria campaigns import`: "
                   f"{enabled} lore entr{'y' if enabled == 1 else 'ies'}")
    disabled = len(converted.entries) - enabled
    if disabled:
        description += (f", and {disabled} disabled entr{'y' if disabled == 1 else 'ies'} "
                        f"kept out of play under {DISABLED_DIR}/")
    if converted.description:  # the book's own words first, where it came from after
        description = f"{converted.description} {description}"
    manifest = {"id": campaign_id, "title": title, "version": "1.0.0", "description": description + ".",
                "imported_from": {"file": source, "format": fmt}}
    return yaml.safe_dump(manifest, sort_keys=False, allow_unicode=True, width=100)


def _swap(staging: Path, output: Path) -> None:
    """Put ``staging`` at ``output``; an old ``output`` is moved aside first and removed last."""
    old = None
    if output.exists():
        old = output.with_name(f".{output.name}.old-{os.getpid()}")
        os.replace(output, old)
    try:
        os.replace(staging, output)
    except BaseException:
        if old is not None:
            os.replace(old, output)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
