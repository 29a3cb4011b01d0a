"""The narrative state engine (phantom-state-engine.md) on DuckDB.

Characters know only what retrieval hands them, so the guarantees are enforced
by every query, never by a prompt:

- a character's query returns only its own memories and the facts it learned;
- nothing learned or experienced after the queried moment's sequence;
- nothing from a take outside the queried take's ancestry, and nothing from an
  abandoned timeline: a branch at moment M retries the story from M.

Visibility. For a query of take ``T_0`` at moment ``q``, walk the ancestry
``T_0, T_1 = parent(T_0), ..., T_k`` (the root). ``T_i`` branched from ``T_{i+1}``
at moment ``b_i``. A row written in ``T_i`` is visible iff::

    seq(row) <= seq(q)  and  (i == 0  or  seq(row) < min(seq(b_0), ..., seq(b_{i-1})))

so a branch inherits its parent's history strictly before the branch point and
never the parent's writes at or after it, and the cut compounds down a chain of
branches. ``_scope`` turns a take into ``(take_id, cutoff)`` pairs (one recursive
query, cached: a take's parent and branch point never change), and every query
keeps a row iff, in SQL::

    character_id = :character
    AND moment_seq <= CASE take_id WHEN :t0 THEN :max0 WHEN :t1 THEN :max1 ... END

with ``max_i = min(seq(q), cutoff_i - 1)`` (a take outside the ancestry gives
NULL: never visible). Rows carry their moment's sequence (``moment_seq``), so
this is a single-table range test.

Concurrency and durability. DuckDB connections are not thread-safe, so the engine
writes through one connection under a lock and reads through a pool of cursors
(each a connection of its own to the same database): readers never wait for
each other, and DuckDB's MVCC shows them only committed rows. Every write call
commits before it returns (autocommit for one statement, an explicit transaction
for several), and a commit is in DuckDB's write-ahead log, so a process killed
right after a call returned loses nothing. A refused call writes nothing.

Scoring. Which rows a query may see is decided in SQL, by every query, against
the database. Ranking them is not: DuckDB's ``array_cosine_similarity`` over
10,000 384-d rows took 13-30 ms here (the scan decompresses every vector), so
the engine keeps an in-process cache of rows by id (vector and record fields)
and scores the visible ids with numpy. A row never changes once written (the
engine has no update, and a deleted corpus row is simply never a candidate
again), so a cached row is always right; a visible id missing from the cache
(written by another engine on the same database, or before a restart) is read
from DuckDB before scoring. The FLOAT[dim] column stays the authoritative copy.

Vectors travel to DuckDB as text (``string_split(?, ',')::FLOAT[dim]``): DuckDB's
Python binding converts a list or array parameter element by element (~12 µs a
float even with the pandas fix below, 130 µs without), while a 384-float string
parses in ~0.3 ms. Vectors come back only when the cache must be filled. A
memory, the hot write, goes through the memory journal (``journal.py``) when the
engine owns its database: the call appends the rows to a synced journal file and
returns, and the rows move to DuckDB 64 to a literal statement (``db.literal``;
DuckDB's prepare-and-bind doubled the cost) once that many are pending, before
any query reads memories, and on close; opening replays what a killed process
left. A statement and commit cost ~1.5 ms per memory alone and ~0.4 ms a row in
a batch. An engine on a shared connection writes each memory straight through,
so the other users of the database see it at once.

One engine per database file. An engine that opens its file refuses to start while
another engine of the same process has that file open (its journal would be replayed
and truncated under the other's feet), and a file another process holds is refused
with DuckDB's lock holder named: both are a ``NarrativeStateError`` naming the file.
Memory ids come from one sequence and are unique in the table (an index), so a row
can never be stored twice.
"""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import duckdb
import numpy as np

from narratoria.runtime.db import DatabaseLocked, connect, literal, migrate
from narratoria.runtime.embedding import (LOCAL_MODEL, EmbeddingBackend, EmbeddingError, EmbeddingSettings,
                         make_backend)
from narratoria.runtime.narrative.chunking import chunk_text
from narratoria.runtime.narrative.journal import JournalRow, MemoryJournal, journal_path
from narratoria.runtime.narrative.schema import COMPONENT, SCHEMA, migrations, stored_dimensions
from narratoria.runtime.narrative.models import (
    CHUNK_TYPES,
    GRANULARITIES,
    KNOWLEDGE_SOURCES,
    TAKE_STATUSES,
    CharacterState,
    CorpusChunk,
    DuplicateError,
    EngineConfig,
    Fact,
    InvalidArgumentError,
    Memory,
    NarrativeStateError,
    Take,
    UnknownCharacterError,
    UnknownFactError,
    UnknownMomentError,
    UnknownTakeError,
)

__all__ = ["NarrativeStateEngine"]

Scope = tuple[tuple[int, "int | None"], ...]  # (take id, exclusive sequence cutoff), root first
Chunker = Callable[[str], Sequence[str]]

_BIGINT_MIN, _BIGINT_MAX = -(2**63), 2**63 - 1
_MEMORY_FIELDS = ("chunk", "chunk_type", "tags", "moment_id")
_FACT_FIELDS = ("content", "category")
_CORPUS_FIELDS = ("content", "source", "section", "category", "version", "metadata")
# Past this many missing ids a cache fill reads the whole group: one scan beats
# a long id list (DuckDB converts list parameters element by element).
_FILL_BY_ID_MAX = 256
# Journaled memories move to DuckDB this many to a statement (see the docstring).
_JOURNAL_FLUSH_ROWS = 64


# ----------------------------------------------------------------------
# argument checks


def _json_text(value: dict[str, Any] | None, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidArgumentError(f"{what} must be a dict, not {type(value).__name__}")
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(f"{what} is not JSON-serialisable: {exc}") from exc


def _json_dict(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text else {}


def _check_text(value: Any, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value):
        raise InvalidArgumentError(f"{what} must be a non-empty string, not {value!r}")
    if "\x00" in value:
        raise InvalidArgumentError(f"{what} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidArgumentError(f"{what} is not valid Unicode at position {exc.start}") from None
    return value


def _check_optional_text(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a string or None, not {value!r}")
    return value


def _check_int(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not _BIGINT_MIN <= value <= _BIGINT_MAX:
        raise InvalidArgumentError(f"{what} must be a 64-bit int, not {value!r}")
    return value


def _check_limit(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidArgumentError(f"{what} must be an int >= 0, not {value!r}")
    return value


def _check_choice(value: Any, allowed: Sequence[str], what: str, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if value not in allowed:
        raise InvalidArgumentError(f"invalid {what} {value!r} (expected one of {', '.join(allowed)})")
    return value


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)  # stored as UTC


# ----------------------------------------------------------------------
# scoring


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # a zero vector scores 0 against everything
    return vectors / norms


def _dot(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` in slices of ~128k floats: OpenBLAS wakes its thread pool
    for larger products, which on this 2-core machine made a 10,000 x 384 product
    5-10x slower than the sliced one."""
    out = np.empty(len(matrix), dtype=np.float32)
    step = max(64, 2**17 // max(1, matrix.shape[1]))
    for start in range(0, len(matrix), step):
        np.matmul(matrix[start:start + step], query, out=out[start:start + step])
    return out


def _top(limit: int, *keys: np.ndarray) -> np.ndarray:
    """Indices of the first ``limit`` rows ordered by ``keys`` (most significant
    first, ascending), without sorting everything when ``limit`` is small."""
    n = len(keys[0])
    if limit >= n:
        return np.lexsort(keys[::-1])
    first = keys[0]
    kth = np.partition(first, limit - 1)[limit - 1]
    chosen = np.nonzero(first <= kth)[0]  # ties at the boundary stay in
    order = np.lexsort(tuple(k[chosen] for k in keys[::-1]))[:limit]
    return chosen[order]


class _RowCache:
    """Rows of one group (a character's memories, all facts, the corpus) by id:
    unit vectors for scoring and the record fields a result needs.

    Rows are immutable once committed, so whatever is cached is right; the cache
    may miss rows, never hold wrong ones. Readers take a snapshot (arrays are only
    appended past its end, or replaced) and score without the lock.
    """

    def __init__(self, dimensions: int) -> None:
        self._lock = threading.Lock()
        self._ids = np.empty(0, dtype=np.int64)  # sorted
        self._vectors = np.empty((0, dimensions), dtype=np.float32)
        self._records: list[tuple[Any, ...]] = []
        self._present: set[int] = set()
        self._n = 0

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, list[tuple[Any, ...]]]:
        with self._lock:
            n = self._n
            return self._ids[:n], self._vectors[:n], self._records

    def add(self, ids: Sequence[int], vectors: np.ndarray, records: Sequence[tuple[Any, ...]]) -> None:
        vectors = _unit(vectors)
        with self._lock:
            fresh = [i for i, row_id in enumerate(ids) if int(row_id) not in self._present]
            if not fresh:
                return
            new_ids = np.asarray([int(ids[i]) for i in fresh], dtype=np.int64)
            n, m = self._n, len(fresh)
            if n + m > len(self._ids) or (n and new_ids.min() < self._ids[n - 1]) \
                    or np.any(np.diff(new_ids) < 0):
                self._rebuild(new_ids, vectors[fresh], [records[i] for i in fresh])
            else:  # the usual case: ids arrive in increasing order, appended in place
                self._ids[n:n + m] = new_ids
                self._vectors[n:n + m] = vectors[fresh]
                self._records.extend(records[i] for i in fresh)
                self._n = n + m
            self._present.update(int(i) for i in new_ids)

    def add_one(self, row_id: int, vector: np.ndarray, record: tuple[Any, ...]) -> None:
        """``add`` for one row: the hot path of every memory write."""
        vector = np.asarray(vector, dtype=np.float32)
        norm = float(np.sqrt(vector @ vector))
        if norm and abs(norm - 1.0) > 1e-6:
            vector = vector / norm
        with self._lock:
            n = self._n
            if row_id in self._present:
                return
            if n < len(self._ids) and (n == 0 or row_id > self._ids[n - 1]):
                self._ids[n] = row_id
                self._vectors[n] = vector
                self._records.append(record)
                self._present.add(row_id)
                self._n = n + 1
                return
        self.add([row_id], vector[None, :], [record])

    def _rebuild(self, new_ids: np.ndarray, vectors: np.ndarray, records: list[tuple[Any, ...]]) -> None:
        # New arrays, sorted by id, with room to append in place; the old ones are
        # never mutated (a reader's snapshot may hold them).
        n = self._n
        ids = np.concatenate([self._ids[:n], new_ids])
        all_vectors = np.concatenate([self._vectors[:n], vectors])
        all_records = self._records[:n] + records
        order = np.argsort(ids, kind="stable")
        size, capacity = len(ids), max(64, 2 * len(ids))
        sorted_ids = np.empty(capacity, dtype=np.int64)
        sorted_ids[:size] = ids[order]
        sorted_vectors = np.empty((capacity, all_vectors.shape[1]), dtype=np.float32)
        sorted_vectors[:size] = all_vectors[order]
        self._ids, self._vectors = sorted_ids, sorted_vectors
        self._records = [all_records[i] for i in order]
        self._n = size

    def missing(self, ids: np.ndarray) -> list[int]:
        return [int(i) for i in ids if int(i) not in self._present]


def _locate(cached_ids: np.ndarray, wanted: np.ndarray) -> np.ndarray | None:
    """Positions of the ``wanted`` ids (any order) in the sorted ``cached_ids``; None
    if any is absent."""
    if not len(wanted):
        return np.empty(0, dtype=np.int64)
    if not len(cached_ids):
        return None
    positions = np.searchsorted(cached_ids, wanted)
    positions[positions >= len(cached_ids)] = 0
    return positions if np.array_equal(cached_ids[positions], wanted) else None


# Database files an engine of this process has open (real paths), so that a second engine
# on the same file is refused: it would replay the first's memory journal (rows the
# first still holds as pending, inserted twice) and truncate it under the first (rows
# the first acknowledged, lost on a crash). DuckDB itself lets one process open a file
# twice, so only this registry can tell.
_open_files: set[str] = set()
_open_files_lock = threading.Lock()


def _claim_file(db_path: str) -> str | None:
    """Register ``db_path`` as this engine's; None for an in-memory database.

    NarrativeStateError naming the file if another engine of this process has it."""
    if not db_path or db_path.startswith(":memory:"):
        return None
    key = os.path.realpath(db_path)
    with _open_files_lock:
        if key in _open_files:
            raise NarrativeStateError(
                f"{db_path}: another narrative state engine of this process (pid {os.getpid()}) "
                "has this database file open; close it first, or share its connection "
                "(NarrativeStateEngine(..., connection=...))")
        _open_files.add(key)
    return key


def _release_file(key: str | None) -> None:
    if key is not None:
        with _open_files_lock:
            _open_files.discard(key)


class NarrativeStateEngine:
    """Bounded character knowledge with branching takes, on one DuckDB database.

    ``connection``: an open connection (from ``narratoria.runtime.db.connect``) to
    share its database with the persistence layer; the engine then ignores
    ``config.db_path``, works through cursors of its own, and leaves the
    connection open on ``close``.
    ``embedder``: an embedding backend to share instead of building one from the
    config; its dimensions must match ``config.vector_dimensions``.
    """

    def __init__(self, config: EngineConfig, *, connection: duckdb.DuckDBPyConnection | None = None,
                 embedder: EmbeddingBackend | None = None) -> None:
        self.config = config
        self._check_config(config)
        self._embedder = embedder if embedder is not None else make_backend(EmbeddingSettings(
            backend=config.embedding_backend, dimensions=config.vector_dimensions,
            openai_model=config.openai_model, openai_api_key=config.openai_api_key))
        dims = config.vector_dimensions
        if self._embedder.dimensions != dims:
            raise InvalidArgumentError(
                f"the {self._embedder.model} embedder makes {self._embedder.dimensions}-d vectors; "
                f"config.vector_dimensions is {dims}")
        self._vector_sql = f"string_split(?, ',')::FLOAT[{dims}]"  # dims: a checked int
        self._vector_format = ",".join(["%.9g"] * dims)  # 9 digits: float32 round-trips exactly

        self._owns_connection = connection is None
        self._file = _claim_file(config.db_path) if connection is None else None
        try:
            self._root = connection if connection is not None else connect(config.db_path)
        except DatabaseLocked as exc:
            _release_file(self._file)
            raise NarrativeStateError(str(exc)) from None
        except BaseException:
            _release_file(self._file)
            raise
        self._closed = False
        self._write_lock = threading.RLock()
        self._pool_lock = threading.Lock()
        self._idle_readers: list[duckdb.DuckDBPyConnection] = []
        self._all_readers: list[duckdb.DuckDBPyConnection] = []
        self._writer: duckdb.DuckDBPyConnection | None = None
        self._factory: duckdb.DuckDBPyConnection | None = None
        self._journal: MemoryJournal | None = None
        try:
            self._writer = self._root.cursor()
            self._factory = self._root.cursor()  # makes the readers' cursors
            migrate(self._writer, COMPONENT, migrations(dims))
            stored = stored_dimensions(self._writer)
            if stored != dims:
                raise InvalidArgumentError(
                    f"this database stores {stored}-d vectors; config.vector_dimensions is {dims}")
            if self._owns_connection:
                self._journal = MemoryJournal(journal_path(config.db_path))
                self._move_journaled(self._writer, replay=True)
        except BaseException:
            if self._journal is not None:
                self._journal.close()
            self._close_connections()
            raise

        # Caches of records that never change (never a negative answer: another
        # engine on the same database may create what this one has not seen).
        self._moment_seqs: dict[str, int] = {}
        self._characters: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self._known_facts: set[int] = set()
        self._scopes: dict[int, Scope] = {}
        self._cache_lock = threading.Lock()
        self._memory_rows: dict[str, _RowCache] = {}
        self._fact_rows = _RowCache(dims)
        self._corpus_rows = _RowCache(dims)
        self._events: dict[int, tuple[str | None, str]] = {}  # knowledge event -> (source, moment)
        self._memory_ids: deque[int] = deque()  # reserved memory ids, see _reserve_memory_ids

    @staticmethod
    def _check_config(config: EngineConfig) -> None:
        _check_choice(config.chunk_granularity, GRANULARITIES, "chunk_granularity")
        if config.embedding_backend == "local" and config.embedding_model != LOCAL_MODEL:
            raise InvalidArgumentError(
                f"the local backend ships {LOCAL_MODEL} only, not {config.embedding_model!r}")
        dims = config.vector_dimensions
        if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
            raise InvalidArgumentError(f"vector_dimensions must be a positive int, not {dims!r}")

    # ------------------------------------------------------------------
    # lifecycle and connections

    def close(self) -> None:
        """Close the engine's connections (and the database, if the engine opened it)."""
        with self._write_lock, self._pool_lock:
            if self._closed:
                return
            try:
                if self._journal is not None:
                    self._move_journaled(self._writer)
                    self._journal.close()
            finally:
                self._closed = True
                self._close_connections()

    def _close_connections(self) -> None:
        for cursor in [*self._all_readers, self._factory, self._writer]:
            if cursor is not None:
                cursor.close()
        if self._owns_connection:
            try:
                self._root.close()  # closing the database checkpoints it
            finally:
                _release_file(self._file)
                self._file = None

    def __enter__(self) -> NarrativeStateEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @contextmanager
    def _reading(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._pool_lock:
            self._ensure_open()
            if self._idle_readers:
                cursor = self._idle_readers.pop()
            else:
                cursor = self._factory.cursor()
                self._all_readers.append(cursor)
        try:
            yield cursor
        finally:
            with self._pool_lock:
                if not self._closed:
                    self._idle_readers.append(cursor)

    @contextmanager
    def _writing(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._write_lock:
            self._ensure_open()
            yield self._writer

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._writing() as con:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                try:
                    con.execute("ROLLBACK")
                except duckdb.Error:
                    pass  # a failed COMMIT has already ended the transaction
                raise

    def _ensure_open(self) -> None:
        if self._closed:
            raise NarrativeStateError("the narrative state engine is closed")

    def _vector_text(self, vector: np.ndarray) -> str:
        if not np.isfinite(vector).all():
            raise EmbeddingError(f"the {self._embedder.model} embedder returned a non-finite vector")
        return self._vector_format % tuple(vector.tolist())

    def _memory_cache(self, character_id: str) -> _RowCache:
        cache = self._memory_rows.get(character_id)
        if cache is None:
            with self._cache_lock:
                cache = self._memory_rows.setdefault(character_id, _RowCache(self.config.vector_dimensions))
        return cache

    # ------------------------------------------------------------------
    # lookups: validated, cached where the record can never change, read through
    # ``con`` (or a reader cursor) only on a miss

    def _moment_seq(self, moment_id: Any, what: str = "moment",
                    con: duckdb.DuckDBPyConnection | None = None) -> int:
        seq = self._moment_seqs.get(moment_id) if isinstance(moment_id, str) else None
        if seq is not None:
            return seq
        _check_text(moment_id, f"{what} id")
        row = self._fetch_one(con, f"SELECT sequence FROM {SCHEMA}.moments WHERE id = ?", [moment_id])
        if row is None:
            raise UnknownMomentError(f"unknown {what} {moment_id!r}: create_moment it first")
        self._moment_seqs[moment_id] = row[0]
        return row[0]

    def _character(self, character_id: Any,
                   con: duckdb.DuckDBPyConnection | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        found = self._characters.get(character_id) if isinstance(character_id, str) else None
        if found is not None:
            return found
        _check_text(character_id, "character id")
        row = self._fetch_one(con, f"SELECT traits, voice FROM {SCHEMA}.characters WHERE id = ?",
                              [character_id])
        if row is None:
            raise UnknownCharacterError(f"unknown character {character_id!r}: register_character it first")
        found = (_json_dict(row[0]), _json_dict(row[1]))
        self._characters[character_id] = found
        return found

    def _check_fact(self, fact_id: Any, con: duckdb.DuckDBPyConnection | None = None) -> int:
        if fact_id in self._known_facts and not isinstance(fact_id, bool):
            return fact_id
        _check_int(fact_id, "fact id")
        if self._fetch_one(con, f"SELECT 1 FROM {SCHEMA}.facts WHERE id = ?", [fact_id]) is None:
            raise UnknownFactError(f"unknown fact {fact_id!r}: log_fact it first")
        self._known_facts.add(fact_id)
        return fact_id

    def _scope(self, take_id: Any, con: duckdb.DuckDBPyConnection | None = None) -> Scope:
        scope = self._scopes.get(take_id) if isinstance(take_id, int) and not isinstance(take_id, bool) \
            else None
        if scope is not None:
            return scope
        _check_int(take_id, "take id")
        # The spec's recursive ancestry, carrying the compounding branch cutoff: a
        # take's parent is visible below the child's branch point only, the
        # grandparent below the lower of the two branch points, and so on.
        rows = self._fetch_all(con, f"""
            WITH RECURSIVE chain(depth, take_id, parent_id, branch_point, cutoff) AS (
                SELECT 0, id, parent_take_id, branch_point, CAST(NULL AS BIGINT)
                FROM {SCHEMA}.takes WHERE id = ?
              UNION ALL
                SELECT c.depth + 1, t.id, t.parent_take_id, t.branch_point,
                       CASE WHEN c.cutoff IS NULL THEN b.sequence
                            ELSE least(c.cutoff, b.sequence) END
                FROM chain c
                JOIN {SCHEMA}.moments b ON b.id = c.branch_point
                JOIN {SCHEMA}.takes t ON t.id = c.parent_id
            )
            SELECT take_id, cutoff FROM chain ORDER BY depth DESC""", [take_id])
        if not rows:
            raise UnknownTakeError(f"unknown take {take_id!r}: create_take it first")
        scope = tuple((int(t), None if c is None else int(c)) for t, c in rows)
        self._scopes[take_id] = scope
        return scope

    def _fetch_one(self, con: duckdb.DuckDBPyConnection | None, sql: str, params: list[Any]) -> Any:
        if con is not None:
            return con.execute(sql, params).fetchone()
        with self._reading() as cursor:
            return cursor.execute(sql, params).fetchone()

    def _fetch_all(self, con: duckdb.DuckDBPyConnection | None, sql: str, params: list[Any]) -> list[Any]:
        if con is not None:
            return con.execute(sql, params).fetchall()
        with self._reading() as cursor:
            return cursor.execute(sql, params).fetchall()

    @staticmethod
    def _visibility(scope: Scope, moment_seq: int, first: int) -> tuple[Callable[[str], str], list[int]]:
        """The SQL condition "row visible at ``moment_seq`` in the take of ``scope``"
        for a table alias, numbering its parameters from ``$first`` (so that several
        tables of one statement share them), and those parameters."""
        params: list[int] = []
        whens = []
        for take_id, cutoff in scope:
            whens.append(f"WHEN ${first + len(params)} THEN ${first + len(params) + 1}")
            params += [take_id, moment_seq if cutoff is None else min(moment_seq, cutoff - 1)]
        cases = " ".join(whens)
        return (lambda alias: f"{alias}.moment_seq <= (CASE {alias}.take_id {cases} END)"), params

    # ------------------------------------------------------------------
    # moments, takes, characters

    def create_moment(self, id: str, sequence: int, label: str | None = None,
                      metadata: dict[str, Any] | None = None) -> str:
        """Create a temporal marker; ``id`` and ``sequence`` must both be new.
        Returns the moment id."""
        _check_text(id, "moment id")
        if _check_int(sequence, "moment sequence") == _BIGINT_MIN:
            # The visibility bound of a branch at moment M is seq(M) - 1.
            raise InvalidArgumentError(f"moment sequence must be above {_BIGINT_MIN}")
        _check_optional_text(label, "moment label")
        metadata_text = _json_text(metadata, "moment metadata")
        with self._writing() as con:
            if con.execute(f"SELECT 1 FROM {SCHEMA}.moments WHERE id = ?", [id]).fetchone():
                raise DuplicateError(f"moment {id!r} already exists")
            holder = con.execute(f"SELECT id FROM {SCHEMA}.moments WHERE sequence = ?",
                                 [sequence]).fetchone()
            if holder:
                raise DuplicateError(f"sequence {sequence} is already moment {holder[0]!r}")
            try:
                con.execute(f"INSERT INTO {SCHEMA}.moments VALUES (?, ?, ?, ?)",
                            [id, sequence, label, metadata_text])
            except duckdb.ConstraintException as exc:  # another engine on this database won
                raise DuplicateError(f"moment {id!r} or sequence {sequence} already exists") from exc
        self._moment_seqs[id] = sequence
        return id

    def create_take(self, parent_take_id: int | None = None, branch_point: str | None = None,
                    notes: str | None = None) -> int:
        """A root take (no parent, no branch point), or, with a parent, the same
        as ``branch(parent_take_id, branch_point, notes)``. Returns the take id."""
        if parent_take_id is not None:
            return self.branch(parent_take_id, branch_point, notes)  # type: ignore[arg-type]
        if branch_point is not None:
            raise InvalidArgumentError("a root take has no branch point (give parent_take_id to branch)")
        _check_optional_text(notes, "take notes")
        with self._writing() as con:
            row = con.execute(
                f"INSERT INTO {SCHEMA}.takes (created_at, notes) VALUES (?, ?) RETURNING id",
                [_now(), notes]).fetchone()
        return int(row[0])

    def branch(self, parent_take_id: int, branch_point: str, notes: str | None = None) -> int:
        """Retry the story from ``branch_point``: the new take sees the parent's
        history strictly before that moment and never the parent's writes at or
        after it (nor, down a chain, anything its ancestors' branch points cut);
        the parent is untouched. Write to the returned take id from now on."""
        if branch_point is None:
            raise InvalidArgumentError("a branch needs a branch point (the moment it retries from)")
        _check_optional_text(notes, "take notes")
        with self._writing() as con:
            self._scope(parent_take_id, con)  # the parent exists
            self._moment_seq(branch_point, "branch point", con)
            row = con.execute(
                f"INSERT INTO {SCHEMA}.takes (parent_take_id, branch_point, created_at, notes) "
                "VALUES (?, ?, ?, ?) RETURNING id",
                [parent_take_id, branch_point, _now(), notes]).fetchone()
        return int(row[0])

    def list_takes(self, status: str | None = None, moment_id: str | None = None) -> list[Take]:
        """Takes in creation order; ``status`` keeps those of one status,
        ``moment_id`` those branched at that moment."""
        _check_choice(status, TAKE_STATUSES, "take status", optional=True)
        with self._reading() as con:
            if moment_id is not None:
                self._moment_seq(moment_id, con=con)
            rows = con.execute(
                f"SELECT id, parent_take_id, branch_point, created_at, status, notes FROM {SCHEMA}.takes "
                "WHERE (?::VARCHAR IS NULL OR status = ?) AND (?::VARCHAR IS NULL OR branch_point = ?) "
                "ORDER BY id", [status, status, moment_id, moment_id]).fetchall()
        return [Take(int(i), None if p is None else int(p), b, c.isoformat(), s, n)
                for i, p, b, c, s, n in rows]

    def set_take_status(self, take_id: int, status: str) -> None:
        """'active', 'archived' or 'trunk'; management is manual (no automatic GC)."""
        _check_choice(status, TAKE_STATUSES, "take status")
        with self._writing() as con:
            self._scope(take_id, con)
            con.execute(f"UPDATE {SCHEMA}.takes SET status = ? WHERE id = ?", [status, take_id])

    def get_ancestry(self, take_id: int) -> list[int]:
        """Take ids from the root to ``take_id``."""
        self._ensure_open()
        return [t for t, _ in self._scope(take_id)]

    def register_character(self, id: str, name: str, traits: dict[str, Any] | None = None,
                           voice: dict[str, Any] | None = None) -> str:
        """Register a character; its memory is ready at once (rows keyed by its
        id in the shared ``memories`` table). Returns the character id."""
        _check_text(id, "character id")
        _check_text(name, "character name")
        traits_text = _json_text(traits, "traits")
        voice_text = _json_text(voice, "voice")
        with self._writing() as con:
            if con.execute(f"SELECT 1 FROM {SCHEMA}.characters WHERE id = ?", [id]).fetchone():
                raise DuplicateError(f"character {id!r} is already registered")
            try:
                con.execute(f"INSERT INTO {SCHEMA}.characters VALUES (?, ?, ?, ?)",
                            [id, name, traits_text, voice_text])
            except duckdb.ConstraintException as exc:
                raise DuplicateError(f"character {id!r} is already registered") from exc
        self._characters[id] = (_json_dict(traits_text), _json_dict(voice_text))
        return id

    # ------------------------------------------------------------------
    # facts and knowledge

    def log_fact(self, content: str, category: str | None, moment_id: str) -> int:
        """Record a world fact, known to nobody until ``log_knowledge``. It is
        embedded so that a query text can rank it. Returns the fact id."""
        _check_text(content, "fact content")
        _check_optional_text(category, "fact category")
        self._moment_seq(moment_id)
        vector = self._embedder.embed(content)
        with self._writing() as con:
            row = con.execute(
                f"INSERT INTO {SCHEMA}.facts (content, category, created_at, embedding, "
                f"embedding_model, embedding_version) VALUES (?, ?, ?, {self._vector_sql}, ?, ?) "
                "RETURNING id",
                [content, category, moment_id, self._vector_text(vector), self._embedder.model,
                 self._embedder.version]).fetchone()
            fact_id = int(row[0])
            self._fact_rows.add_one(fact_id, vector, (content, category))
        self._known_facts.add(fact_id)
        return fact_id

    def log_knowledge(self, character_id: str, fact_id: int, moment_id: str, take_id: int,
                      source: str | None = None) -> int:
        """Record that a character learned a fact at a moment in a take.
        ``source``: 'witnessed', 'told', 'inferred', 'discovered' or None.

        A character learns a fact once per take (the spec's UNIQUE(character,
        fact, take)): logging it again in the same take returns the existing
        event's id and changes nothing, so the first moment recorded stands.
        Returns the knowledge event id.
        """
        _check_choice(source, KNOWLEDGE_SOURCES, "knowledge source", optional=True)
        with self._writing() as con:
            self._character(character_id, con)
            self._check_fact(fact_id, con)
            seq = self._moment_seq(moment_id, con=con)
            self._scope(take_id, con)
            existing = con.execute(
                f"SELECT id FROM {SCHEMA}.knowledge_events "
                "WHERE character_id = ? AND fact_id = ? AND take_id = ?",
                [character_id, fact_id, take_id]).fetchone()
            if existing:
                return int(existing[0])
            row = con.execute(
                f"INSERT INTO {SCHEMA}.knowledge_events (character_id, fact_id, moment_id, "
                "moment_seq, take_id, source) VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                [character_id, fact_id, moment_id, seq, take_id, source]).fetchone()
            self._events[int(row[0])] = (source, moment_id)
        return int(row[0])

    # ------------------------------------------------------------------
    # experiential memory

    def embed_memory(self, character_id: str, chunk: str, moment_id: str, take_id: int,
                     chunk_type: str, tags: dict[str, Any] | None = None) -> int:
        """Store one experience of a character. ``chunk_type``: 'said', 'heard',
        'internal', 'perceived' or 'action'. The same text twice is kept twice.
        Returns the memory id."""
        ids = self._write_memories(
            [(character_id, chunk_type, _json_text(tags, "tags"))], chunk, moment_id, take_id)
        return ids[0]

    def dialogue(self, speaker: str, content: str, moment_id: str, take_id: int,
                 listeners: list[str] | None = None, speaker_tags: dict[str, Any] | None = None,
                 listener_tags: dict[str, Any] | None = None) -> dict[str, Any]:
        """One line of dialogue: the speaker's 'said' memory and each listener's
        'heard', embedded once and written together (all or nothing).

        Returns ``{"speaker_memory_id": int, "listener_memory_ids": [int, ...]}``,
        listener ids in the order of ``listeners``.
        """
        listeners = list(listeners or [])
        if speaker in listeners:
            raise InvalidArgumentError(f"speaker {speaker!r} cannot also be a listener")
        if len(set(listeners)) != len(listeners):
            raise InvalidArgumentError(f"a listener appears twice in {listeners!r}")
        listener_text = _json_text(listener_tags, "listener_tags")
        rows = [(speaker, "said", _json_text(speaker_tags, "speaker_tags"))]
        rows += [(listener, "heard", listener_text) for listener in listeners]
        ids = self._write_memories(rows, content, moment_id, take_id)
        return {"speaker_memory_id": ids[0], "listener_memory_ids": ids[1:]}

    def _write_memories(self, rows: list[tuple[str, str, str | None]], chunk: str, moment_id: str,
                        take_id: int) -> list[int]:
        """Store ``chunk`` once per (character, chunk_type, tags) row in one
        statement (atomic); validate everything before writing."""
        _check_text(chunk, "memory chunk")
        for character_id, chunk_type, _ in rows:
            self._character(character_id)
            _check_choice(chunk_type, CHUNK_TYPES, "chunk_type")
        seq = self._moment_seq(moment_id)
        self._scope(take_id)
        vector = self._embedder.embed(chunk)  # outside the write lock: a model takes its time
        if not np.isfinite(vector).all():  # refused before anything is written
            raise EmbeddingError(f"the {self._embedder.model} embedder returned a non-finite vector")
        blob = np.asarray(vector, dtype=np.float32).tobytes()
        model, version = self._embedder.model, self._embedder.version
        with self._writing() as con:
            ids = self._reserve_memory_ids(con, len(rows))
            written = [JournalRow(memory_id, character_id, chunk, blob, model, version, moment_id,
                                  seq, take_id, chunk_type, tags)
                       for memory_id, (character_id, chunk_type, tags) in zip(ids, rows)]
            if self._journal is None:
                self._insert_memories(con, written)
            else:
                self._journal.append(written)
                if len(self._journal) >= _JOURNAL_FLUSH_ROWS:
                    self._move_journaled(con)
            # Durable: cache the rows (under the lock, so in id order) so that
            # queries need not read the vectors back.
            for memory_id, (character_id, chunk_type, tags) in zip(ids, rows):
                self._memory_cache(character_id).add_one(memory_id, vector,
                                                         (chunk, chunk_type, tags, moment_id))
        return ids

    def _insert_memories(self, con: duckdb.DuckDBPyConnection, rows: Sequence[JournalRow]) -> None:
        """One literal statement (no parameters: half the cost, see db.literal), so
        the rows are written all or none."""
        values = ", ".join(
            f"({r.id}, {literal(r.character_id)}, {literal(r.chunk)}, "
            f"string_split('{self._vector_text(np.frombuffer(r.vector, dtype=np.float32))}', ',')"
            f"::FLOAT[{self.config.vector_dimensions}], "
            + ", ".join(literal(v) for v in (r.embedding_model, r.embedding_version, r.moment_id,
                                             r.moment_seq, r.take_id, r.chunk_type, r.tags)) + ")"
            for r in rows)
        con.execute(f"INSERT INTO {SCHEMA}.memories (id, character_id, chunk, embedding, "
                    "embedding_model, embedding_version, moment_id, moment_seq, take_id, "
                    f"chunk_type, tags) VALUES {values}")

    def _move_journaled(self, con: duckdb.DuckDBPyConnection, replay: bool = False) -> None:
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
            self._insert_memories(con, rows)
        self._journal.clear()

    def _publish_memories(self) -> None:
        """Journaled memories into DuckDB, so that a query's SQL sees them."""
        if self._journal is not None and len(self._journal):
            with self._writing() as con:
                self._move_journaled(con)

    def _reserve_memory_ids(self, con: duckdb.DuckDBPyConnection, n: int) -> list[int]:
        """Ids from the memories sequence, reserved in blocks (the write lock is held).

        An INSERT ... RETURNING costs ~0.25 ms more than a plain INSERT, a fifth of
        the whole write; a block of ids costs one query per 64 memories. Ids stay
        unique (the sequence hands each out once) and grow in write order within
        an engine; ids reserved but never used are gaps, as after a rollback."""
        while len(self._memory_ids) < n:
            block = con.execute(f"SELECT nextval('{SCHEMA}.memories_id_seq') FROM range(64)").fetchall()
            self._memory_ids.extend(sorted(int(r[0]) for r in block))
        return [self._memory_ids.popleft() for _ in range(n)]

    # ------------------------------------------------------------------
    # the character's view

    def query_state(self, character_id: str, moment_id: str, take_id: int,
                    query_text: str | None = None, fact_limit: int = 50, memory_limit: int = 20,
                    include_corpus: bool = True, corpus_limit: int = 20,
                    corpus_category: str | None = None,
                    corpus_version: str | None = None) -> CharacterState:
        """Everything ``character_id`` knows and has experienced up to
        ``moment_id`` in ``take_id``: facts and memories gated by character,
        moment and take (see the module docstring), and the ungated corpus.

        With ``query_text``, each tier is ranked by cosine similarity to it (facts
        by their content) and results carry ``score``; without, facts and memories
        come in story order (moment sequence, then id) and the corpus newest
        first. A fact learned more than once in the visible history is reported
        once, as first learned.
        """
        for limit, what in ((fact_limit, "fact_limit"), (memory_limit, "memory_limit"),
                            (corpus_limit, "corpus_limit")):
            _check_limit(limit, what)
        if query_text is not None:
            _check_text(query_text, "query_text", allow_empty=True)
        for value, what in ((corpus_category, "corpus_category"), (corpus_version, "corpus_version")):
            _check_optional_text(value, what)
        traits, voice = self._character(character_id)
        seq = self._moment_seq(moment_id)
        scope = self._scope(take_id)
        query = None if query_text is None else _unit(self._embedder.embed(query_text)[None, :])[0]
        self._publish_memories()
        with self._reading() as con:
            tier, ids, seqs, events = self._candidates(
                con, character_id, scope, seq, include_corpus, corpus_category, corpus_version)
            memories = self._pick_memories(con, character_id, ids[tier == 0], seqs[tier == 0], query,
                                           memory_limit)
            facts = self._pick_facts(con, ids[tier == 1], seqs[tier == 1], events[tier == 1], query,
                                     fact_limit)
            corpus = self._pick_corpus(con, ids[tier == 2], query, corpus_limit) if include_corpus else []
        return CharacterState(character_id=character_id, moment_id=moment_id, take_id=take_id,
                              facts=facts, memories=memories, corpus=corpus,
                              traits=dict(traits), voice=dict(voice))

    def _candidates(self, con: duckdb.DuckDBPyConnection, character_id: str, scope: Scope, seq: int,
                    include_corpus: bool, category: str | None, version: str | None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every row the query may see, in one statement (each costs ~0.3 ms before
        it does anything): tier 0 memories (id, seq), tier 1 knowledge events
        (fact id, seq, event id), tier 2 corpus chunks (id). This is where the
        visibility rule is enforced, against the database, on every query."""
        visible, scope_params = self._visibility(scope, seq, 2)
        params: list[Any] = [character_id, *scope_params]
        sql = (f"SELECT 0 AS tier, m.id, m.moment_seq AS seq, 0 AS event FROM {SCHEMA}.memories m "
               f"WHERE m.character_id = $1 AND {visible('m')} "
               f"UNION ALL SELECT 1, k.fact_id, k.moment_seq, k.id FROM {SCHEMA}.knowledge_events k "
               f"WHERE k.character_id = $1 AND {visible('k')}")
        if include_corpus:
            cat, ver = len(params) + 1, len(params) + 2
            sql += (f" UNION ALL SELECT 2, c.id, 0, 0 FROM {SCHEMA}.corpus c "
                    f"WHERE (${cat}::VARCHAR IS NULL OR c.category = ${cat}) "
                    f"AND (${ver}::VARCHAR IS NULL OR c.version = ${ver})")
            params += [category, version]
        found = con.execute(sql, params).fetchnumpy()
        return tuple(np.asarray(found[name], dtype=np.int64) for name in ("tier", "id", "seq", "event"))

    @staticmethod
    def _corpus_filter(category: str | None, version: str | None,
                       source: str | None) -> tuple[str, list[Any]]:
        return ("(?::VARCHAR IS NULL OR c.category = ?) AND (?::VARCHAR IS NULL OR c.version = ?) "
                "AND (?::VARCHAR IS NULL OR c.source = ?)",
                [category, category, version, version, source, source])

    def _pick_memories(self, con: duckdb.DuckDBPyConnection, character_id: str, ids: np.ndarray,
                       seqs: np.ndarray, query: np.ndarray | None, limit: int) -> list[Memory]:
        if not len(ids) or not limit:
            return []
        cache = self._memory_cache(character_id)

        def fill(c: duckdb.DuckDBPyConnection, missing: list[int]) -> None:
            self._fill(c, cache, "memories", _MEMORY_FIELDS, missing, "character_id = ?", [character_id])

        if query is None:
            chosen, scores = _top(limit, seqs, ids), None
        else:
            scores = self._scores(con, cache, ids, query, fill)
            chosen = _top(limit, -scores, seqs, ids)
        records = self._records(con, cache, ids[chosen], fill)
        return [Memory(int(ids[i]), chunk, chunk_type, _json_dict(tags), moment,
                       None if scores is None else float(scores[i]))
                for i, (chunk, chunk_type, tags, moment) in zip(chosen, records)]

    def _pick_facts(self, con: duckdb.DuckDBPyConnection, fact_ids: np.ndarray, seqs: np.ndarray,
                    events: np.ndarray, query: np.ndarray | None, limit: int) -> list[Fact]:
        if not len(fact_ids) or not limit:
            return []
        # A fact learned more than once in the visible history counts once, as first learned.
        order = np.lexsort((events, seqs, fact_ids))
        first = order[np.unique(fact_ids[order], return_index=True)[1]]
        fact_ids, seqs, events = fact_ids[first], seqs[first], events[first]
        if query is None:
            chosen, scores = _top(limit, seqs, fact_ids), None
        else:
            scores = self._scores(con, self._fact_rows, fact_ids, query, self._fill_facts)
            chosen = _top(limit, -scores, seqs, fact_ids)
        records = self._records(con, self._fact_rows, fact_ids[chosen], self._fill_facts)
        learned = self._events_of(con, events[chosen])
        return [Fact(int(fact_ids[i]), content, category, source, moment,
                     None if scores is None else float(scores[i]))
                for i, (content, category), (source, moment) in zip(chosen, records, learned)]

    def _events_of(self, con: duckdb.DuckDBPyConnection, events: np.ndarray) -> list[tuple[str | None, str]]:
        """(source, moment id) of knowledge events, cached: an event never changes."""
        wanted = [int(e) for e in events]
        missing = [e for e in wanted if e not in self._events]
        if missing:
            rows = con.execute(f"SELECT id, source, moment_id FROM {SCHEMA}.knowledge_events "
                               "WHERE id IN (SELECT unnest(?::BIGINT[]))", [missing]).fetchall()
            for event, source, moment in rows:
                self._events[int(event)] = (source, moment)
        return [self._events[e] for e in wanted]

    def _pick_corpus(self, con: duckdb.DuckDBPyConnection, ids: np.ndarray, query: np.ndarray | None,
                     limit: int) -> list[CorpusChunk]:
        if not len(ids) or not limit:
            return []
        if query is None:
            chosen, scores = _top(limit, -ids), None  # newest first: ids grow with time
        else:
            scores = self._scores(con, self._corpus_rows, ids, query, self._fill_corpus)
            chosen = _top(limit, -scores, ids)
        records = self._records(con, self._corpus_rows, ids[chosen], self._fill_corpus)
        return [CorpusChunk(int(ids[i]), content, source, section, category, version, _json_dict(meta),
                            None if scores is None else float(scores[i]))
                for i, (content, source, section, category, version, meta) in zip(chosen, records)]

    # ------------------------------------------------------------------
    # the cache of immutable rows

    def _scores(self, con: duckdb.DuckDBPyConnection, cache: _RowCache, ids: np.ndarray,
                query: np.ndarray, fill: Callable[[duckdb.DuckDBPyConnection, list[int]], None]
                ) -> np.ndarray:
        """Cosine similarity to the unit ``query`` of each row of ``ids``."""
        positions, vectors, _ = self._cached(con, cache, ids, fill)
        if len(ids) * 4 >= len(vectors):
            return _dot(vectors, query)[positions]  # most rows: one pass, no gather
        return _dot(vectors[positions], query)

    def _records(self, con: duckdb.DuckDBPyConnection, cache: _RowCache, ids: np.ndarray,
                 fill: Callable[[duckdb.DuckDBPyConnection, list[int]], None]) -> list[tuple[Any, ...]]:
        positions, _, records = self._cached(con, cache, ids, fill)
        return [records[p] for p in positions.tolist()]

    @staticmethod
    def _cached(con: duckdb.DuckDBPyConnection, cache: _RowCache, ids: np.ndarray,
                fill: Callable[[duckdb.DuckDBPyConnection, list[int]], None]
                ) -> tuple[np.ndarray, np.ndarray, list[tuple[Any, ...]]]:
        """Positions of ``ids`` in a cache snapshot, reading missing rows first."""
        cached_ids, vectors, records = cache.snapshot()
        positions = _locate(cached_ids, ids)
        if positions is None:
            fill(con, cache.missing(ids))
            cached_ids, vectors, records = cache.snapshot()
            positions = _locate(cached_ids, ids)
            if positions is None:  # a candidate row vanished between two statements
                raise NarrativeStateError("rows changed while being read; retry the query")
        return positions, vectors, records

    def _fill(self, con: duckdb.DuckDBPyConnection, cache: _RowCache, table: str,
              fields: tuple[str, ...], missing: list[int], group_sql: str, group_params: list[Any]
              ) -> None:
        """Read rows the cache lacks (a few by id, else the whole group) with their vectors."""
        if len(missing) <= _FILL_BY_ID_MAX:
            where, params = "id IN (SELECT unnest(?::BIGINT[]))", [missing]
        else:
            where, params = group_sql, group_params
        found = con.execute(f"SELECT id, embedding, {', '.join(fields)} FROM {SCHEMA}.{table} "
                            f"WHERE {where}", params).fetchnumpy()
        if not len(found["id"]):
            return
        vectors = np.stack(found["embedding"]).astype(np.float32)
        records = list(zip(*(found[f].tolist() for f in fields)))
        cache.add(found["id"].tolist(), vectors, records)

    def _fill_facts(self, con: duckdb.DuckDBPyConnection, missing: list[int]) -> None:
        self._fill(con, self._fact_rows, "facts", _FACT_FIELDS, missing, "true", [])

    def _fill_corpus(self, con: duckdb.DuckDBPyConnection, missing: list[int]) -> None:
        self._fill(con, self._corpus_rows, "corpus", _CORPUS_FIELDS, missing, "true", [])

    # ------------------------------------------------------------------
    # corpus: shared canon, ungated

    def load_corpus_chunk(self, content: str, source: str, section: str | None = None,
                          category: str | None = None, version: str | None = None,
                          metadata: dict[str, Any] | None = None) -> int:
        """Add one chunk to the shared corpus. Returns its id."""
        return self._insert_corpus([content], [section], source, category, version, metadata)[0]

    def load_document(self, filepath: str | Path, source: str, category: str | None,
                      version: str | None = None, chunker: str | Chunker | None = None,
                      metadata: dict[str, Any] | None = None) -> list[int]:
        """Read a UTF-8 file, split it, embed every chunk in one batch and store
        them all in one transaction. ``chunker``: a granularity of
        ``chunking.GRANULARITIES`` (None: ``config.chunk_granularity``), or a
        function from the text to its chunks. Each chunk's ``section`` says where
        it was ("paragraph 3", "page 2", a beat's heading). Returns the new ids in
        document order."""
        _check_text(source, "corpus source")
        path = Path(filepath)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgumentError(f"cannot read document {str(path)!r}: {exc}") from exc
        if callable(chunker):
            contents = [str(p).strip() for p in chunker(text) if str(p).strip()]
            sections: list[str | None] = [f"chunk {i}" for i in range(1, len(contents) + 1)]
        else:
            chunks = chunk_text(text, chunker if chunker is not None else self.config.chunk_granularity)
            contents, sections = [c.text for c in chunks], [c.section for c in chunks]
        if not contents:
            return []
        return self._insert_corpus(contents, sections, source, category, version, metadata)

    def _insert_corpus(self, contents: list[str], sections: list[str | None], source: str,
                       category: str | None, version: str | None,
                       metadata: dict[str, Any] | None) -> list[int]:
        for content in contents:
            _check_text(content, "corpus content")
        _check_text(source, "corpus source")
        for value, what in ((category, "corpus category"), (version, "corpus version"),
                            *((s, "corpus section") for s in sections)):
            _check_optional_text(value, what)
        metadata_text = _json_text(metadata, "corpus metadata")
        vectors = self._embedder.embed_batch(contents)
        texts = [self._vector_text(v) for v in vectors]
        with self._transaction() as con:
            # Ids first, so they come back in document order whatever order the
            # bulk insert writes rows in.
            ids = sorted(int(r[0]) for r in con.execute(
                f"SELECT nextval('{SCHEMA}.corpus_id_seq') FROM range(?)", [len(contents)]).fetchall())
            con.execute(f"""
                INSERT INTO {SCHEMA}.corpus (id, content, source, section, category, version,
                    created_at, metadata, embedding, embedding_model, embedding_version)
                SELECT r.id, r.content, ?, r.section, ?, ?, ?, ?,
                       string_split(r.vector, ',')::FLOAT[{self.config.vector_dimensions}], ?, ?
                FROM (SELECT unnest(?::BIGINT[]) AS id, unnest(?::VARCHAR[]) AS content,
                             unnest(?::VARCHAR[]) AS section, unnest(?::VARCHAR[]) AS vector) r""",
                [source, category, version, _now(), metadata_text, self._embedder.model,
                 self._embedder.version, ids, contents, sections, texts])
            self._corpus_rows.add(ids, vectors, [(c, source, s, category, version, metadata_text)
                                                 for c, s in zip(contents, sections)])
        return ids

    def query_corpus(self, query_text: str, category: str | None = None, version: str | None = None,
                     source: str | None = None, limit: int = 20) -> list[CorpusChunk]:
        """Corpus chunks most similar to ``query_text``, optionally only of one
        category, version and source."""
        _check_text(query_text, "query_text", allow_empty=True)
        _check_limit(limit, "limit")
        for value, what in ((category, "category"), (version, "version"), (source, "source")):
            _check_optional_text(value, what)
        query = _unit(self._embedder.embed(query_text)[None, :])[0]
        where, params = self._corpus_filter(category, version, source)
        with self._reading() as con:
            ids = con.execute(f"SELECT c.id FROM {SCHEMA}.corpus c WHERE {where}", params).fetchnumpy()["id"]
            return self._pick_corpus(con, np.asarray(ids, dtype=np.int64), query, limit)

    def delete_corpus_version(self, source: str, version: str | None) -> int:
        """Delete every chunk of one source and version (None: the unversioned
        ones). Returns how many were deleted."""
        _check_text(source, "corpus source")
        _check_optional_text(version, "corpus version")
        with self._writing() as con:
            row = con.execute(
                f"DELETE FROM {SCHEMA}.corpus WHERE source = ? AND version IS NOT DISTINCT FROM ?",
                [source, version]).fetchone()
        return int(row[0])
