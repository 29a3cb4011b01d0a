"""The registered characters: who may know facts and hold memories, with traits and voice.

A character is registered once and never changes, so a lookup is cached; the cache
holds only what exists (another engine on the database may register a character this
one has not seen: a miss reads the table, never a cached "unknown").
"""

from __future__ import annotations

from typing import Any

import duckdb

from narratoria.runtime.narrative.checks import check_text, json_dict, json_text
from narratoria.runtime.narrative.connections import Connections
from narratoria.runtime.narrative.models import DuplicateError, UnknownCharacterError
from narratoria.runtime.narrative.schema import SCHEMA

Profile = tuple[dict[str, Any], dict[str, Any]]  # traits, voice


class Cast:
    def __init__(self, connections: Connections) -> None:
        self._db = connections
        self._characters: dict[str, Profile] = {}

    def get(self, character_id: Any, con: duckdb.DuckDBPyConnection | None = None) -> Profile:
        """(traits, voice) of a registered character; UnknownCharacterError otherwise."""
        found = self._characters.get(character_id) if isinstance(character_id, str) else None
        if found is not None:
            return found
        check_text(character_id, "character id")
        row = self._db.fetch_one(con, f"SELECT traits, voice FROM {SCHEMA}.characters WHERE id = ?",
                                 [character_id])
        if row is None:
            raise UnknownCharacterError(f"unknown character {character_id!r}: register_character it first")
        found = (json_dict(row[0]), json_dict(row[1]))
        self._characters[character_id] = found
        return found

    def register(self, id: str, name: str, traits: dict[str, Any] | None,
                 voice: dict[str, Any] | None) -> str:
        check_text(id, "character id")
        check_text(name, "character name")
        traits_text = json_text(traits, "traits")
        voice_text = json_text(voice, "voice")
        with self._db.writing() as con:
            if con.execute(f"SELECT 1 FROM {SCHEMA}.characters WHERE id = ?", [id]).fetchone():
                raise DuplicateError(f"character {id!r} is already registered")
            try:
                con.execute(f"INSERT INTO {SCHEMA}.characters VALUES (?, ?, ?, ?)",
                            [id, name, traits_text, voice_text])
            except duckdb.ConstraintException as exc:
                raise DuplicateError(f"character {id!r} is already registered") from exc
        self._characters[id] = (json_dict(traits_text), json_dict(voice_text))
        return id
