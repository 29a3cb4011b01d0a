"""The player goes where the action says: "Go to the Drowned Guildhall", "I head down to
the bell chapel".

The engine decides, the model narrates (docs/scene.md): the story tells the player
arriving, so the state's location must change with it. Otherwise the next scene is still
set where the player left (its people, its exits, "Go to the Drowned Guildhall" offered
again after going there).

Invariants:

- Only a deed of going moves the player: its verb (:data:`_GOING`) opens the deed
  (:func:`~narratoria.runtime.turn.second_person.deed_phrase`: "I try to sneak into the
  Undercourt" is "sneak into the Undercourt") or a clause of it after "and" or "then",
  and the place comes after it with only words of direction between ("go back down
  to", "head over to", "enter"). Looking at a place, asking about it, or walking away
  from it moves no one.
- Only a place of the campaign (a location or world file), named by its name or an
  alias, and not the place the player is already at. The first such place is where the
  player goes ("go to the quay and then the chapel" stops at the quay).
- A failed check moves no one (the engine's outcome decides).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from narratoria.runtime.turn.second_person import deed_phrase

# Verbs of going somewhere, as a deed's phrase opens.
_GOING = re.compile(
    r"\b(?:go|goes|walk|walks|head|heads|return|returns|run|runs|hurry|hurries|travel|travels|"
    r"wander|wanders|stroll|strolls|march|marches|sail|sails|row|rows|ride|rides|climb|climbs|"
    r"descend|descends|enter|enters|visit|visits|sneak|sneaks|slip|slips|step|steps|move|"
    r"moves|proceed|proceeds|flee|flees|rush|rushes|dash|dashes|make (?:my|your|our) way|"
    r"set (?:off|out)|push on|press on|come|comes|get|gets|swim|swims|wade|wades|cross|"
    r"crosses|reach|reaches|duck|ducks|follow (?:the \w+(?: \w+)?|\w+)|lead \w+)\b",
    re.IGNORECASE)
# Where a deed of going may open: the phrase's start, or a clause after "and", "then" or
# a comma ("take the lantern and go to the chapel"), read in the few characters before.
_CLAUSE_END = re.compile(r"(?:\band|\bthen|[,;]) ?$", re.IGNORECASE)
# What may stand between the verb and the place: where to, never from where.
_TOWARD = re.compile(
    r"^(?:\s*(?:back|up|down|over|across|out|on|off|along|ahead|inside|in|straight|"
    r"quickly|slowly|carefully|quietly|cautiously|at once|now|again|all the way|the way|"
    r"onward|onwards|home|there|together|with \w+)\b)*"
    r"\s*(?:(?:to|into|toward|towards|onto|for|inside|through|in|within|as far as|"
    r"up to|down to|over to|back to|out to)\b)?\s*(?:the\s+)?$", re.IGNORECASE)


def destination(action: str, places: Mapping[str, Any], lexicon: Any,
                here: str | None) -> str | None:
    """The id of the place ``action`` goes to (module doc), or None. ``places``: the
    campaign's places by id; ``lexicon``: its names (``find(text)`` -> mentions);
    ``here``: the place the player is at."""
    # (runs of spaces as one: the patterns' optional spaces must not backtrack over them)
    phrase = " ".join((deed_phrase(action) or action).split())  # or "go back down to ..."
    verb = next((m for m in _GOING.finditer(phrase) if m.start() == 0
                 or _CLAUSE_END.search(phrase[max(0, m.start() - 6):m.start()])), None)
    if verb is None:
        return None
    for mention in lexicon.find(phrase):
        if mention.start < verb.end() or mention.entity not in places:
            continue
        if not _TOWARD.match(phrase[verb.end():mention.start]) \
                or phrase[mention.end:mention.end + 2] in ("'s", "’s"):
            return None  # "walk away from the quay", "go past the chapel", "run the hall's books"
        return mention.entity if mention.entity != here else None
    return None


def location_patch(place: str, state: Mapping[str, Any]) -> dict[str, Any]:
    """The patch that sets the player's location to ``place``, where the state keeps it:
    ``world.location`` (the campaign's starting place goes there), else a top-level
    ``location`` the state already holds."""
    world = state.get("world")
    if "location" in state and not (isinstance(world, Mapping) and "location" in world):
        return {"location": place}
    return {"world": {"location": place}}


def moved_state(state: Mapping[str, Any], place: str) -> dict[str, Any]:
    """``state`` (a tree) with the player at ``place``, as :func:`location_patch` puts it."""
    patch = location_patch(place, state)
    if "world" not in patch:
        return {**state, **patch}
    world = state.get("world")
    return {**state, "world": {**(world if isinstance(world, Mapping) else {}), **patch["world"]}}


__all__: Sequence[str] = ["destination", "location_patch", "moved_state"]
