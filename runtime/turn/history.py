"""What the narrator is told of a session's past: bounded, however long the session.

A turn's history is the last few scenes as they were (``storyline.RECENT_SCENES``),
the newest rolling summary of each level (``sessions/summaries.py``) and the memories
the player's input recalls (the store's semantic search over the playthrough's scene
and summary memories). It never holds more than ``HISTORY_TOKENS`` tokens (tiktoken
``cl100k_base``, as ``planner/context.py`` counts them), so turn 1,000 costs the
narrator what turn 10 did, while a fact of turn 3 stays one recall away: its scene
memory, and the summaries that kept it, are searched like any other memory.

What fits goes in by priority: the last scene (the story goes on from it), the best
``TOP_RECALLED`` recalled memories (what the player is asking about), the summaries
from the nearest past to the oldest, the next ``CLOSE_SCENES`` recent scenes newest
first, the rest of the recalled memories, then the older recent scenes. A part that
does not fit whole gives its first sentences to the room left, so the history fills
its budget as soon as the session has that much past (by turn 10), and turn N's costs
what turn 10's did. A recalled memory that is already there as a recent scene or a
summary is not told twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from narratoria.runtime.planner.context import count_tokens
from narratoria.runtime.sentences import sentences

HISTORY_TOKENS = 600
TOP_RECALLED = 2
CLOSE_SCENES = 2     # recent scenes before the last that come before the rest of recall
MIN_PART_TOKENS = 12  # a cut part shorter than this says nothing worth its room


@dataclass(frozen=True)
class History:
    """The parts kept, each in the order the narrator reads them."""

    recalled: tuple[str, ...]    # best first
    summaries: tuple[str, ...]   # oldest past first
    recent: tuple[str, ...]      # oldest first; the last scene last
    # (a part may be cut to its first sentences: the parts are as told, not as given)
    tokens: int
    budget: int

    @property
    def parts(self) -> tuple[str, ...]:
        """Most relevant first: the narrator's prompt clips what it is given."""
        return (*self.recalled, *self.summaries, *self.recent)


def bounded_history(recent: Sequence[str], summaries: Sequence[str], recalled: Sequence[str],
                    budget: int = HISTORY_TOKENS) -> History:
    """The history of a turn: ``recent`` scenes (oldest first), ``summaries`` (the
    newest of each level, highest level first) and ``recalled`` memories (best
    first), kept by priority within ``budget`` tokens."""
    recent = _distinct(recent, ())
    summaries = _distinct(summaries, recent)
    recalled = _distinct(recalled, (*recent, *summaries))
    older = list(reversed(recent[:-1]))
    order = [*recent[-1:], *recalled[:TOP_RECALLED], *reversed(summaries),
             *older[:CLOSE_SCENES], *recalled[TOP_RECALLED:], *older[CLOSE_SCENES:]]
    told: dict[str, str] = {}
    used = 0
    for part in order:
        fitted = _fit(part, budget - used)
        if fitted:
            told[part] = fitted
            used += count_tokens(fitted)
    return History(recalled=tuple(told[p] for p in recalled if p in told),
                   summaries=tuple(told[p] for p in summaries if p in told),
                   recent=tuple(told[p] for p in recent if p in told), tokens=used, budget=budget)


def _fit(part: str, room: int) -> str:
    """``part`` if it fits ``room`` tokens, else its first sentences that do (at least
    ``MIN_PART_TOKENS`` of them), else ""."""
    if count_tokens(part) <= room:
        return part
    if room < MIN_PART_TOKENS:
        return ""
    kept = ""
    for sentence in sentences(part):
        longer = f"{kept} {sentence}" if kept else sentence
        if count_tokens(longer) > room:
            break
        kept = longer
    return kept if count_tokens(kept) >= MIN_PART_TOKENS else ""


def _distinct(parts: Sequence[str], already: Sequence[str]) -> list[str]:
    """``parts`` stripped, without empty ones, repeats or any of ``already``."""
    seen = {" ".join(p.split()) for p in already}
    found = []
    for part in parts:
        key = " ".join(part.split())
        if key and key not in seen:
            seen.add(key)
            found.append(part.strip())
    return found
