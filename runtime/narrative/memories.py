"""Characters' experiential memory: what each one said, heard, thought, perceived and did.

A memory is one row of the shared ``memories`` table keyed by its character (every
query filters on ``character_id``), at a moment in a take, with the chunk's vector.
The same text twice is kept twice; a line of dialogue is written for its speaker and
each listener together, all or nothing.

The hot write goes through the memory journal (``journal.py``) when the engine owns
its database: the call appends the rows to a synced journal file and returns, and
the rows move to DuckDB 64 to a literal statement (``db.literal``; DuckDB's
prepare-and-bind doubled the cost) once that many are pending, before any query reads
memories, and on close; opening replays what a killed process left. A statement and
commit cost ~1.5 ms per memory alone and ~0.4 ms a row in a batch. An engine on a
shared connection writes each memory straight through, so the other users of the
database see it at once. Memory ids come from one sequence and are unique in the
table (an index), so a row can never be stored twice.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Sequence

import duckdb
import numpy as np

from narratoria.runtime.db import literal
from narratoria.runtime.narrative.cast import Cast
from narratoria.runtime.narrative.checks import check_choice, check_text, json_dict
from narratoria.runtime.narrative.connections import Connections
from narratoria.runtime.narrative.journal import JournalRow, MemoryJournal
from narratoria.runtime.narrative.models import CHUNK_TYPES, Memory
from narratoria.runtime.narrative.schema import SCHEMA
from narratoria.runtime.narrative.timeline import Timeline
from narratoria.runtime.narrative.vectors import VectorFormat, fill, rank
from narratoria.runtime.vector_rows import VectorRows

_MEMORY_FIELDS = ("chunk", "chunk_type", "tags", "moment_id")
# Journaled memories move to DuckDB this many to a statement (see the docstring).
_JOURNAL_FLUSH_ROWS = 64

Row = tuple[str, str, "str | None"]  # character id, chunk type, tags (JSON text)


class Memories:
    """``journal``: None writes every memory straight through (a shared connection)."""

    def __init__(self, connections: Connections, timeline: Timeline, cast: Cast,
                 vectors: VectorFormat, journal: MemoryJournal | None) -> None:
        self._db = connections
        self._timeline = timeline
        self._cast = cast
        self._vectors = vectors
        self._journal = journal
        self._cache_lock = threading.Lock()
        self._rows: dict[str, VectorRows] = {}  # by character
        self._reserved: deque[int] = deque()  # reserved memory ids, see _reserve_ids

    def write(self, rows: list[Row], chunk: str, moment_id: str, take_id: int) -> list[int]:
        """Store ``chunk`` once per (character, chunk_type, tags) row in one
        statement (atomic); validate everything before writing. Returns the ids, in
        the order of ``rows``."""
        check_text(chunk, "memory chunk")
        for character_id, chunk_type, _ in rows:
            self._cast.get(character_id)
            check_choice(chunk_type, CHUNK_TYPES, "chunk_type")
        seq = self._timeline.moment_seq(moment_id)
        self._timeline.scope(take_id)
        embedder = self._vectors.embedder
        vector = embedder.embed(chunk)  # outside the write lock: a model takes its time
        self._vectors.check(vector)  # refused before anything is written
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        model, version = embedder.model, embedder.version
        with self._db.writing() as con:
            ids = self._reserve_ids(con, len(rows))
            written = [JournalRow(memory_id, character_id, chunk, blob, model, version, moment_id,
                                  seq, take_id, chunk_type, tags)
                       for memory_id, (character_id, chunk_type, tags) in zip(ids, rows)]
            if self._journal is None:
                self._insert(con, written)
            else:
                self._journal.append(written)
                if len(self._journal) >= _JOURNAL_FLUSH_ROWS:
                    self.move_journaled(con)
            # Durable: cache the rows (under the lock, so in id order) so that
            # queries need not read the vectors back.
            for memory_id, (character_id, chunk_type, tags) in zip(ids, rows):
                self._rows_of(character_id).add_one(memory_id, vector,
                                                    (chunk, chunk_type, tags, moment_id))
        return ids

    def _insert(self, con: duckdb.DuckDBPyConnection, rows: Sequence[JournalRow]) -> None:
        """One literal statement (no parameters: half the cost, see db.literal), so
        the rows are written all or none."""
        values = ", ".join(
            f"({r.id}, {literal(r.character_id)}, {literal(r.chunk)}, "
            f"string_split('{self._vectors.text(np.frombuffer(r.vector, dtype=np.float32))}', ',')"
            f"::FLOAT[{self._vectors.dimensions}], "
            + ", ".join(literal(v) for v in (r.embedding_model, r.embedding_version, r.moment_id,
                                             r.moment_seq, r.take_id, r.chunk_type, r.tags)) + ")"
            for r in rows)
        con.execute(f"INSERT INTO {SCHEMA}.memories (id, character_id, chunk, embedding, "
                    "embedding_model, embedding_version, moment_id, moment_seq, take_id, "
                    f"chunk_type, tags) VALUES {values}")

    def move_journaled(self, con: duckdb.DuckDBPyConnection, replay: bool = False) -> None:
        """Move the journal's rows into DuckDB (the write lock is held), then empty it.

        ``replay``: rows recovered at open may already be in the table (a crash
        between the commit and the truncation); those are skipped by id."""
        if self._journal is None or not len(self._journal):
            return
        rows = self._journal.pending
        if replay:
            ids = [r.id for r in rows]
            present = {int(i) for (i,) in con.execute(
                f"SELECT id FROM {SCHEMA}.memories WHERE id BETWEEN ? AND ?",
                [min(ids), max(ids)]).fetchall()}
            rows = [r for r in rows if r.id not in present]
        if rows:
            # One statement: the cast-and-commit cost is per statement, not per row.
            self._insert(con, rows)
        self._journal.clear()

    def close(self, con: duckdb.DuckDBPyConnection) -> None:
        """The journal's last rows into DuckDB, and the journal closed."""
        if self._journal is not None:
            self.move_journaled(con)
            self._journal.close()

    def publish(self) -> None:
        """Journaled memories into DuckDB, so that a query's SQL sees them."""
        if self._journal is not None and len(self._journal):
            with self._db.writing() as con:
                self.move_journaled(con)

    def _reserve_ids(self, con: duckdb.DuckDBPyConnection, n: int) -> list[int]:
        """Ids from the memories sequence, reserved in blocks (the write lock is held).

        An INSERT ... RETURNING costs ~0.25 ms more than a plain INSERT, a fifth of
        the whole write; a block of ids costs one query per 64 memories. Ids stay
        unique (the sequence hands each out once) and grow in write order within
        an engine; ids reserved but never used are gaps, as after a rollback."""
        while len(self._reserved) < n:
            block = con.execute(f"SELECT nextval('{SCHEMA}.memories_id_seq') FROM range(64)").fetchall()
            self._reserved.extend(sorted(int(r[0]) for r in block))
        return [self._reserved.popleft() for _ in range(n)]

    def _rows_of(self, character_id: str) -> VectorRows:
        rows = self._rows.get(character_id)
        if rows is None:
            with self._cache_lock:
                rows = self._rows.setdefault(character_id, VectorRows(self._vectors.dimensions))
        return rows

    def pick(self, con: duckdb.DuckDBPyConnection, character_id: str, ids: np.ndarray,
             seqs: np.ndarray, query: np.ndarray | None, limit: int) -> list[Memory]:
        """The visible memories (``ids``, at ``seqs``) a query returns, ranked (``vectors.rank``)."""
        if not len(ids) or not limit:
            return []
        rows = self._rows_of(character_id)

        def fill_rows(c: duckdb.DuckDBPyConnection, missing: list[int]) -> None:
            fill(c, rows, "memories", _MEMORY_FIELDS, missing, "character_id = ?", [character_id])

        chosen, scores, records = rank(con, rows, ids, seqs, query, limit, fill_rows)
        return [Memory(int(ids[i]), chunk, chunk_type, json_dict(tags), moment,
                       None if scores is None else float(scores[i]))
                for i, (chunk, chunk_type, tags, moment) in zip(chosen, records)]
