"""World facts and who knows them: a fact is known to nobody until a character learns it.

``log_fact`` records a fact (embedded, so that a query text can rank it); a knowledge
event says that one character learned it at a moment in a take, and only such an event
puts the fact in that character's view (gated by ``timeline.visibility``). A character
learns a fact once per take (the spec's UNIQUE(character, fact, take)). Facts and
knowledge events never change, so both are cached once read.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np

from narratoria.runtime.narrative.cast import Cast
from narratoria.runtime.narrative.checks import check_choice, check_int, check_optional_text, check_text
from narratoria.runtime.narrative.connections import Connections
from narratoria.runtime.narrative.models import KNOWLEDGE_SOURCES, Fact, UnknownFactError
from narratoria.runtime.narrative.schema import SCHEMA
from narratoria.runtime.narrative.timeline import Timeline
from narratoria.runtime.narrative.vectors import VectorFormat, fill, rank
from narratoria.runtime.vector_rows import VectorRows

_FACT_FIELDS = ("content", "category")


class Knowledge:
    def __init__(self, connections: Connections, timeline: Timeline, cast: Cast,
                 vectors: VectorFormat) -> None:
        self._db = connections
        self._timeline = timeline
        self._cast = cast
        self._vectors = vectors
        self._known_facts: set[int] = set()
        self._fact_rows = VectorRows(vectors.dimensions)
        self._events: dict[int, tuple[str | None, str]] = {}  # knowledge event -> (source, moment)

    def check_fact(self, fact_id: Any, con: duckdb.DuckDBPyConnection | None = None) -> int:
        if fact_id in self._known_facts and not isinstance(fact_id, bool):
            return fact_id
        check_int(fact_id, "fact id")
        if self._db.fetch_one(con, f"SELECT 1 FROM {SCHEMA}.facts WHERE id = ?", [fact_id]) is None:
            raise UnknownFactError(f"unknown fact {fact_id!r}: log_fact it first")
        self._known_facts.add(fact_id)
        return fact_id

    def log_fact(self, content: str, category: str | None, moment_id: str) -> int:
        check_text(content, "fact content")
        check_optional_text(category, "fact category")
        self._timeline.moment_seq(moment_id)
        embedder = self._vectors.embedder
        vector = embedder.embed(content)
        with self._db.writing() as con:
            row = con.execute(
                f"INSERT INTO {SCHEMA}.facts (content, category, created_at, embedding, "
                f"embedding_model, embedding_version) VALUES (?, ?, ?, {self._vectors.sql}, ?, ?) "
                "RETURNING id",
                [content, category, moment_id, self._vectors.text(vector), embedder.model,
                 embedder.version]).fetchone()
            fact_id = int(row[0])
            self._fact_rows.add_one(fact_id, vector, (content, category))
        self._known_facts.add(fact_id)
        return fact_id

    def log_knowledge(self, character_id: str, fact_id: int, moment_id: str, take_id: int,
                      source: str | None) -> int:
        check_choice(source, KNOWLEDGE_SOURCES, "knowledge source", optional=True)
        with self._db.writing() as con:
            self._cast.get(character_id, con)
            self.check_fact(fact_id, con)
            seq = self._timeline.moment_seq(moment_id, con=con)
            self._timeline.scope(take_id, con)
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

    def pick(self, con: duckdb.DuckDBPyConnection, fact_ids: np.ndarray, seqs: np.ndarray,
             events: np.ndarray, query: np.ndarray | None, limit: int) -> list[Fact]:
        """The facts of the visible knowledge events (``fact_ids[i]`` learned at ``seqs[i]``
        by event ``events[i]``) a query returns, ranked (``vectors.rank``)."""
        if not len(fact_ids) or not limit:
            return []
        # A fact learned more than once in the visible history counts once, as first learned.
        order = np.lexsort((events, seqs, fact_ids))
        first = order[np.unique(fact_ids[order], return_index=True)[1]]
        fact_ids, seqs, events = fact_ids[first], seqs[first], events[first]
        chosen, scores, records = rank(con, self._fact_rows, fact_ids, seqs, query, limit,
                                       self._fill)
        learned = self._events_of(con, events[chosen])
        return [Fact(int(fact_ids[i]), content, category, source, moment,
                     None if scores is None else float(scores[i]))
                for i, (content, category), (source, moment) in zip(chosen, records, learned)]

    def _fill(self, con: duckdb.DuckDBPyConnection, missing: list[int]) -> None:
        fill(con, self._fact_rows, "facts", _FACT_FIELDS, missing, "true", [])

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
