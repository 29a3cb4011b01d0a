"""The persistence layer skills use (docs/store.md).

``PersistenceStore`` owns the tables, the embedder, the write lock and the query
monitor, and has no record methods of its own: every read and write goes through
``store.playthrough(id)``, a ``Playthrough`` scope whose SQL is built by
``filters.scoped_where`` and always binds ``playthrough_id = ?``. Forgetting the
playthrough is therefore not expressible.

Concurrency (docs/store.md, "Durability and concurrency"). A DuckDB connection is not thread-safe, so:

- writes go through one writer cursor under a lock, one transaction per call
  (``store_many`` included: the whole batch or nothing). Writers queue behind
  each other; embedding happens before the lock is taken, so the lock is held
  only for the SQL;
- reads go through a cursor per thread (``con.cursor()`` is a connection of its
  own to the same database) and take no lock at all. DuckDB's MVCC gives each
  statement a snapshot of committed data, so a reader never waits for a writer
  and never sees a half-written row or half a batch.

Search scores vectors in NumPy, from an exact in-memory copy that every query
checks against the database (``vector_cache.py``): ~1.5 ms for 10,000 vectors
where DuckDB's array_cosine_similarity takes 12-25 ms.

Durability. A call returns after its transaction committed, and a
commit is in DuckDB's write-ahead log, so a process killed right after a call
returned loses nothing; reopening replays the log.
"""

from __future__ import annotations

import math
import threading
import time
import uuid
import weakref
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import duckdb
import msgspec
import numpy as np

from narratoria.runtime.db import connect, migrate, transaction
from narratoria.runtime.embedding import EmbeddingBackend
from narratoria.runtime.store.decay import DecayPolicy, decayed
from narratoria.runtime.store.filters import Filters, given, scoped_where, to_filters
from narratoria.runtime.store.monitor import QueryMonitor
from narratoria.runtime.store.records import (
    DERIVED_FIELDS,
    UTC,
    DataType,
    Record,
    RecordError,
    camel,
    parse_data_type,
    to_record,
)
from narratoria.runtime.store.retention import RetentionPolicy, RetentionResult, apply_policy
from narratoria.runtime.store.rows import from_row, insert_many, insert_one, quoted, to_row, vector_text
from narratoria.runtime.store.schema import (
    COMPONENT,
    COMPUTED_FIELDS,
    EMBEDDING_SEQ,
    SPECS,
    TableSpec,
    migrations,
    stored_dimensions,
)
from narratoria.runtime.store.vector_cache import VectorCache

# all-MiniLM-L6-v2 scores related short texts 0.13-0.5 and unrelated ones mostly
# below 0.1 (README, "Semantic search threshold"); the spec's 0.7 returns nothing.
DEFAULT_MIN_SCORE = 0.15

# Scores kept in a range by their record type; adjust_score clamps into it.
SCORE_RANGE: dict[DataType, tuple[float, float]] = {DataType.NPC_PERCEPTION: (-100.0, 100.0)}


class StoreError(RuntimeError):
    pass


class RecordNotFound(LookupError):
    pass


class DuplicateRecord(ValueError):
    pass


@dataclass(frozen=True)
class StoreConfig:
    min_score: float = DEFAULT_MIN_SCORE  # semantic_search's default similarity threshold
    reputation_decay: DecayPolicy = DecayPolicy()
    perception_decay: DecayPolicy = DecayPolicy()
    retention: tuple[RetentionPolicy, ...] = ()  # what run_idle_maintenance applies
    monitor_capacity: int = 1000
    slow_query_ms: float = 200.0
    embed_batch_size: int = 256  # texts per embedder call in store_many
    vector_cache_rows: int = 100_000  # vectors kept in memory for search (~150 MB at 384-d)


@dataclass(frozen=True)
class Pace:
    """How a background job embeds: ``batch`` texts a call, then a rest of ``rest`` times
    the call's own duration, so that others' requests reach the embedder in between."""

    batch: int
    rest: float = 0.0


class Hit(msgspec.Struct, frozen=True):
    record: Record
    score: float  # cosine similarity to the query, -1..1


class ScoreChange(msgspec.Struct, frozen=True):
    """One change of ``Playthrough.adjust_scores``: add ``delta`` to ``key``'s score.

    ``minimum``/``maximum`` (optional, finite, ``minimum <= maximum``) are the
    caller's scale: the current score is read as clamped into it and the new one
    is clamped into it after the store's own clamp. ``decay_rate`` (optional,
    0-1) is stored on the record as its own rate of decay; unset, the record's
    rate is left as it is. Validated by ``adjust_scores`` (``RecordError``).
    """

    key: str
    delta: float
    minimum: float | None = None
    maximum: float | None = None
    decay_rate: float | None = None


def _utc_now() -> datetime:
    return datetime.now(UTC)


class PersistenceStore:
    def __init__(self, db: str | Path | duckdb.DuckDBPyConnection, embedder: EmbeddingBackend, *,
                 config: StoreConfig = StoreConfig(),
                 clock: Callable[[], datetime] = _utc_now) -> None:
        """Open (or share) the database and bring the persistence tables up to date.

        Given a connection (the narrative state engine's, say), the store makes
        its own cursors from it and leaves it open on ``close``; given a path, it
        opens the file and closes it on ``close``.
        """
        self._owns_connection = not isinstance(db, duckdb.DuckDBPyConnection)
        self._con = connect(db) if self._owns_connection else db
        self.config = config
        self.monitor = QueryMonitor(config.monitor_capacity, config.slow_query_ms)
        self._embedder = embedder
        self._clock = clock
        try:
            self.schema_version = migrate(self._con, COMPONENT, migrations(embedder.dimensions))
            self.dimensions = stored_dimensions(self._con)
        except BaseException:
            self._close_owned()
            raise
        if self.dimensions != embedder.dimensions:
            self._close_owned()
            raise StoreError(f"the database holds {self.dimensions}-d vectors; embedder "
                             f"{embedder.model} gives {embedder.dimensions}-d")
        self._closed = False
        # Weak: a finished thread's read cursor is freed with its thread-local, not hoarded.
        self._cursors: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()
        self._cursor_lock = threading.Lock()
        self._local = threading.local()
        self._write_lock = threading.Lock()
        self._writer = self._new_cursor()
        self._vectors = VectorCache(self.dimensions, config.vector_cache_rows)

    # -- scopes and maintenance ------------------------------------------------------

    def playthrough(self, playthrough_id: str) -> Playthrough:
        """The only way in: a view of the store bound to one playthrough."""
        return Playthrough(self, playthrough_id)

    def playthrough_ids(self, data_type: DataType | str | None = None) -> list[str]:
        """Playthroughs with any stored record (of ``data_type``, if given)."""
        types = [parse_data_type(data_type)] if data_type is not None else list(SPECS)
        union = " UNION ".join(f"SELECT DISTINCT playthrough_id FROM {SPECS[t].table}" for t in types)
        return sorted(r[0] for r in self._reader().execute(union).fetchall())

    def apply_retention(self, policies: Sequence[RetentionPolicy] | None = None,
                        playthrough_ids: Sequence[str] | None = None) -> list[RetentionResult]:
        """Run ``policies`` (default: the configured ones) in each playthrough, in one transaction."""
        policies = self.config.retention if policies is None else tuple(policies)
        now = self._now()
        results: list[RetentionResult] = []
        with self.monitor.measure("retention", ",".join(p.data_type.value for p in policies),
                                  None if playthrough_ids is None else ",".join(playthrough_ids)) as stat:
            with self._transaction() as cur:
                for policy in policies:
                    ids = playthrough_ids if playthrough_ids is not None else \
                        self.playthrough_ids(policy.data_type)
                    for playthrough_id in ids:
                        results += apply_policy(cur, policy, playthrough_id, now, self.dimensions)
            stat.result_count = sum(r.deleted for r in results)
        return results

    def run_idle_maintenance(self) -> list[RetentionResult]:
        """What the daemon's idle loop calls: the configured retention policies, nothing else."""
        return self.apply_retention() if self.config.retention else []

    @property
    def embedder(self) -> EmbeddingBackend:
        return self._embedder

    def close(self) -> None:
        with self._cursor_lock:
            if self._closed:
                return
            self._closed = True
            for cursor in list(self._cursors):
                cursor.close()
            self._cursors.clear()
        self._close_owned()

    def __enter__(self) -> PersistenceStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing shared by the scopes --------------------------------------------------

    def _close_owned(self) -> None:
        if self._owns_connection:
            self._con.close()

    def _new_cursor(self) -> duckdb.DuckDBPyConnection:
        with self._cursor_lock:
            if self._closed:
                raise StoreError("the persistence store is closed")
            cursor = self._con.cursor()
            self._cursors.add(cursor)
            return cursor

    def _reader(self) -> duckdb.DuckDBPyConnection:
        """This thread's read cursor; reads take no lock (MVCC snapshots)."""
        if self._closed:
            raise StoreError("the persistence store is closed")
        cursor = getattr(self._local, "cursor", None)
        if cursor is None:
            cursor = self._local.cursor = self._new_cursor()
        return cursor

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The writer cursor in a transaction, under the write lock; rolled back on any error."""
        with self._write_lock:
            if self._closed:
                raise StoreError("the persistence store is closed")
            with transaction(self._writer) as cursor:
                yield cursor

    def _embed(self, texts: list[str], pace: Pace | None = None) -> np.ndarray:
        """Vectors of ``texts``: embedder calls of ``embed_batch_size`` texts, or of
        ``pace.batch`` with a rest after each (a background job sharing the embedder)."""
        size = max(1, pace.batch if pace is not None else self.config.embed_batch_size)
        parts = []
        for i in range(0, len(texts), size):
            began = time.monotonic()
            parts.append(self._embedder.embed_batch(texts[i:i + size]))
            if pace is not None and pace.rest > 0 and i + size < len(texts):
                time.sleep((time.monotonic() - began) * pace.rest)
        vectors = np.vstack(parts) if parts else np.zeros((0, self.dimensions), dtype=np.float32)
        if vectors.shape != (len(texts), self.dimensions):
            raise StoreError(f"embedder {self._embedder.model} returned shape {vectors.shape}, "
                             f"expected ({len(texts)}, {self.dimensions})")
        return vectors

    @property
    def _model(self) -> tuple[str, str]:
        return self._embedder.model, self._embedder.version

    def _now(self) -> datetime:
        now = self._clock()
        return now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)

    def _decay_policy(self, data_type: DataType) -> DecayPolicy:
        if data_type is DataType.FACTION_REPUTATION:
            return self.config.reputation_decay
        return self.config.perception_decay


class Playthrough:
    """The store's query interface (docs/store.md, "Search"), bound to one playthrough."""

    def __init__(self, store: PersistenceStore, playthrough_id: str) -> None:
        if not isinstance(playthrough_id, str) or not playthrough_id.strip():
            raise RecordError(f"playthroughId: must be a non-empty string, got {playthrough_id!r}")
        self._store = store
        self._id = playthrough_id

    @property
    def id(self) -> str:
        return self._id

    # -- reads ----------------------------------------------------------------------------

    def semantic_search(self, query: str, data_type: DataType | str, limit: int = 5,
                        filters: Filters | Mapping[str, Any] | None = None, *,
                        min_score: float | None = None) -> list[Hit]:
        """Records ranked by cosine similarity to ``query``, best first, at least ``min_score``.

        Exact: every row the filters leave is scored (no approximate index can
        drop an in-scope row); ties go to the earlier-stored vector. Only vectors
        of the current embedding model are compared; another model's vectors
        live in another space (see ``reembed``).
        """
        spec = _spec(data_type)
        if spec.text_field is None:
            raise RecordError(f"dataType: {spec.data_type.value} has no embedded text; use exact_match")
        if not isinstance(query, str) or not query.strip():
            raise RecordError(f"query: must be a non-empty string, got {query!r}")
        _check_limit(limit, allow_none=False)
        threshold = self._store.config.min_score if min_score is None else float(min_score)
        flt = to_filters(filters)
        store = self._store
        with store.monitor.measure("semantic_search", spec.data_type.value, self._id,
                                   given(flt), limit) as stat:
            where, params = scoped_where(spec.data_type, self._id, flt)
            started = time.perf_counter()
            vector = store._embedder.embed(query)
            stat.embed_ms = (time.perf_counter() - started) * 1000.0
            hits = self._ranked(spec, where, params, vector, limit, threshold)
            stat.result_count = len(hits)
        return hits

    def _ranked(self, spec: TableSpec, where: str, params: list[Any], query: np.ndarray, limit: int,
                threshold: float) -> list[Hit]:
        """Score every in-scope row, keep the best ``limit`` at or above ``threshold``, fetch them.

        DuckDB names the in-scope vectors (their ``embedding_seq``), NumPy scores
        them (``vector_cache``), DuckDB returns the chosen records. Those are two
        snapshots: a chosen row changed or deleted in between comes back missing,
        and the ranking is redone from a fresh snapshot.
        """
        store = self._store
        cur = store._reader()
        model = store._model[0]
        columns = quoted(spec.columns)
        hits: list[Hit] = []
        for _ in range(3):
            live = np.asarray(cur.execute(
                f"SELECT embedding_seq FROM {spec.table} WHERE {where} AND embedding_model = ?",
                params + [model]).fetchnumpy()["embedding_seq"], dtype=np.int64)
            if not len(live):
                return []
            scores = store._vectors.similarities(cur, spec, self._id, model, live, query)
            best = np.lexsort((live, -scores))[:limit]
            best = best[scores[best] >= threshold]
            if not len(best):
                return []
            seqs = live[best].tolist()
            # The seqs travel as one text parameter: DuckDB's binding costs ~0.5 ms
            # a parameter here (it retries importing pandas for each one).
            rows = cur.execute(
                f"SELECT {columns}, embedding_seq FROM {spec.table} WHERE {where}"
                f" AND list_contains(string_split(?, ',')::BIGINT[], embedding_seq)",
                params + [",".join(map(str, seqs))]).fetchall()
            found = {row[-1]: from_row(spec, row[:-1]) for row in rows}
            hits = [Hit(found[seq], float(scores[i])) for seq, i in zip(seqs, best) if seq in found]
            if len(hits) == len(seqs):
                break
        return hits

    def exact_match(self, data_type: DataType | str,
                    filters: Filters | Mapping[str, Any] | None = None, *,
                    limit: int | None = None) -> list[Record]:
        """Records matching every filter, newest first (by the type's time column).

        Reputation and perception records come with ``decayed_score`` computed
        for now; the stored score is untouched.
        """
        spec = _spec(data_type)
        _check_limit(limit, allow_none=True)
        flt = to_filters(filters)
        store = self._store
        with store.monitor.measure("exact_match", spec.data_type.value, self._id,
                                   given(flt), limit) as stat:
            where, params = scoped_where(spec.data_type, self._id, flt)
            sql = (f"SELECT {quoted(spec.columns)} FROM {spec.table} WHERE {where}"
                   f' ORDER BY "{spec.time_column}" DESC, "{spec.key}"')
            if limit is not None:
                sql, params = sql + " LIMIT ?", params + [limit]
            rows = store._reader().execute(sql, params).fetchall()
            records = self._decayed([from_row(spec, row) for row in rows], spec)
            stat.result_count = len(records)
        return records

    def get(self, data_type: DataType | str, key: str) -> Record | None:
        """One record by its key (``id``, or the faction, NPC, character or session id)."""
        spec = _spec(data_type)
        _check_key(spec, key)
        store = self._store
        with store.monitor.measure("get", spec.data_type.value, self._id, {spec.key: key}) as stat:
            where, params = scoped_where(spec.data_type, self._id)
            row = store._reader().execute(
                f'SELECT {quoted(spec.columns)} FROM {spec.table} WHERE {where} AND "{spec.key}" = ?',
                params + [key]).fetchone()
            stat.result_count = int(row is not None)
        return None if row is None else self._decayed([from_row(spec, row)], spec)[0]

    # -- writes ---------------------------------------------------------------------------

    def store(self, data_type: DataType | str, record: Record | Mapping[str, Any], *,
              with_write: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
              write_guard: AbstractContextManager[Any] | None = None) -> Record:
        """Persist one new record atomically; returns it as ``get`` would (key, id filled in).

        ``with_write`` runs first in the same transaction (on the same database): the
        record is stored only if that write succeeds, and that write only if the record
        is stored -- a scene's memory and the turn it remembers. ``write_guard`` (a lock
        the other write's rows need) is held from before that transaction begins until
        it ends, and not while the text is embedded."""
        return self._insert(data_type, [record], "store", first=with_write, guard=write_guard)[0]

    def store_many(self, data_type: DataType | str,
                   records: Sequence[Record | Mapping[str, Any]], *,
                   pace: Pace | None = None,
                   with_write: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
                   write_guard: AbstractContextManager[Any] | None = None,
                   ) -> list[Record]:
        """Persist a batch in one transaction — all of it or, on any error, none of it;
        ``with_write`` and ``write_guard`` as for :meth:`store`.

        Texts are embedded in batches before the write lock is taken, then the
        rows go in with one bulk INSERT (``rows.insert_many``). ``pace``: embed in
        small calls with rests between them (a background job, such as ingestion,
        that must leave the embedder to others' requests).
        """
        return self._insert(data_type, list(records), "store_many", first=with_write, pace=pace,
                            guard=write_guard)

    def replace_many(self, data_type: DataType | str, records: Sequence[Record | Mapping[str, Any]],
                     *, remove: Sequence[str] = (),
                     changes: Mapping[str, Mapping[str, Any]] | None = None,
                     adopt: Playthrough | None = None) -> list[Record]:
        """Delete the keys in ``remove``, change fields of other records (``changes``, by
        key; never an embedded text), move every ``data_type`` record of the playthrough
        ``adopt`` into this one (vectors and all: nothing is re-embedded) and insert
        ``records``, in one transaction: a reader sees the set before or the set after,
        never a mix (a campaign's version swap, its new chunks stored beforehand, in
        steps, in a staging playthrough). Returns the inserted records."""
        spec = _spec(data_type)
        if adopt is not None and adopt.id == self._id:
            raise RecordError(f"adopt: playthrough {self._id!r} cannot adopt its own records")
        for key in remove:
            _check_key(spec, key)
        checked = {key: _check_changes(spec, fields) for key, fields in (changes or {}).items()}
        for key in checked:
            _check_key(spec, key)
        if spec.text_field and any(spec.text_field in fields for fields in checked.values()):
            raise RecordError(f"{camel(spec.text_field)}: replace_many changes no embedded text "
                              "(use update)")

        def swap(cur: duckdb.DuckDBPyConnection) -> None:
            where, params = scoped_where(spec.data_type, self._id)
            for key in remove:
                cur.execute(f'DELETE FROM {spec.table} WHERE {where} AND "{spec.key}" = ?',
                            params + [key])
            for key, fields in checked.items():
                current = self._locked_get(cur, spec, key)
                if current is None:
                    raise RecordNotFound(f"{spec.data_type.value} {key!r} not found in "
                                         f"playthrough {self._id!r}")
                merged, names = _merge(spec, current, fields)
                self._rewrite(cur, spec, key, merged, names, None)
            if adopt is not None:
                theirs, their_params = scoped_where(spec.data_type, adopt.id)
                try:
                    cur.execute(f"UPDATE {spec.table} SET playthrough_id = ? WHERE {theirs}",
                                [self._id] + their_params)
                except duckdb.ConstraintException as exc:
                    raise DuplicateRecord(f"{camel(spec.key)}: a record of {adopt.id!r} is "
                                          f"already stored in playthrough {self._id!r}: {exc}") from None

        return self._insert(data_type, list(records), "replace_many", swap)

    def clear(self, data_type: DataType | str) -> int:
        """Delete every ``data_type`` record of this playthrough, in one transaction; how many
        (a staging playthrough that an interrupted run left behind)."""
        spec = _spec(data_type)
        store = self._store
        with store.monitor.measure("clear", spec.data_type.value, self._id) as stat:
            where, params = scoped_where(spec.data_type, self._id)
            with store._transaction() as cur:
                deleted = cur.execute(f"DELETE FROM {spec.table} WHERE {where}", params).fetchone()[0]
            stat.result_count = int(deleted)
        return int(deleted)

    def update(self, data_type: DataType | str, key: str, changes: Mapping[str, Any]) -> Record:
        """Change fields of one record atomically; the merged record is validated as a whole.

        A raw edit: only the fields given change (an embedded text is
        re-embedded). To move a reputation or perception score with decay and
        its timestamp, use ``adjust_score``.
        """
        spec = _spec(data_type)
        _check_key(spec, key)
        changes = _check_changes(spec, changes)
        store = self._store
        text = changes.get(spec.text_field) if spec.text_field else None
        with store.monitor.measure("update", spec.data_type.value, self._id, {spec.key: key}) as stat:
            vector = store._embed([text])[0] if text is not None else None
            with store._transaction() as cur:
                current = self._locked_get(cur, spec, key)
                if current is None:
                    raise RecordNotFound(f"{spec.data_type.value} {key!r} not found in playthrough {self._id!r}")
                merged, fields = _merge(spec, current, changes)
                self._rewrite(cur, spec, key, merged, fields, vector)
            stat.result_count = 1
        return self._decayed([merged], spec)[0]

    def adjust_score(self, data_type: DataType | str, key: str, delta: float, *,
                     event: str | None = None) -> Record:
        """Move a faction's reputation or an NPC's perception by ``delta``, now.

        The spec's ``update(factionId, scoreDelta)`` / ``update(npcId, scoreDelta,
        event)``. The new stored score is the current decayed score plus
        ``delta`` (perception clamped to -100..100), stamped with the store's
        clock; ``event`` is appended to an NPC's history. A key not stored yet
        starts from 0. One change of ``adjust_scores``.
        """
        return self._adjust_scores(data_type, [ScoreChange(key, delta)], event, single=True)[0]

    def adjust_scores(self, data_type: DataType | str, changes: Sequence[ScoreChange], *,
                      event: str | None = None) -> list[Record]:
        """Move several scores of one record type in ONE transaction: all or nothing.

        Each change is ``adjust_score``'s read-decay-add-clamp-write: the current
        score decayed to now (0 for a key not stored yet) plus ``delta``, clamped
        to the type's range (perception: -100..100), stamped with the store's
        clock. A change's ``minimum``/``maximum`` are the caller's scale: the
        current score is read as clamped into it (one stored before the scale
        narrowed counts as its nearest end) and the new score is clamped into it
        after the store's own clamp; a scale must overlap the type's range. A
        change's ``decay_rate`` is stored on the record; ``event`` is appended to
        each NPC's history.

        Every change is validated before the transaction begins, and any error in
        it rolls all of them back: no score moves unless every one does. A key
        changed twice in one batch takes the changes in order (the second builds
        on the first). Returns the records as written, one per change, in order.
        """
        return self._adjust_scores(data_type, changes, event, single=False)

    def _adjust_scores(self, data_type: DataType | str, changes: Sequence[ScoreChange],
                       event: str | None, *, single: bool) -> list[Record]:
        """``adjust_scores``; ``single``: ``adjust_score``'s one change, its errors named
        by the bare field (``delta``) instead of ``changes[i].delta``."""
        spec = _spec(data_type)
        if spec.score_column is None:
            raise RecordError(f"dataType: {spec.data_type.value} has no score to adjust")
        if event is not None and spec.data_type is not DataType.NPC_PERCEPTION:
            raise RecordError(f"event: {spec.data_type.value} keeps no event history")
        if isinstance(changes, (str, bytes, Mapping)) or not isinstance(changes, Sequence) \
                or not changes:
            raise RecordError(f"changes: must be a non-empty sequence of ScoreChange, got {changes!r}")
        checked = [_check_score_change(spec, change, None if single else i)
                   for i, change in enumerate(changes)]
        store = self._store
        now = store._now()
        keys = list(dict.fromkeys(c.key for c in checked))
        operation = "adjust_score" if single else "adjust_scores"
        with store.monitor.measure(operation, spec.data_type.value, self._id,
                                   {spec.key: keys[0] if len(keys) == 1 else keys}) as stat:
            with store._transaction() as cur:
                stored: dict[str, bool] = {}  # key -> whether a row exists in the table
                latest: dict[str, Record | None] = {}  # key -> the record as this batch left it
                fields: dict[str, set[str]] = {}  # key -> the columns this batch changed
                written: list[Record] = []
                for change in checked:
                    key = change.key
                    if key not in latest:
                        latest[key] = self._locked_get(cur, spec, key)
                        stored[key], fields[key] = latest[key] is not None, set()
                    current = latest[key]
                    base = 0.0 if current is None else \
                        self._decayed([current], spec, now)[0].decayed_score
                    score = _bounded(change, _clamp(spec.data_type, _bounded(change, base) + change.delta))
                    new: dict[str, Any] = {spec.score_column: score, spec.time_column: now}
                    if change.decay_rate is not None:
                        new["decay_rate"] = change.decay_rate
                    if event is not None:
                        new["event_history"] = (current.event_history if current else []) + [event]
                    if current is None:
                        record = to_record(spec.data_type, {spec.key: key, "playthrough_id": self._id, **new})
                    else:
                        record, _ = _merge(spec, current, new)
                    fields[key].update(new)
                    latest[key] = record
                    written.append(record)
                # One write per key (a key changed twice is written once, as it ended).
                for key, record in latest.items():
                    if stored[key]:
                        self._rewrite(cur, spec, key, record, sorted(fields[key]), None)
                    else:
                        insert_one(cur, spec, record, None, None)
            stat.result_count = len(written)
        return self._decayed(written, spec, now)

    def delete(self, data_type: DataType | str, key: str) -> bool:
        """Remove one record; False if this playthrough has no such record."""
        spec = _spec(data_type)
        _check_key(spec, key)
        store = self._store
        with store.monitor.measure("delete", spec.data_type.value, self._id, {spec.key: key}) as stat:
            where, params = scoped_where(spec.data_type, self._id)
            with store._transaction() as cur:
                deleted = cur.execute(f'DELETE FROM {spec.table} WHERE {where} AND "{spec.key}" = ?',
                                      params + [key]).fetchone()[0]
            stat.result_count = int(deleted)
        return bool(deleted)

    def reembed(self, data_type: DataType | str) -> int:
        """Re-embed this playthrough's records whose vectors another model made; how many.

        Search compares only the current model's vectors (another model's live in
        another space), so after a model change old records are kept but unseen
        until re-embedded. A record whose text changed meanwhile is left alone.
        """
        spec = _spec(data_type)
        if spec.text_field is None:
            raise RecordError(f"dataType: {spec.data_type.value} has no embedded text")
        store = self._store
        with store.monitor.measure("reembed", spec.data_type.value, self._id) as stat:
            where, params = scoped_where(spec.data_type, self._id)
            stale = store._reader().execute(
                f'SELECT "{spec.key}", "{spec.text_field}" FROM {spec.table} WHERE {where}'
                f" AND (embedding_model <> ? OR embedding_version <> ?)",
                params + list(store._model)).fetchall()
            vectors = store._embed([text for _, text in stale])
            with store._transaction() as cur:
                for (key, text), vector in zip(stale, vectors):
                    cur.execute(
                        f"UPDATE {spec.table} SET embedding = ?::FLOAT[{store.dimensions}],"
                        f" embedding_model = ?, embedding_version = ?,"
                        f" embedding_seq = nextval('{EMBEDDING_SEQ}') WHERE {where}"
                        f' AND "{spec.key}" = ? AND "{spec.text_field}" = ?',
                        [vector_text(vector), *store._model, *params, key, text])
            stat.result_count = len(stale)
        return len(stale)

    def apply_retention(self, policies: Sequence[RetentionPolicy] | None = None) -> list[RetentionResult]:
        """Run retention policies (default: the configured ones) in this playthrough only."""
        return self._store.apply_retention(policies, [self._id])

    # -- helpers ----------------------------------------------------------------------------

    def _insert(self, data_type: DataType | str, records: list[Record | Mapping[str, Any]],
                operation: str,
                first: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
                pace: Pace | None = None,
                guard: AbstractContextManager[Any] | None = None) -> list[Record]:
        spec = _spec(data_type)
        store = self._store
        with store.monitor.measure(operation, spec.data_type.value, self._id) as stat:
            now = store._now()
            owned = [self._own(spec, to_record(spec.data_type, r), now) for r in records]
            keys = [getattr(r, spec.key) for r in owned]
            if len(set(keys)) != len(keys):
                raise DuplicateRecord(f"{camel(spec.key)}: the batch repeats a key")
            vectors = None
            if spec.text_field is not None:
                started = time.perf_counter()
                vectors = store._embed([getattr(r, spec.text_field) for r in owned], pace)
                stat.embed_ms = (time.perf_counter() - started) * 1000.0
            if owned or first is not None:
                try:
                    with guard or nullcontext(), store._transaction() as cur:
                        if first is not None:
                            first(cur)
                        if len(owned) == 1:
                            insert_one(cur, spec, owned[0], None if vectors is None else vectors[0],
                                       store._model)
                        elif owned:
                            insert_many(cur, spec, owned, vectors, store._model)
                except duckdb.ConstraintException as exc:
                    raise DuplicateRecord(
                        f"{camel(spec.key)}: already stored in playthrough {self._id!r} "
                        f"(use update): {exc}") from None
            stat.result_count = len(owned)
        return self._decayed(owned, spec)

    def _own(self, spec: TableSpec, record: Record, now: datetime) -> Record:
        """Bind the record to this playthrough; give it a key and ingest time if it has none."""
        if record.playthrough_id is not None and record.playthrough_id != self._id:
            raise RecordError(f"playthroughId: the record names {record.playthrough_id!r}, "
                              f"but this scope is {self._id!r}")
        record.playthrough_id = self._id
        if spec.auto_key and record.id is None:
            record.id = uuid.uuid4().hex
        if getattr(record, spec.time_column) is None:  # only a lore chunk's ingest time may be absent
            setattr(record, spec.time_column, now)
        for name in COMPUTED_FIELDS:
            if hasattr(record, name):
                setattr(record, name, None)  # computed when read, never stored
        return record

    def _locked_get(self, cur: duckdb.DuckDBPyConnection, spec: TableSpec, key: str) -> Record | None:
        where, params = scoped_where(spec.data_type, self._id)
        row = cur.execute(f'SELECT {quoted(spec.columns)} FROM {spec.table} WHERE {where} '
                          f'AND "{spec.key}" = ?', params + [key]).fetchone()
        return None if row is None else from_row(spec, row)

    def _rewrite(self, cur: duckdb.DuckDBPyConnection, spec: TableSpec, key: str, record: Record,
                 fields: list[str], vector: np.ndarray | None) -> None:
        """UPDATE the named fields (and the vector, if given) of one row from ``record``."""
        row = dict(zip(spec.columns, to_row(spec, record)))
        sets, params = [f'"{f}" = ?' for f in fields], [row[f] for f in fields]
        if vector is not None:
            sets += [f"embedding = ?::FLOAT[{self._store.dimensions}]", "embedding_model = ?",
                     "embedding_version = ?", f"embedding_seq = nextval('{EMBEDDING_SEQ}')"]
            params += [vector_text(vector), *self._store._model]
        where, scope = scoped_where(spec.data_type, self._id)
        cur.execute(f'UPDATE {spec.table} SET {", ".join(sets)} WHERE {where} AND "{spec.key}" = ?',
                    params + scope + [key])

    def _decayed(self, records: list[Record], spec: TableSpec,
                 now: datetime | None = None) -> list[Record]:
        """Fill ``decayed_score`` of reputation/perception records as of ``now`` (default: the clock)."""
        if spec.score_column is None:
            return records
        now = self._store._now() if now is None else now
        policy = self._store._decay_policy(spec.data_type)
        for record in records:
            elapsed = now - getattr(record, spec.time_column)
            record.decayed_score = decayed(getattr(record, spec.score_column), elapsed, policy,
                                           record.decay_rate)
        return records


def _spec(data_type: DataType | str) -> TableSpec:
    return SPECS[parse_data_type(data_type)]


def _check_limit(limit: int | None, *, allow_none: bool) -> None:
    if limit is None and allow_none:
        return
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise RecordError(f"limit: must be a positive integer, got {limit!r}")


def _check_key(spec: TableSpec, key: str) -> None:
    if not isinstance(key, str) or not key:
        raise RecordError(f"{camel(spec.key)}: must be a non-empty string, got {key!r}")


def _check_changes(spec: TableSpec, changes: Mapping[str, Any]) -> dict[str, Any]:
    """Changes by field name (snake_case or camelCase); keys and computed fields cannot change."""
    if not isinstance(changes, Mapping) or not changes:
        raise RecordError(f"changes: must be a non-empty mapping of fields, got {changes!r}")
    by_camel = {camel(c): c for c in spec.columns}
    out: dict[str, Any] = {}
    for name, value in changes.items():
        field = by_camel.get(camel(name)) if isinstance(name, str) else None
        if isinstance(name, str) and camel(name) in {camel(c) for c in COMPUTED_FIELDS}:
            raise RecordError(f"{camel(name)}: computed when read; change the stored score instead")
        if field is None:
            raise RecordError(f"{name}: not a field of {spec.data_type.value}")
        if field in (spec.key, "playthrough_id"):
            raise RecordError(f"{camel(field)}: cannot be changed")
        out[field] = value
    return out


def _merge(spec: TableSpec, current: Record, changes: Mapping[str, Any]) -> tuple[Record, list[str]]:
    """``current`` with ``changes`` applied, validated as a whole, and the fields that changed.

    A derived field (a portrait's description hash) whose source changed is
    recomputed unless the changes set it too.
    """
    merged = msgspec.to_builtins(current)
    fields = list(changes)
    for source, derived in DERIVED_FIELDS.get(spec.data_type, {}).items():
        if source in changes and derived not in changes:
            merged[camel(derived)] = None
            fields.append(derived)
    merged.update({camel(name): value for name, value in changes.items()})
    return to_record(spec.data_type, merged), fields


def _clamp(data_type: DataType, score: float) -> float:
    low, high = SCORE_RANGE.get(data_type, (-math.inf, math.inf))
    return min(high, max(low, score))


def _finite(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _check_score_change(spec: TableSpec, change: Any, index: int | None) -> ScoreChange:
    """``change`` validated; errors name ``changes[index].field`` (the bare field if
    ``index`` is None: ``adjust_score``'s single change, whose key is the record's)."""
    def name(field: str) -> str:
        if index is None:
            return camel(spec.key) if field == "key" else field
        return f"changes[{index}].{field}"

    if not isinstance(change, ScoreChange):
        where = "change" if index is None else f"changes[{index}]"
        raise RecordError(f"{where}: must be a ScoreChange, got {change!r}")
    if not isinstance(change.key, str) or not change.key:
        raise RecordError(f"{name('key')}: must be a non-empty string, got {change.key!r}")
    if not _finite(change.delta):
        raise RecordError(f"{name('delta')}: must be a finite number, got {change.delta!r}")
    for field in ("minimum", "maximum"):
        value = getattr(change, field)
        if value is not None and not _finite(value):
            raise RecordError(f"{name(field)}: must be a finite number or None, got {value!r}")
    if change.minimum is not None and change.maximum is not None and change.minimum > change.maximum:
        raise RecordError(f"{name('minimum')}: must not exceed maximum, got "
                          f"{change.minimum!r} > {change.maximum!r}")
    low, high = SCORE_RANGE.get(spec.data_type, (-math.inf, math.inf))
    for field, outside in (("minimum", change.minimum is not None and change.minimum > high),
                           ("maximum", change.maximum is not None and change.maximum < low)):
        if outside:
            raise RecordError(f"{name(field)}: {getattr(change, field)!r} leaves no score in "
                              f"{spec.data_type.value}'s range {low:g}..{high:g}")
    if change.decay_rate is not None and (not _finite(change.decay_rate)
                                          or not 0.0 <= change.decay_rate <= 1.0):
        raise RecordError(f"{name('decayRate')}: must be a number from 0 to 1 or None, "
                          f"got {change.decay_rate!r}")
    return change


def _bounded(change: ScoreChange, score: float) -> float:
    """``score`` clamped into the change's own scale (``minimum``/``maximum``, each optional)."""
    if change.maximum is not None:
        score = min(change.maximum, score)
    if change.minimum is not None:
        score = max(change.minimum, score)
    return score
