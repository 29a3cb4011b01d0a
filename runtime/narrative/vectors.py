"""The engine's vectors: how they travel to DuckDB, and how visible rows are ranked.

Scoring. Which rows a query may see is decided in SQL, by every query, against
the database (``queries.py``). Ranking them is not: DuckDB's ``array_cosine_similarity``
over 10,000 384-d rows took 13-30 ms here (the scan decompresses every vector), so
the engine keeps an in-process copy of rows by id (vector and record fields,
``narratoria.runtime.vector_rows``) and scores the visible ids with numpy. A row
never changes once written (the engine has no update), so a cached row is always
right; a visible id missing from the copy (written by another engine on the same
database, or before a restart) is read from DuckDB before scoring. The FLOAT[dim]
column stays the authoritative copy.

Vectors travel to DuckDB as text (``string_split(?, ',')::FLOAT[dim]``): DuckDB's
Python binding converts a list or array parameter element by element (~12 µs a
float even with the pandas fix in ``db.py``, 130 µs without), while a 384-float
string parses in ~0.3 ms. Vectors come back only when a copy must be filled.
"""

from __future__ import annotations

from typing import Any, Callable

import duckdb
import numpy as np

from narratoria.runtime.embedding import EmbeddingBackend, EmbeddingError
from narratoria.runtime.narrative.models import NarrativeStateError
from narratoria.runtime.narrative.schema import SCHEMA
from narratoria.runtime.vector_rows import Located, VectorRows, unit

# Past this many missing ids a fill reads the whole group: one scan beats a long id
# list (DuckDB converts list parameters element by element).
_FILL_BY_ID_MAX = 256

Fill = Callable[[duckdb.DuckDBPyConnection, list[int]], None]


class VectorFormat:
    """The embedder's vectors as DuckDB reads them fastest (see the module docstring)."""

    def __init__(self, embedder: EmbeddingBackend, dimensions: int) -> None:
        self.embedder = embedder
        self.dimensions = dimensions
        self.sql = f"string_split(?, ',')::FLOAT[{dimensions}]"  # dimensions: a checked int
        self._format = ",".join(["%.9g"] * dimensions)  # 9 digits: float32 round-trips exactly

    def text(self, vector: np.ndarray) -> str:
        self.check(vector)
        return self._format % tuple(vector.tolist())

    def check(self, vector: np.ndarray) -> None:
        if not np.isfinite(vector).all():
            raise EmbeddingError(f"the {self.embedder.model} embedder returned a non-finite vector")

    def query(self, text: str) -> np.ndarray:
        """The unit vector a query text is scored against."""
        return unit(self.embedder.embed(text)[None, :])[0]


def top(limit: int, *keys: np.ndarray) -> np.ndarray:
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


def located(con: duckdb.DuckDBPyConnection, rows: VectorRows, ids: np.ndarray, fill: Fill) -> Located:
    """``ids`` in a snapshot of ``rows``, reading the missing ones first."""
    found = rows.locate(ids)
    if not found.complete:
        fill(con, rows.missing(ids))
        found = rows.locate(ids)
        if not found.complete:  # a candidate row vanished between two statements
            raise NarrativeStateError("rows changed while being read; retry the query")
    return found


def fill(con: duckdb.DuckDBPyConnection, rows: VectorRows, table: str, fields: tuple[str, ...],
         missing: list[int], group_sql: str, group_params: list[Any]) -> None:
    """Read rows the copy lacks (a few by id, else the whole group) with their vectors."""
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
    rows.add(found["id"].tolist(), vectors, records)


def rank(con: duckdb.DuckDBPyConnection, rows: VectorRows, ids: np.ndarray, seqs: np.ndarray,
         query: np.ndarray | None, limit: int, fill: Fill
         ) -> tuple[np.ndarray, np.ndarray | None, list[Any]]:
    """The first ``limit`` of ``ids``: by similarity to the unit ``query`` (then story
    order), or in story order (``seqs``, then id) without one. Returns their indices in
    ``ids``, every id's score (None without a query) and the chosen rows' records."""
    if query is None:
        chosen, scores = top(limit, seqs, ids), None
    else:
        scores = located(con, rows, ids, fill).similarities(query)
        chosen = top(limit, -scores, seqs, ids)
    records = located(con, rows, ids[chosen], fill).records_of()
    return chosen, scores, records
