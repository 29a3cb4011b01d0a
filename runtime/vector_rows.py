"""An exact in-memory copy of stored vectors by row id, so a search is one matrix product.

DuckDB's ``array_cosine_similarity`` costs 1-3 µs per 384-d row (12-30 ms for a scan
of 10,000 rows on the 2-core machine: the scan decompresses every vector); numpy does
the same arithmetic in under 1 ms. Copying vectors out of the database is safe because
a row id names one vector forever: nothing updates a stored vector in place (the
narrative engine has no update; the persistence store gives a re-embedded vector a new
``embedding_seq``). So a cached (id -> vector) pair is never stale: a copy may miss
rows, never hold wrong ones. Which ids a search may see is always the database's
answer, from one MVCC snapshot; a copy only scores them, and the ``FLOAT[dim]`` column
stays the authoritative copy. A wanted id the copy lacks is read from DuckDB by the
owner (``VectorRows.missing``) and added before scoring.

Readers take a snapshot (arrays are only appended past its end, or replaced, never
changed under it) and score without the lock. Scores are exact cosine similarity.

Users: the narrative state engine (a copy per character's memories and one of facts,
with the record fields a result needs) and the persistence store's ``VectorCache``
(a copy per table, playthrough and model, least recently used out first).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

__all__ = ["Located", "VectorRows", "similarity", "unit"]


def unit(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length, as float32 (a zero row stays zero: it scores 0)."""
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


def similarity(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``matrix @ query`` for unit rows and a unit query: cosine similarity.

    einsum, not ``@``: BLAS's gemv spreads over threads that spin when another process
    holds a core (1 ms quiet, 8 ms contended, at 10,000 x 384); einsum's single-threaded
    loop took ~0.7-1.5 ms either way, faster than ``@`` in 2^17-float slices (~1 ms)."""
    return np.einsum("ij,j->i", matrix, query)


@dataclass(frozen=True)
class Located:
    """Wanted ids looked up in one snapshot of a ``VectorRows``."""

    positions: np.ndarray  # row of each wanted id in ``vectors`` (meaningless where not found)
    found: np.ndarray  # bool, per wanted id
    vectors: np.ndarray  # the snapshot's unit vectors
    records: list[Any]  # the snapshot's records, by row

    @property
    def complete(self) -> bool:
        return bool(self.found.all())

    def similarities(self, query: np.ndarray) -> np.ndarray:
        """Cosine similarity of the unit ``query`` to each wanted row; -inf where not found."""
        if 2 * len(self.positions) >= len(self.vectors):
            scores = similarity(self.vectors, query)[self.positions]  # most rows: one pass, no gather
        else:
            scores = similarity(self.vectors[self.positions], query)
        return scores if self.complete else np.where(self.found, scores, -np.inf)

    def records_of(self) -> list[Any]:
        return [self.records[p] for p in self.positions.tolist()]


class VectorRows:
    """Unit vectors (and, optionally, a record each) of immutable rows, by int64 id."""

    def __init__(self, dimensions: int) -> None:
        self._lock = threading.Lock()
        self._ids = np.empty(0, dtype=np.int64)  # sorted; capacity past ``_n``
        self._vectors = np.empty((0, dimensions), dtype=np.float32)
        self._records: list[Any] = []
        self._present: set[int] = set()
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, list[Any]]:
        with self._lock:
            n = self._n
            return self._ids[:n], self._vectors[:n], self._records

    def locate(self, wanted: np.ndarray) -> Located:
        """Where each of the ``wanted`` ids (any order) is in a snapshot."""
        ids, vectors, records = self.snapshot()
        wanted = np.asarray(wanted, dtype=np.int64)
        if not len(ids):
            return Located(np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool),
                           vectors, records)
        positions = np.searchsorted(ids, wanted).clip(max=len(ids) - 1)
        return Located(positions, ids[positions] == wanted, vectors, records)

    def missing(self, ids: Sequence[int] | np.ndarray) -> list[int]:
        return [int(i) for i in ids if int(i) not in self._present]

    def add(self, ids: Sequence[int], vectors: np.ndarray,
            records: Sequence[Any] | None = None) -> None:
        """Add the rows not present yet (a present id is the same row: skipped)."""
        vectors = unit(vectors)
        with self._lock:
            fresh = [i for i, row_id in enumerate(ids) if int(row_id) not in self._present]
            if not fresh:
                return
            new_ids = np.asarray([int(ids[i]) for i in fresh], dtype=np.int64)
            new_records = [None if records is None else records[i] for i in fresh]
            n, m = self._n, len(fresh)
            if n + m > len(self._ids) or (n and new_ids.min() < self._ids[n - 1]) \
                    or np.any(np.diff(new_ids) < 0):
                self._rebuild(new_ids, vectors[fresh], new_records)
            else:  # the usual case: ids arrive in increasing order, appended in place
                self._ids[n:n + m] = new_ids
                self._vectors[n:n + m] = vectors[fresh]
                self._records.extend(new_records)
                self._n = n + m
            self._present.update(int(i) for i in new_ids)

    def add_one(self, row_id: int, vector: np.ndarray, record: Any = None) -> None:
        """``add`` for one row: the hot path of every narrative memory write."""
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

    def _rebuild(self, new_ids: np.ndarray, vectors: np.ndarray, records: list[Any]) -> None:
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
