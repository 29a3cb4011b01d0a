"""The engine's answer to a standing question: "where do I stand with the Lampwrights?",
"what does Wick think of me?".

The query skills read the stored standing (reputation's bands, npc-perception's
attitudes) and put it in their state patch; left to the model, the answer was lost (the
135M model narrated the question as small talk and never said where the player stood).
So, as with a check's outcome, the engine tells it: one sentence per faction or person
the turn asked about, the narration's first (docs/scene.md, "The engine decides"), and
the model continues from there.

Invariants: only a turn that asks where the player stands is answered (a query the
planner added for another reason says nothing); only successful query calls are read;
no score reaches the text, only its band (and, inside a person's neutral band, which way
they lean), as a person in the story would show it; at most :data:`MAX_ANSWERS` sentences.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from narratoria.runtime.planner.deeds import asks_standing

QUERIES = frozenset({"reputation/query-reputation", "npc-perception/query-perception"})
MAX_ANSWERS = 3
# An id the campaign does not name is told only if it reads as an id: the text is a
# skill's, and what it says reaches the player and the model's prompt.
_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,47}")

# A faction's standing band (the reputation skill's), as the story says it.
_FACTION = {"hostile": "you are an enemy", "unfriendly": "you are not welcome",
            "neutral": "you are neither friend nor foe", "friendly": "you are a friend",
            "allied": "you are one of their own"}
# A person's attitude band (the npc-perception skill's).
_PERSON = {"hostile": "wants nothing to do with you", "unfriendly": "is wary of you",
           "neutral": "has no settled opinion of you", "friendly": "thinks well of you",
           "devoted": "would go a long way for you"}
# No record: nothing the player did has moved them yet. Not "does not know you": talk
# is no deed, so a person the player has spoken with, or who hired them in the
# premise, has no record either.
_STRANGER = "has formed no opinion of you yet"
# Inside the neutral band a person still leans: a gift or a theft moves the score by
# 5-20, and "has no settled opinion of you" alone read as if the deed did nothing.
# npc-perception's scale is fixed (-100..100, neutral within 30), so the sign tells.
_LEAN_FROM = 5.0
_LEANS = {1: "but leans your way", -1: "but leans against you"}
# Names that take no "the": "House Vell", "Clan Morrow".
_TITLES = ("the ", "house ", "clan ", "clann ", "order of ", "sisters of ", "brothers of ")


def standing_answer(player_input: str, tools: Iterable[Any], results: Iterable[Any],
                    names: Mapping[str, str]) -> list[str]:
    """The sentences that answer ``player_input``'s standing question from the query
    calls among ``tools`` (a plan's ToolInvocations) and their ``results``
    (ToolResults); ``names``: entity id -> the campaign's name. [] when the input asks
    nothing or no query answered."""
    if not asks_standing(player_input):
        return []
    paths = {t.toolId: t.toolPath for t in tools}
    answers: list[str] = []
    for result in results:
        if result.state != "success" or paths.get(result.toolId) not in QUERIES:
            continue
        for patch in _patches(result.events):
            answers += [_faction_sentence(name, row)
                        for name, row in _rows(patch, "reputation", names)]
            answers += [_person_sentence(name, row)
                        for name, row in _rows(patch, "perception", names)]
    return [a for a in dict.fromkeys(answers) if a][:MAX_ANSWERS]


def _patches(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e["patch"] for e in events
            if e.get("type") == "state_patch" and isinstance(e.get("patch"), Mapping)]


def _rows(patch: Mapping[str, Any], key: str,
          names: Mapping[str, str]) -> list[tuple[str, Mapping[str, Any]]]:
    """(name, row) of each entity under ``key``: the campaign's name, else the id read
    as words; an id that is no id is left out."""
    found = patch.get(key)
    if not isinstance(found, Mapping):
        return []
    return [(names.get(str(k)) or _readable(str(k)), v) for k, v in found.items()
            if isinstance(v, Mapping) and (str(k) in names or _ID.fullmatch(str(k)))]


def _faction_sentence(name: str, row: Mapping[str, Any]) -> str:
    phrase = _FACTION.get(str(row.get("standing", "")))
    if phrase is None:
        return ""
    if name.lower().startswith("the "):
        named = "the " + name[4:]
    else:
        named = name if name.lower().startswith(_TITLES) else f"the {name}"
    return f"In the eyes of {named}, {phrase}."


def _person_sentence(name: str, row: Mapping[str, Any]) -> str:
    if row.get("known") is False:
        return f"{name} {_STRANGER}."
    attitude = str(row.get("attitude", ""))
    phrase = _PERSON.get(attitude)
    if phrase is None:
        return ""
    score = row.get("score")
    if attitude == "neutral" and isinstance(score, (int, float)) and abs(score) >= _LEAN_FROM:
        phrase = f"{phrase}, {_LEANS[1 if score > 0 else -1]}"
    return f"{name} {phrase}."


def _readable(entity_id: str) -> str:
    return " ".join(w.capitalize() for w in entity_id.replace("-", "_").split("_") if w)


__all__ = ["QUERIES", "standing_answer"]
