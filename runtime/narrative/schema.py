"""The narrative state engine's tables, in their own DuckDB schema, and their migrations.

The engine shares one database per data directory with the persistence layer, so
its tables live in the schema ``narrative_state`` (``narrative_state.memories``
never collides with anyone's ``memories``). Differences from the spec's SQLite
schema, and why:

- One ``memories`` table with a ``character_id`` column instead of a table per
  character: isolation is enforced by every query (``character_id = ?``), and a
  character id never has to become an SQL identifier.
- Vectors live in plain ``FLOAT[dim]`` columns next to their rows; they are the
  authoritative copy (vss's HNSW persistence is experimental). Every vector row
  records ``embedding_model`` and ``embedding_version`` (docs/store.md, "Embeddings").
  Facts carry a vector too, so a query text can rank them.
- ``knowledge_events`` and ``memories`` copy their moment's ``sequence``
  (``moment_seq``). Moments are immutable (there is no API to change or delete
  one), so the copy never goes stale, and the visibility filter is a range test
  on one table instead of a join with ``moments``.
- No FOREIGN KEY clauses: the engine validates every reference itself to name
  the missing moment, character, take or fact, and DuckDB's foreign keys would
  forbid the one update the engine makes (a take's status).
- No secondary indexes: DuckDB's ART indexes serve constraints and point lookups;
  the scoped scans here are served by columnar scans and zone maps. ``memories.id``
  has a unique index since v3 (ids come from a sequence; the index makes a repeat,
  such as a journal replayed twice, an error instead of a duplicate row).
- No corpus table since v4: the spec's shared, ungated corpus was never used by the
  daemon (campaign lore is the persistence store's ``lore_chunk``), so v4 drops it.

The vector width is fixed when the schema is created; ``meta`` records it so a
database is never reopened with a different width.
"""

from __future__ import annotations

from typing import Callable

import duckdb

from narratoria.runtime.db import Migration

COMPONENT = "narrative_state"
SCHEMA = "narrative_state"


def _create_v1(dimensions: int) -> Callable[[duckdb.DuckDBPyConnection], None]:
    # The width is part of the column type, and DDL takes no parameters: it is an
    # int checked here, never text from a caller.
    if not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1:
        raise ValueError(f"vector dimensions must be a positive int, not {dimensions!r}")
    vec = f"FLOAT[{dimensions}]"

    def apply(con: duckdb.DuckDBPyConnection) -> None:
        for statement in (
            f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
            f"CREATE TABLE {SCHEMA}.meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)",
            f"CREATE SEQUENCE {SCHEMA}.takes_id_seq START 1",
            f"CREATE SEQUENCE {SCHEMA}.facts_id_seq START 1",
            f"CREATE SEQUENCE {SCHEMA}.knowledge_events_id_seq START 1",
            f"CREATE SEQUENCE {SCHEMA}.memories_id_seq START 1",
            f"CREATE SEQUENCE {SCHEMA}.corpus_id_seq START 1",
            f"""CREATE TABLE {SCHEMA}.moments (
                id VARCHAR PRIMARY KEY,
                sequence BIGINT NOT NULL UNIQUE,
                label VARCHAR,
                metadata VARCHAR)""",
            f"""CREATE TABLE {SCHEMA}.takes (
                id BIGINT PRIMARY KEY DEFAULT nextval('{SCHEMA}.takes_id_seq'),
                parent_take_id BIGINT,
                branch_point VARCHAR,
                created_at TIMESTAMP NOT NULL,
                status VARCHAR NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'archived', 'trunk')),
                notes VARCHAR,
                CHECK ((parent_take_id IS NULL) = (branch_point IS NULL)))""",
            f"""CREATE TABLE {SCHEMA}.characters (
                id VARCHAR PRIMARY KEY,
                name VARCHAR NOT NULL,
                traits VARCHAR,
                voice VARCHAR)""",
            f"""CREATE TABLE {SCHEMA}.facts (
                id BIGINT PRIMARY KEY DEFAULT nextval('{SCHEMA}.facts_id_seq'),
                content VARCHAR NOT NULL,
                category VARCHAR,
                created_at VARCHAR NOT NULL,
                embedding {vec} NOT NULL,
                embedding_model VARCHAR NOT NULL,
                embedding_version VARCHAR NOT NULL)""",
            f"""CREATE TABLE {SCHEMA}.knowledge_events (
                id BIGINT PRIMARY KEY DEFAULT nextval('{SCHEMA}.knowledge_events_id_seq'),
                character_id VARCHAR NOT NULL,
                fact_id BIGINT NOT NULL,
                moment_id VARCHAR NOT NULL,
                moment_seq BIGINT NOT NULL,
                take_id BIGINT NOT NULL,
                source VARCHAR
                    CHECK (source IN ('witnessed', 'told', 'inferred', 'discovered')),
                UNIQUE (character_id, fact_id, take_id))""",
            f"""CREATE TABLE {SCHEMA}.memories (
                id BIGINT NOT NULL DEFAULT nextval('{SCHEMA}.memories_id_seq'),
                character_id VARCHAR NOT NULL,
                chunk VARCHAR NOT NULL,
                embedding {vec} NOT NULL,
                embedding_model VARCHAR NOT NULL,
                embedding_version VARCHAR NOT NULL,
                moment_id VARCHAR NOT NULL,
                moment_seq BIGINT NOT NULL,
                take_id BIGINT NOT NULL,
                chunk_type VARCHAR NOT NULL
                    CHECK (chunk_type IN ('said', 'heard', 'internal', 'perceived', 'action')),
                tags VARCHAR)""",
            f"""CREATE TABLE {SCHEMA}.corpus (
                id BIGINT NOT NULL DEFAULT nextval('{SCHEMA}.corpus_id_seq'),
                content VARCHAR NOT NULL,
                source VARCHAR NOT NULL,
                section VARCHAR,
                category VARCHAR,
                version VARCHAR,
                created_at TIMESTAMP NOT NULL,
                metadata VARCHAR,
                embedding {vec} NOT NULL,
                embedding_model VARCHAR NOT NULL,
                embedding_version VARCHAR NOT NULL)""",
        ):
            con.execute(statement)
        con.execute(f"INSERT INTO {SCHEMA}.meta VALUES ('vector_dimensions', ?)", [str(dimensions)])

    return apply


def _dedupe_memories_v2(con: duckdb.DuckDBPyConnection) -> None:
    # Two engines on one file replayed each other's journal and stored the same memory
    # (same id, same row) twice: keep the first copy. Its own migration: DuckDB's index
    # build (v3) still sees rows deleted earlier in the same transaction.
    con.execute(f"""DELETE FROM {SCHEMA}.memories WHERE rowid NOT IN (
        SELECT min(rowid) FROM {SCHEMA}.memories GROUP BY id)""")


def _unique_memory_ids_v3(con: duckdb.DuckDBPyConnection) -> None:
    # A repeated id (a journal replayed twice) is then an error, never a duplicate row.
    # Measured: the index costs nothing visible on a 64-row insert (0.13 ms a row with it
    # and without). Not ALTER TABLE ... ADD PRIMARY KEY: DuckDB 1.5 then fails to replay
    # its own WAL after a kill ("GetDefaultDatabase with no default database set").
    con.execute(f"CREATE UNIQUE INDEX memories_id_unique ON {SCHEMA}.memories (id)")


def _drop_corpus_v4(con: duckdb.DuckDBPyConnection) -> None:
    # The shared corpus (chunks of reference documents, ungated) was never used by the
    # daemon: campaign lore lives in the persistence store (runtime/campaign/ingest.py).
    # IF EXISTS: a file whose ledger was rolled back by hand may lack them already.
    con.execute(f"DROP TABLE IF EXISTS {SCHEMA}.corpus")
    con.execute(f"DROP SEQUENCE IF EXISTS {SCHEMA}.corpus_id_seq")


def migrations(dimensions: int) -> list[Migration]:
    """The engine's migrations, oldest first; ``dimensions`` only matters to a new database."""
    return [Migration(1, "narrative state tables", _create_v1(dimensions)),
            Migration(2, "duplicated memories removed", _dedupe_memories_v2),
            Migration(3, "memory ids are unique", _unique_memory_ids_v3),
            Migration(4, "the unused corpus table dropped", _drop_corpus_v4)]


def stored_dimensions(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute(
        f"SELECT value FROM {SCHEMA}.meta WHERE key = 'vector_dimensions'").fetchone()
    return int(row[0])
