"""A character's view: what it knows and has experienced at a moment in a take.

This is where the engine's guarantees are enforced, against the database, by every
query: the candidates are exactly the rows of the queried character
(``character_id = ?``) that ``timeline.visibility`` keeps (nothing after the moment,
nothing outside the take's ancestry or past a branch point), read in one statement.
Only then are they ranked, in process (``vectors.py``).
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np

from narratoria.runtime.narrative.cast import Cast
from narratoria.runtime.narrative.checks import check_limit, check_text
from narratoria.runtime.narrative.connections import Connections
from narratoria.runtime.narrative.knowledge import Knowledge
from narratoria.runtime.narrative.memories import Memories
from narratoria.runtime.narrative.models import CharacterState
from narratoria.runtime.narrative.schema import SCHEMA
from narratoria.runtime.narrative.timeline import Scope, Timeline, visibility
from narratoria.runtime.narrative.vectors import VectorFormat


class Queries:
    def __init__(self, connections: Connections, timeline: Timeline, cast: Cast, knowledge: Knowledge,
                 memories: Memories, vectors: VectorFormat) -> None:
        self._db = connections
        self._timeline = timeline
        self._cast = cast
        self._knowledge = knowledge
        self._memories = memories
        self._vectors = vectors

    def state(self, character_id: str, moment_id: str, take_id: int, query_text: str | None,
              fact_limit: int, memory_limit: int) -> CharacterState:
        for limit, what in ((fact_limit, "fact_limit"), (memory_limit, "memory_limit")):
            check_limit(limit, what)
        if query_text is not None:
            check_text(query_text, "query_text", allow_empty=True)
        traits, voice = self._cast.get(character_id)
        seq = self._timeline.moment_seq(moment_id)
        scope = self._timeline.scope(take_id)
        query = None if query_text is None else self._vectors.query(query_text)
        self._memories.publish()
        with self._db.reading() as con:
            tier, ids, seqs, events = self._candidates(con, character_id, scope, seq)
            memories = self._memories.pick(con, character_id, ids[tier == 0], seqs[tier == 0], query,
                                           memory_limit)
            facts = self._knowledge.pick(con, ids[tier == 1], seqs[tier == 1], events[tier == 1], query,
                                         fact_limit)
        return CharacterState(character_id=character_id, moment_id=moment_id, take_id=take_id,
                              facts=facts, memories=memories, traits=dict(traits), voice=dict(voice))

    @staticmethod
    def _candidates(con: duckdb.DuckDBPyConnection, character_id: str, scope: Scope, seq: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every row the query may see, in one statement (each costs ~0.3 ms before
        it does anything): tier 0 memories (id, seq), tier 1 knowledge events
        (fact id, seq, event id). This is where the visibility rule is enforced,
        against the database, on every query."""
        visible, scope_params = visibility(scope, seq, 2)
        params: list[Any] = [character_id, *scope_params]
        sql = (f"SELECT 0 AS tier, m.id, m.moment_seq AS seq, 0 AS event FROM {SCHEMA}.memories m "
               f"WHERE m.character_id = $1 AND {visible('m')} "
               f"UNION ALL SELECT 1, k.fact_id, k.moment_seq, k.id FROM {SCHEMA}.knowledge_events k "
               f"WHERE k.character_id = $1 AND {visible('k')}")
        found = con.execute(sql, params).fetchnumpy()
        return tuple(np.asarray(found[name], dtype=np.int64) for name in ("tier", "id", "seq", "event"))
