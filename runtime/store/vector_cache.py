"""An exact in-memory copy of stored vectors, so a search is one matrix product.

DuckDB's ``array_cosine_similarity`` costs 1-2 µs per 384-d row: 12-25 ms for a
scan of 10,000 memories on the 2-core machine, most of a search's budget. NumPy
does the same arithmetic in ~1 ms. Copying vectors out of the database is safe
because a vector never changes under its ``embedding_seq``: every write of a
vector (an insert, a re-embedding update) draws a new number from a sequence. So
a cached (seq -> vector) pair can never be stale; what changes is which seqs are
live, and every search asks DuckDB for exactly that — the seqs of the rows its
scope and filters leave, from one MVCC snapshot. Seqs this copy has not seen yet
are fetched and added; seqs it holds that are no longer live are never asked for,
and are dropped when the copy is rebuilt. The database stays the only source of
truth, and the scoring stays exact cosine similarity over every in-scope row.

Copies are per (table, playthrough, model), least recently used first out once
they hold more than ``max_rows`` vectors together. Each copy is a ``VectorRows``
(``narratoria.runtime.vector_rows``, the narrative engine's cache too) keyed by seq.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import duckdb
import numpy as np

from narratoria.runtime.store.filters import scoped_where
from narratoria.runtime.store.schema import TableSpec
from narratoria.runtime.vector_rows import VectorRows, unit

Key = tuple[str, str, str]  # table, playthrough, embedding model


class VectorCache:
    def __init__(self, dimensions: int, max_rows: int = 100_000) -> None:
        self._dimensions = dimensions
        self._max_rows = max_rows
        self._copies: OrderedDict[Key, VectorRows] = OrderedDict()
        self._lock = threading.Lock()

    def similarities(self, cur: duckdb.DuckDBPyConnection, spec: TableSpec, playthrough_id: str,
                     model: str, live: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of ``query`` to the vector of each seq in ``live``.

        A seq that vanished from the database before its vector could be
        fetched (a concurrent delete or re-embedding) scores -inf.
        """
        key = (spec.table, playthrough_id, model)
        with self._lock:
            copy = self._copies.get(key)
            if copy is not None:
                self._copies.move_to_end(key)
        if copy is None:
            copy = VectorRows(self._dimensions)
        located = copy.locate(live)
        if not located.complete:
            copy = self._extend(cur, spec, key, copy, np.asarray(live)[~located.found])
            located = copy.locate(live)
        return located.similarities(unit(np.asarray(query)[None, :])[0])

    def _extend(self, cur: duckdb.DuckDBPyConnection, spec: TableSpec, key: Key, copy: VectorRows,
                missing: np.ndarray) -> VectorRows:
        """``copy`` plus the vectors of the ``missing`` seqs (and any newer ones), or a rebuild."""
        _, playthrough_id, model = key
        # New rows draw the newest seqs, so fetching from the smallest missing one
        # usually reads just the rows written since the copy was last extended.
        seqs, vectors = self._fetch(cur, spec, playthrough_id, model, int(missing.min()))
        if len(copy) + len(seqs) > 2 * self._count(cur, spec, playthrough_id, model) + 1024:
            # Mostly dead rows (deleted or re-embedded): start over from the live ones.
            seqs, vectors = self._fetch(cur, spec, playthrough_id, model, None)
            copy = VectorRows(self._dimensions)
        copy.add(seqs.tolist(), vectors)
        with self._lock:
            self._copies[key] = copy
            self._copies.move_to_end(key)
            self._evict()
        return copy

    def _fetch(self, cur: duckdb.DuckDBPyConnection, spec: TableSpec, playthrough_id: str,
               model: str, since_seq: int | None) -> tuple[np.ndarray, np.ndarray]:
        where, params = scoped_where(spec.data_type, playthrough_id)
        sql = f"SELECT embedding_seq, embedding FROM {spec.table} WHERE {where} AND embedding_model = ?"
        params.append(model)
        if since_seq is not None:
            sql, params = sql + " AND embedding_seq >= ?", params + [since_seq]
        result = cur.execute(sql + " ORDER BY embedding_seq", params).fetchnumpy()
        seqs = np.asarray(result["embedding_seq"], dtype=np.int64)
        if not len(seqs):
            return seqs, np.zeros((0, self._dimensions), dtype=np.float32)
        return seqs, np.stack(result["embedding"]).astype(np.float32, copy=False)

    def _count(self, cur: duckdb.DuckDBPyConnection, spec: TableSpec, playthrough_id: str,
               model: str) -> int:
        where, params = scoped_where(spec.data_type, playthrough_id)
        return cur.execute(f"SELECT count(*) FROM {spec.table} WHERE {where} AND embedding_model = ?",
                           params + [model]).fetchone()[0]

    def _evict(self) -> None:
        """Drop least recently used copies beyond ``max_rows`` (never the newest one)."""
        total = sum(len(c) for c in self._copies.values())
        while total > self._max_rows and len(self._copies) > 1:
            _, dropped = self._copies.popitem(last=False)
            total -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._copies.clear()
