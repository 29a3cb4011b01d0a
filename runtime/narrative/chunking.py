"""Splitting a document into corpus chunks, by the configured granularity.

The engine stores whatever chunks it is given; ``load_document`` uses these
splitters (the spec's open question "Chunk extraction": yes, optional utilities).
Every splitter drops empty chunks, strips surrounding whitespace, and never
loses text other than the separators themselves.

- ``sentence``: sentences within each paragraph (a sentence never spans a blank
  line; its line breaks become spaces). A sentence ends at ``.``, ``!``, ``?`` or ``…`` (with any closing quotes
  or brackets) followed by whitespace; common abbreviations ("Dr.", "Mr.",
  "e.g.") do not end one.
- ``paragraph``: blocks separated by one or more blank lines.
- ``page``: the pages of a text that has form feeds (``\\f``, as pdftotext and
  many exporters write between pages). A text without form feeds is packed into
  pages of whole paragraphs of at most ``PAGE_CHARS`` characters (about one
  printed page); a longer paragraph is a page on its own.
- ``beat``: story beats, the prose between scene breaks. A scene break is a line
  of three or more of ``* - _ = ~ #`` (spaces allowed: ``* * *``, ``---``,
  ``###``) or a lone ``#``; a Markdown heading also starts a new beat and stays
  at its top (its text names the beat's section). A text with neither is split
  into paragraphs, each one beat.
- ``manual``: the author decides. Chunks are separated by lines reading exactly
  ``<!-- chunk -->`` (invisible when Markdown is rendered); a text without that
  marker is one chunk.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from narratoria.runtime.narrative.models import GRANULARITIES, InvalidArgumentError

PAGE_CHARS = 3000
MANUAL_MARKER = "<!-- chunk -->"

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
# A sentence ends at terminal punctuation, optionally closed by quotes or brackets,
# followed by whitespace. Two fixed-width lookbehinds because Python's must be fixed.
_SENTENCE_END = re.compile(
    r"(?:(?<=[.!?\u2026])|(?<=[.!?\u2026][\"'\u201d\u2019)\]]))\s+")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf no fig approx dept gen col capt lt sgt".split())
_SCENE_BREAK = re.compile(r"^[ \t]*(?:(?:[*\-_=~#][ \t]*){3,}|#)[ \t]*$")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(\S.*?)[ \t#]*$")
_MANUAL = re.compile(r"^[ \t]*<!--[ \t]*chunk[ \t]*-->[ \t]*$", re.IGNORECASE)


@dataclass(frozen=True)
class Chunk:
    text: str
    section: str  # where in the document: "paragraph 3", "page 2", a beat's heading


def chunk_text(text: str, granularity: str) -> list[Chunk]:
    """Split ``text`` by ``granularity`` (one of ``GRANULARITIES``)."""
    splitter = _SPLITTERS.get(granularity)
    if splitter is None:
        raise InvalidArgumentError(
            f"unknown chunk granularity {granularity!r} (expected one of {', '.join(GRANULARITIES)})")
    return splitter(text.replace("\r\n", "\n").replace("\r", "\n"))


def split_paragraphs(text: str) -> list[str]:
    return [p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def split_sentences(paragraph: str) -> list[str]:
    """Sentences of one paragraph, each on one line (line breaks inside become spaces)."""
    pieces = [" ".join(p.split()) for p in _SENTENCE_END.split(paragraph.strip()) if p.strip()]
    sentences: list[str] = []
    for piece in pieces:
        if sentences and _ends_with_abbreviation(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"
        else:
            sentences.append(piece)
    return sentences


def _ends_with_abbreviation(sentence: str) -> bool:
    last = sentence.rsplit(None, 1)[-1].lower().lstrip("\"'(\u201c\u2018[")
    return last.endswith(".") and last[:-1] in _ABBREVIATIONS


def _sentences(text: str) -> list[Chunk]:
    found = [s for p in split_paragraphs(text) for s in split_sentences(p)]
    return [Chunk(s, f"sentence {i}") for i, s in enumerate(found, 1)]


def _paragraphs(text: str) -> list[Chunk]:
    return [Chunk(p, f"paragraph {i}") for i, p in enumerate(split_paragraphs(text), 1)]


def _pages(text: str) -> list[Chunk]:
    if "\f" in text:
        pages = [p.strip() for p in text.split("\f")]
        # Number pages as the document does, even where one is blank.
        return [Chunk(p, f"page {i}") for i, p in enumerate(pages, 1) if p]
    packed: list[str] = []
    for paragraph in split_paragraphs(text):
        if packed and len(packed[-1]) + 2 + len(paragraph) <= PAGE_CHARS:
            packed[-1] = f"{packed[-1]}\n\n{paragraph}"
        else:
            packed.append(paragraph)
    return [Chunk(p, f"page {i}") for i, p in enumerate(packed, 1)]


def _beats(text: str) -> list[Chunk]:
    lines = text.split("\n")
    if not any(_SCENE_BREAK.match(line) or _HEADING.match(line) for line in lines):
        return [Chunk(p, f"beat {i}") for i, p in enumerate(split_paragraphs(text), 1)]
    blocks: list[list[str]] = [[]]
    for line in lines:
        if _SCENE_BREAK.match(line):
            blocks.append([])
        elif _HEADING.match(line):
            blocks.append([line])
        else:
            blocks[-1].append(line)
    chunks: list[Chunk] = []
    for block in blocks:
        body = "\n".join(block).strip()
        if not body:
            continue
        heading = _HEADING.match(block[0]) if block else None
        chunks.append(Chunk(body, heading.group(1) if heading else f"beat {len(chunks) + 1}"))
    return chunks


def _manual(text: str) -> list[Chunk]:
    blocks: list[list[str]] = [[]]
    for line in text.split("\n"):
        if _MANUAL.match(line):
            blocks.append([])
        else:
            blocks[-1].append(line)
    bodies = [b for b in ("\n".join(block).strip() for block in blocks) if b]
    return [Chunk(b, f"chunk {i}") for i, b in enumerate(bodies, 1)]


_SPLITTERS = {
    "sentence": _sentences,
    "paragraph": _paragraphs,
    "page": _pages,
    "beat": _beats,
    "manual": _manual,
}
