"""Splitting prose into sentences: the one rule every part of the runtime uses.

A sentence ends at ``.``, ``!``, ``?`` or ``…`` (a run of them counts once), with any
closing quotes or brackets after it (``"'”’)]``), where whitespace follows. So a
quoted line ends with its quote (``He said "Go."`` is one sentence), and a point with
no space after it (``3.5``, a URL) never ends one. The whitespace between two
sentences belongs to neither; nothing else is lost.

The rule is deliberately plain (no abbreviation list: "Dr. Webb" is two pieces):
the runtime splits model output and author prose to filter, clip and compare
sentences, where a rare extra cut costs little. Line breaks are not ends (wrapped
prose keeps its sentences); a caller that wants them as ends splits lines first.
"""

from __future__ import annotations

import re

__all__ = ["ends_sentence", "first_sentence", "sentence_ends", "sentence_starts", "sentences"]

_CLOSERS = "\"'\u201d\u2019)\\]"  # closing quotes and brackets a sentence may end with
# The end of a sentence (group 1) and the whitespace after it (group 2).
_BOUNDARY = re.compile(rf"([.!?\u2026][{_CLOSERS}]*)(\s+)")
_FINAL = re.compile(rf"[.!?\u2026][{_CLOSERS}]*\s*$")


def sentence_ends(text: str) -> list[int]:
    """Offsets just past each sentence end that whitespace follows, in order."""
    return [m.end(1) for m in _BOUNDARY.finditer(text)]


def sentence_starts(text: str) -> list[int]:
    """Offsets where a sentence begins after a previous one's end (past the whitespace)."""
    return [m.end(2) for m in _BOUNDARY.finditer(text)]


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, empty ones dropped."""
    pieces, start = [], 0
    for m in _BOUNDARY.finditer(text):
        pieces.append(text[start:m.end(1)])
        start = m.end(2)
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]


def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (all of it when it has one end or none); "" for blank."""
    text = text.strip()
    m = _BOUNDARY.search(text)
    return text if m is None else text[:m.end(1)]


def ends_sentence(text: str) -> bool:
    """Whether ``text`` ends as a sentence does (terminal punctuation, closing quotes)."""
    return _FINAL.search(text) is not None
