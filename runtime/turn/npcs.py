"""The cast of a session: which NPCs exist, which are in a scene, and what one knows.

NPCs are declared when a session is created, in its initial state's ``npcs`` map::

    {"npcs": {"mara": {"name": "Mara", "traits": {...}, "voice": {...},
                       "knows": ["The ferry leaves at dawn."]}}}

Each becomes a character of the narrative state engine; ``knows`` are facts the
campaign gives it before the first scene. An NPC is *present* in a scene when the
player's input names it (its name as a whole word, any case): the player addresses
whom they mention, and a rule the player can see beats a guess by a small model.
Present NPCs witness the scene; absent ones never hear of it.

Pure data and text here; ``storyline.py`` does the database side.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_NPCS = 64
NAME_MAX = 80
_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class CastError(ValueError):
    """A malformed ``npcs`` map; the message names the field."""


@dataclass(frozen=True)
class Npc:
    id: str                       # the session's name for it ("mara")
    name: str                     # how the player refers to it ("Mara")
    character_id: str             # the engine's character id, shared down a branch lineage
    traits: Mapping[str, Any] = field(default_factory=dict)
    voice: Mapping[str, Any] = field(default_factory=dict)
    knows: tuple[str, ...] = ()   # facts the campaign gives it


@dataclass(frozen=True)
class NpcView:
    """What one NPC knows at a moment of a take: the only NPC context the narrator gets."""

    npc_id: str
    name: str
    facts: tuple[str, ...] = ()
    memories: tuple[str, ...] = ()
    perception: float | None = None  # of the player, -100..+100, decayed; None: never met

    def line(self) -> str:
        known = [*self.facts, *self.memories]
        return f"{self.name} knows: " + (" ".join(known) if known else "nothing about this.")


def parse_cast(doc: Any, lineage: str) -> list[Npc]:
    """The ``npcs`` map of an initial state as NPCs; ``lineage`` (the root session id)
    namespaces their engine ids, so two sessions' "mara" never share a memory."""
    if doc is None:
        return []
    if not isinstance(doc, Mapping):
        raise CastError(f"npcs: must be an object of id -> {{name, ...}}, not {type(doc).__name__}")
    if len(doc) > MAX_NPCS:
        raise CastError(f"npcs: {len(doc)} NPCs; at most {MAX_NPCS}")
    cast, names = [], set()
    for npc_id, spec in doc.items():
        where = f"npcs.{npc_id}"
        if not isinstance(npc_id, str) or not _ID.match(npc_id):
            raise CastError(f"{where}: an NPC id is 1-64 letters, digits, '_' or '-'")
        if not isinstance(spec, Mapping):
            raise CastError(f"{where}: must be an object with a name")
        name = spec.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
            raise CastError(f"{where}.name: a non-empty string of at most {NAME_MAX} characters")
        if name.strip().lower() in names:
            raise CastError(f"{where}.name: {name!r} is another NPC's name too")
        names.add(name.strip().lower())
        traits, voice, knows = spec.get("traits") or {}, spec.get("voice") or {}, spec.get("knows") or []
        for value, what in ((traits, "traits"), (voice, "voice")):
            if not isinstance(value, Mapping):
                raise CastError(f"{where}.{what}: must be an object")
        if not isinstance(knows, list) or not all(isinstance(k, str) and k.strip() for k in knows):
            raise CastError(f"{where}.knows: must be a list of non-empty strings")
        cast.append(Npc(npc_id, name.strip(), f"{lineage}/{npc_id}", dict(traits), dict(voice),
                        tuple(k.strip() for k in knows)))
    return cast


def present(cast: Sequence[Npc], player_input: str) -> list[Npc]:
    """The NPCs the player's input names, in cast order."""
    return [npc for npc in cast
            if re.search(rf"(?<!\w){re.escape(npc.name)}(?!\w)", player_input, re.IGNORECASE)]


def cast_json(cast: Sequence[Npc]) -> list[dict[str, Any]]:
    return [{"id": n.id, "name": n.name, "character_id": n.character_id} for n in cast]


def cast_from_json(doc: Sequence[Mapping[str, Any]]) -> list[Npc]:
    """The stored roster (knows/traits/voice already live in the engine)."""
    return [Npc(d["id"], d["name"], d["character_id"]) for d in doc]
