"""The persistence layer's tables, in their own DuckDB schema, and their migrations.

The database file is shared with the narrative state engine, so every table
lives in the schema ``persistence`` and the migrations are recorded under the
component ``persistence`` (``db.migrate``). Choices, and why:

- One table per data type, each keyed by ``(playthrough_id, <key>)``. Memory
  events and lore chunks get a generated ``id``; the other four have a natural
  key within a playthrough (a faction, an NPC, a character, a session), so
  ``update("faction_reputation", "thieves_guild", ...)`` needs no lookup first.
- Vectors live in plain ``FLOAT[dim]`` columns next to their rows and are the
  authoritative copy: search scores every row the filters leave, exactly (vss's
  HNSW post-filters, which can drop in-scope rows, and its on-disk persistence is
  experimental). Every vector row records ``embedding_model`` and
  ``embedding_version`` (docs/store.md, "Embeddings"), and an ``embedding_seq`` that
  identifies that one vector (see ``vector_cache.py``).
- Migration DDL is written out, not generated from the record types, so a
  migration never changes after it has shipped. ``TableSpec`` maps records onto
  the current columns; a test checks the two agree.

The vector width is fixed when the schema is created; ``meta`` records it so a
database is never reopened with an embedder of another width.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from functools import cached_property
from datetime import datetime
from typing import Callable

import duckdb
import msgspec

from narratoria.runtime.db import Migration
from narratoria.runtime.store.records import (
    RECORD_TYPES,
    CharacterPortrait,
    DataType,
    FactionReputation,
    LoreChunk,
    MemoryEvent,
    NpcPerception,
    PlaythroughSession,
    Record,
)

COMPONENT = "persistence"
SCHEMA = "persistence"
EMBEDDING_SEQ = f"{SCHEMA}.embedding_seq"

# Record fields computed at read time, never columns.
COMPUTED_FIELDS = frozenset({"decayed_score"})


@dataclass(frozen=True)
class TableSpec:
    data_type: DataType
    table: str  # schema-qualified
    record: type[Record]
    key: str  # identifies a record within a playthrough
    auto_key: bool  # the store generates the key when a record has none
    time_column: str  # what timestamp filters and retention by age look at
    text_field: str | None  # the embedded text; None: no vector, no semantic search
    score_column: str | None = None  # the value that decays, if any

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """The record's stored fields, in declaration order."""
        return tuple(f.name for f in msgspec.structs.fields(self.record)
                     if f.name not in COMPUTED_FIELDS)

    @cached_property
    def sql_types(self) -> dict[str, str]:
        hints = typing.get_type_hints(self.record)
        return {name: _sql_type(hints[name]) for name in self.columns}


def _sql_type(hint: object) -> str:
    """DuckDB type of a record field (``X | None`` maps like ``X``)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return _sql_type(args[0])
    if typing.get_origin(hint) is list:
        return "VARCHAR[]"
    if typing.get_origin(hint) is typing.Literal or hint is str:
        return "VARCHAR"
    simple = {bool: "BOOLEAN", int: "BIGINT", float: "DOUBLE", datetime: "TIMESTAMP"}
    return simple[hint]  # a KeyError here is a record type this module does not map yet


SPECS: dict[DataType, TableSpec] = {spec.data_type: spec for spec in (
    TableSpec(DataType.MEMORY_EVENT, f"{SCHEMA}.memory_events", MemoryEvent,
              key="id", auto_key=True, time_column="timestamp", text_field="summary"),
    TableSpec(DataType.LORE_CHUNK, f"{SCHEMA}.lore_chunks", LoreChunk,
              key="id", auto_key=True, time_column="ingested_at", text_field="content"),
    TableSpec(DataType.FACTION_REPUTATION, f"{SCHEMA}.faction_reputation", FactionReputation,
              key="faction_id", auto_key=False, time_column="last_updated", text_field=None,
              score_column="current_score"),
    TableSpec(DataType.NPC_PERCEPTION, f"{SCHEMA}.npc_perception", NpcPerception,
              key="npc_id", auto_key=False, time_column="last_interaction", text_field=None,
              score_column="perception_score"),
    TableSpec(DataType.CHARACTER_PORTRAIT, f"{SCHEMA}.character_portraits", CharacterPortrait,
              key="character_id", auto_key=False, time_column="generated_at",
              text_field="description"),
    TableSpec(DataType.PLAYTHROUGH_SESSION, f"{SCHEMA}.playthrough_sessions", PlaythroughSession,
              key="session_id", auto_key=False, time_column="start_time", text_field=None),
)}
assert set(SPECS) == set(RECORD_TYPES)


def _create_v1(dimensions: int) -> Callable[[duckdb.DuckDBPyConnection], None]:
    # The width is part of the column type and DDL takes no parameters: it is an
    # int checked here, never text from a caller.
    if not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1:
        raise ValueError(f"vector dimensions must be a positive int, not {dimensions!r}")
    # embedding_seq names one vector for good: a new vector (insert or re-embedding)
    # draws a new number, so an in-memory copy keyed by it is never stale (vector_cache.py).
    vector = (f"embedding FLOAT[{dimensions}] NOT NULL, embedding_model VARCHAR NOT NULL, "
              f"embedding_version VARCHAR NOT NULL, "
              f"embedding_seq BIGINT NOT NULL UNIQUE DEFAULT nextval('{EMBEDDING_SEQ}')")

    def apply(con: duckdb.DuckDBPyConnection) -> None:
        for statement in (
            f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
            f"CREATE TABLE {SCHEMA}.meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
            f"CREATE SEQUENCE {EMBEDDING_SEQ} START 1",
            f"""CREATE TABLE {SCHEMA}.memory_events (
                playthrough_id VARCHAR NOT NULL, id VARCHAR NOT NULL,
                summary VARCHAR NOT NULL, "timestamp" TIMESTAMP NOT NULL,
                session_id VARCHAR NOT NULL, character_ids VARCHAR[] NOT NULL,
                action_type VARCHAR, semantic_tags VARCHAR[] NOT NULL, location VARCHAR,
                {vector}, PRIMARY KEY (playthrough_id, id))""",
            f"""CREATE TABLE {SCHEMA}.lore_chunks (
                playthrough_id VARCHAR NOT NULL, id VARCHAR NOT NULL,
                campaign_id VARCHAR NOT NULL, campaign_version VARCHAR NOT NULL,
                file_path VARCHAR NOT NULL, chunk_index BIGINT NOT NULL,
                paragraph_id BIGINT NOT NULL, content VARCHAR NOT NULL,
                token_count BIGINT NOT NULL, source_type VARCHAR NOT NULL,
                weight_tier BIGINT NOT NULL, file_origin VARCHAR NOT NULL,
                is_player BOOLEAN NOT NULL, entity_ids VARCHAR[] NOT NULL,
                tags VARCHAR[] NOT NULL, ingested_at TIMESTAMP NOT NULL,
                {vector}, PRIMARY KEY (playthrough_id, id))""",
            f"""CREATE TABLE {SCHEMA}.faction_reputation (
                playthrough_id VARCHAR NOT NULL, faction_id VARCHAR NOT NULL,
                current_score DOUBLE NOT NULL, last_updated TIMESTAMP NOT NULL,
                decay_rate DOUBLE, PRIMARY KEY (playthrough_id, faction_id))""",
            f"""CREATE TABLE {SCHEMA}.npc_perception (
                playthrough_id VARCHAR NOT NULL, npc_id VARCHAR NOT NULL,
                perception_score DOUBLE NOT NULL, last_interaction TIMESTAMP NOT NULL,
                event_history VARCHAR[] NOT NULL, decay_rate DOUBLE,
                PRIMARY KEY (playthrough_id, npc_id))""",
            f"""CREATE TABLE {SCHEMA}.character_portraits (
                playthrough_id VARCHAR NOT NULL, character_id VARCHAR NOT NULL,
                image_path VARCHAR NOT NULL, description VARCHAR NOT NULL,
                generated_at TIMESTAMP NOT NULL, description_hash VARCHAR NOT NULL,
                {vector}, PRIMARY KEY (playthrough_id, character_id))""",
            f"""CREATE TABLE {SCHEMA}.playthrough_sessions (
                playthrough_id VARCHAR NOT NULL, session_id VARCHAR NOT NULL,
                start_time TIMESTAMP NOT NULL, end_time TIMESTAMP, current_location VARCHAR,
                PRIMARY KEY (playthrough_id, session_id))""",
        ):
            con.execute(statement)
        con.execute(f"INSERT INTO {SCHEMA}.meta VALUES ('vector_dimensions', ?)", [str(dimensions)])

    return apply


_LORE_V1_COLUMNS = (
    "playthrough_id, id, campaign_id, campaign_version, file_path, chunk_index, paragraph_id, "
    "content, token_count, source_type, weight_tier, file_origin, is_player, entity_ids, tags, "
    "ingested_at, embedding, embedding_model, embedding_version, embedding_seq")


def _lore_chunk_origin_v2(con: duckdb.DuckDBPyConnection) -> None:
    """Where each lore chunk came from (docs/campaigns.md, "Provenance"): five nullable columns.

    The table is rebuilt (new table, rows copied, old one dropped, new one
    renamed), not ``ALTER TABLE ... ADD COLUMN``: DuckDB 1.5 cannot replay that
    ALTER from the write-ahead log on a table with a ``nextval`` default
    (``embedding_seq``) — a crash before the next checkpoint would leave a file
    that no longer opens ("GetDefaultDatabase with no default database set").
    The copy keeps every row, vector and ``embedding_seq`` as they were; rows
    from before this version read the new fields as None. It runs inside the
    migration's transaction: all of it or none.
    """
    # The width the database was created with (meta), not the embedder's: a
    # mismatch is refused after migrating, and the copy must not fail first.
    dimensions = stored_dimensions(con)
    vector = (f"embedding FLOAT[{dimensions}] NOT NULL, embedding_model VARCHAR NOT NULL, "
              f"embedding_version VARCHAR NOT NULL, "
              f"embedding_seq BIGINT NOT NULL UNIQUE DEFAULT nextval('{EMBEDDING_SEQ}')")
    for statement in (
        f"""CREATE TABLE {SCHEMA}.lore_chunks_v2 (
            playthrough_id VARCHAR NOT NULL, id VARCHAR NOT NULL,
            campaign_id VARCHAR NOT NULL, campaign_version VARCHAR NOT NULL,
            file_path VARCHAR NOT NULL, chunk_index BIGINT NOT NULL,
            paragraph_id BIGINT NOT NULL, content VARCHAR NOT NULL,
            token_count BIGINT NOT NULL, source_type VARCHAR NOT NULL,
            weight_tier BIGINT NOT NULL, file_origin VARCHAR NOT NULL,
            is_player BOOLEAN NOT NULL, entity_ids VARCHAR[] NOT NULL,
            tags VARCHAR[] NOT NULL, ingested_at TIMESTAMP NOT NULL,
            {vector},
            chunk_method VARCHAR, source_line BIGINT, content_type VARCHAR,
            json_field VARCHAR, entity_type VARCHAR,
            PRIMARY KEY (playthrough_id, id))""",
        f"INSERT INTO {SCHEMA}.lore_chunks_v2 ({_LORE_V1_COLUMNS}) "
        f"SELECT {_LORE_V1_COLUMNS} FROM {SCHEMA}.lore_chunks",
        f"DROP TABLE {SCHEMA}.lore_chunks",
        f"ALTER TABLE {SCHEMA}.lore_chunks_v2 RENAME TO lore_chunks",
    ):
        con.execute(statement)


def migrations(dimensions: int) -> list[Migration]:
    """Forward-only, in order; append, never edit, once a version has shipped."""
    return [Migration(1, "persistence tables", _create_v1(dimensions)),
            Migration(2, "lore chunk origin", _lore_chunk_origin_v2)]


def stored_dimensions(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key = 'vector_dimensions'").fetchone()
    return int(row[0])
