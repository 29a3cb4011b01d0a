"""Rolling summaries: a long session's past, compressed into memories of its own.

A session of a thousand scenes cannot hand its narrator a thousand scene memories, and
the newest few forget the start. So every ``FAN_IN`` (10) scenes the session's
playthrough gets a *summary* memory (``action_type`` "summary") of those scenes, and
every ten level-1 summaries roll up into one level-2 summary, ten of those into one
level-3 summary (``LEVELS``): scene 10 writes the summary of scenes 1-10, scene 100
also that of scenes 1-100, scene 1000 also that of scenes 1-1000.

- **Extractive**: a summary is made of the scenes' own sentences, never a model's
  rewording (the small model copies names badly). Sentences that carry the story's
  facts win: the player's decisions (their own words, "I hide the compass ..."),
  named people and places (capitalised words inside a sentence), numbers, and words
  no other scene of the span uses (the brass compass, the third floorboard). At most
  ``SUMMARY_MAX`` characters, in story order.
- **Tags**: ``summary:<level>`` and ``covers:<first>-<last>`` (scene numbers), so a
  summary is found by its level and a branch can tell which scenes it tells.
- **Written with the turn**: the storyline stores a scene's summaries in the same
  store transaction as the turn and its scene memory (``storyline.py``): the turn,
  its memory and its summaries, or none of them.
- **Branching**: a branch at scene k replays from after scene k-1, so it keeps the
  summaries whose scenes all lie before k (``kept_by_branch``); the abandoned
  timeline's summaries stay with the parent.

Plain Python and pure: what a summary says depends only on the texts given.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from narratoria.runtime.sentences import sentences

SUMMARY_KIND = "summary"   # the summary memories' action_type
FAN_IN = 10                # scenes per level-1 summary; summaries per roll-up
LEVELS = 3
SUMMARY_MAX = 400          # characters of a summary, all levels
SENTENCE_MAX = 160         # a longer sentence is cut at a word: one scene cannot fill a summary
LEVEL_TAG = "summary:"     # "summary:2"
COVERS_TAG = "covers:"     # "covers:1-100"

_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]+")
_CAPITALISED = re.compile(r"\b[A-Z][a-z'’-]+")
_NUMBER = re.compile(r"\b\d+\b|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|"
                     r"tenth|one|two|three|four|five|six|seven|eight|nine|ten)\b", re.IGNORECASE)
_ENDED = re.compile(r"[.!?…][\"'”’)\]]*$")
_DECISION = re.compile(r"^I\b")  # the player's own words: what they chose to do
_LABEL = re.compile(r"^\s*(?:Turn|Scenes?)\s+\d+(?:-\d+)?:\s*")
# Words common to any telling: they say nothing about this span.
_STOP = frozenset("""a an the and or but if then so of to in on at by for with from into onto
    over under up down out off as is are was were be been being it its it's this that these those
    there here you your yours i me my we our he him his she her they them their what which who
    whom whose when where why how not no nor all any each some more most other such only own same
    than too very can will just now again once also back still yet around through toward towards
    about after before while until against between behind beside above below across along
    something nothing anything everything one like""".split())


@dataclass(frozen=True)
class Summary:
    """One summary memory: ``level`` 1 tells scenes ``first``-``last`` (10 of them),
    level 2 a hundred, level 3 a thousand."""

    level: int
    first: int
    last: int
    text: str

    @property
    def tags(self) -> list[str]:
        return [f"{LEVEL_TAG}{self.level}", f"{COVERS_TAG}{self.first}-{self.last}"]

    @classmethod
    def from_tags(cls, tags: Iterable[str], text: str) -> Summary | None:
        """The summary a memory's tags describe, or None when they are not a summary's."""
        level = span = None
        for tag in tags:
            if tag.startswith(LEVEL_TAG) and tag[len(LEVEL_TAG):].isdigit():
                level = int(tag[len(LEVEL_TAG):])
            elif tag.startswith(COVERS_TAG):
                first, sep, last = tag[len(COVERS_TAG):].partition("-")
                if sep and first.isdigit() and last.isdigit():
                    span = (int(first), int(last))
        if level is None or span is None:
            return None
        return cls(level, span[0], span[1], text)


@dataclass(frozen=True)
class SceneText:
    """What one scene said: the player's input and the narration."""

    scene: int
    input: str
    narration: str


def span(level: int) -> int:
    """How many scenes a summary of ``level`` tells."""
    return FAN_IN ** level


def due(scene: int) -> list[int]:
    """The levels whose summary scene ``scene`` completes, lowest first (scene 100: [1, 2])."""
    return [level for level in range(1, LEVELS + 1) if scene > 0 and scene % span(level) == 0]


def covering(level: int, scene: int) -> tuple[int, int]:
    """The scenes the level-``level`` summary completed by ``scene`` tells."""
    return scene - span(level) + 1, scene


def kept_by_branch(summary: Summary, at_scene: int) -> bool:
    """Whether a branch retrying scene ``at_scene`` keeps ``summary``: only when every
    scene it tells is one the branch keeps (scenes before ``at_scene``)."""
    return summary.last < at_scene


def summarize_scenes(scenes: Sequence[SceneText], limit: int = SUMMARY_MAX) -> str:
    """The level-1 summary of ``scenes``: the player's inputs are their decisions."""
    units = [[(s, True) for s in _sentences(t.input)]
             + [(s, False) for s in _sentences(t.narration)] for t in scenes]
    return extract(units, limit)


def roll_up(summaries: Sequence[str], limit: int = SUMMARY_MAX) -> str:
    """The summary of lower-level ``summaries`` (in story order): their sentences again,
    the player's own ("I ...") still counted as decisions."""
    units = [[(s, bool(_DECISION.match(s))) for s in _sentences(text)] for text in summaries]
    return extract(units, limit)


def extract(units: Sequence[Sequence[tuple[str, bool]]], limit: int = SUMMARY_MAX) -> str:
    """The highest-scoring sentences of ``units`` (one per scene or summary; each
    sentence with whether it is a decision) that fit ``limit`` characters, in the
    order they were told. One sentence per unit first, so that a busy scene cannot
    crowd out the rest; then the best of what is left."""
    # How many units use each word: a word of one scene alone is that scene's detail.
    spread = Counter(w for unit in units
                     for w in {_key(x) for s, _ in unit for x in _WORD.findall(s)})
    scored: list[tuple[float, int, int, str]] = []
    seen: set[str] = set()
    for u, unit in enumerate(units):
        for i, (text, decision) in enumerate(unit):
            if text.lower() in seen:  # a repeated line (a fallback narration) tells nothing new
                continue
            seen.add(text.lower())
            scored.append((_score(text, decision, spread, len(units)), u, i, text))
    best_of_unit = {u: max((s for s in scored if s[1] == u), key=lambda s: s[0])
                    for u in {s[1] for s in scored}}
    ranked = (sorted(best_of_unit.values(), key=lambda s: -s[0])
              + sorted((s for s in scored if s not in best_of_unit.values()), key=lambda s: -s[0]))
    chosen: list[tuple[float, int, int, str]] = []
    used = 0
    for item in ranked:
        cost = len(item[3]) + (1 if chosen else 0)
        if item[0] > 0 and used + cost <= limit:
            chosen.append(item)
            used += cost
    return " ".join(s[3] for s in sorted(chosen, key=lambda s: (s[1], s[2])))[:limit]


def _score(text: str, decision: bool, spread: Counter[str], units: int) -> float:
    words = [w for w in _WORD.findall(text) if _key(w) not in _STOP]
    if not words:
        return 0.0
    # Capitalised words past the sentence's first: names of people and places.
    names = len(_CAPITALISED.findall(text.split(" ", 1)[1] if " " in text else ""))
    rare = sum(1.0 / spread[_key(w)] for w in words if spread[_key(w)]) if units > 1 else 0.0
    numbers = len(_NUMBER.findall(text))
    # Decisions first: what the player chose is what the story must not forget. A
    # long sentence pays for its room.
    return (3.0 if decision else 0.0) + 1.5 * min(names, 4) + 0.5 * numbers + rare \
        - len(text) / 200.0


def _sentences(text: str) -> list[str]:
    found = []
    for sentence in sentences(" ".join(_LABEL.sub("", text or "").split())):
        if len(sentence) > SENTENCE_MAX:
            sentence = sentence[:SENTENCE_MAX].rsplit(" ", 1)[0] + "…"
        elif not _ENDED.search(sentence):
            sentence += "."  # the player's input has no end mark: joined, it would run on
        found.append(sentence)
    return found


def _key(word: str) -> str:
    return word.lower().strip("'’-")


__all__ = ["COVERS_TAG", "FAN_IN", "LEVELS", "LEVEL_TAG", "SUMMARY_KIND", "SUMMARY_MAX",
           "SceneText", "Summary", "covering", "due", "extract", "kept_by_branch", "roll_up", "span",
           "summarize_scenes"]
