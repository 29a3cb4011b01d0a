"""The narrative state engine (docs/narrative.md) on DuckDB.

Characters know only what retrieval hands them, so the guarantees are enforced
by every query, never by a prompt:

- a character's query returns only its own memories and the facts it learned;
- nothing learned or experienced after the queried moment's sequence;
- nothing from a take outside the queried take's ancestry, and nothing from an
  abandoned timeline: a branch at moment M retries the story from M.

``NarrativeStateEngine`` is the public class; it composes one object per concern,
each in its own module, sharing the engine's ``Connections``:

- ``timeline.py``: moments, takes and branching, and the visibility rule that turns
  a take and a moment into SQL (the rule itself is stated there);
- ``cast.py``: the registered characters, their traits and voice;
- ``knowledge.py``: world facts and the knowledge events that say who learned them;
- ``memories.py``: each character's experiences, written through the memory
  journal (``journal.py``) when the engine owns its database;
- ``queries.py``: a character's view at a moment in a take (``query_state``);
- ``vectors.py``: how vectors travel to DuckDB and how visible rows are ranked, on
  the in-process copy of ``narratoria.runtime.vector_rows``;
- ``connections.py``: one writer under a lock, a pool of readers, and one engine per
  database file;
- ``checks.py``: argument checks. A refused call writes nothing.

Every write call commits before it returns (a memory: to the synced journal, or to
DuckDB on a shared connection), so a process killed right after a call returned
loses nothing. An engine that opens its file refuses to start while another engine
of the same process, or another process, has that file open: a
``NarrativeStateError`` naming the file.
"""

from __future__ import annotations

from typing import Any

import duckdb

from narratoria.runtime.db import migrate
from narratoria.runtime.embedding import LOCAL_MODEL, EmbeddingBackend, EmbeddingSettings, make_backend
from narratoria.runtime.narrative.cast import Cast
from narratoria.runtime.narrative.checks import json_text
from narratoria.runtime.narrative.connections import Connections
from narratoria.runtime.narrative.journal import MemoryJournal, journal_path
from narratoria.runtime.narrative.knowledge import Knowledge
from narratoria.runtime.narrative.memories import Memories
from narratoria.runtime.narrative.models import (CharacterState, EngineConfig, InvalidArgumentError,
                                                 Take)
from narratoria.runtime.narrative.queries import Queries
from narratoria.runtime.narrative.schema import COMPONENT, migrations, stored_dimensions
from narratoria.runtime.narrative.timeline import Timeline
from narratoria.runtime.narrative.vectors import VectorFormat

__all__ = ["NarrativeStateEngine"]


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
        self._db = Connections(config.db_path, connection)
        journal: MemoryJournal | None = None
        try:
            migrate(self._db.writer, COMPONENT, migrations(dims))
            stored = stored_dimensions(self._db.writer)
            if stored != dims:
                raise InvalidArgumentError(
                    f"this database stores {stored}-d vectors; config.vector_dimensions is {dims}")
            if self._db.owns_connection:
                journal = MemoryJournal(journal_path(config.db_path))
            vectors = VectorFormat(self._embedder, dims)
            self._timeline = Timeline(self._db)
            self._cast = Cast(self._db)
            self._knowledge = Knowledge(self._db, self._timeline, self._cast, vectors)
            self._memories = Memories(self._db, self._timeline, self._cast, vectors, journal)
            self._queries = Queries(self._db, self._timeline, self._cast, self._knowledge,
                                    self._memories, vectors)
            self._memories.move_journaled(self._db.writer, replay=True)
        except BaseException:
            if journal is not None:
                journal.close()
            self._db.close()
            raise

    @staticmethod
    def _check_config(config: EngineConfig) -> None:
        if config.embedding_backend == "local" and config.embedding_model != LOCAL_MODEL:
            raise InvalidArgumentError(
                f"the local backend ships {LOCAL_MODEL} only, not {config.embedding_model!r}")
        dims = config.vector_dimensions
        if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
            raise InvalidArgumentError(f"vector_dimensions must be a positive int, not {dims!r}")

    # ------------------------------------------------------------------
    # lifecycle

    def close(self) -> None:
        """Close the engine's connections (and the database, if the engine opened it)."""
        self._db.close(last_write=self._memories.close)

    def __enter__(self) -> NarrativeStateEngine:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------
    # moments, takes, characters (timeline.py, cast.py)

    def create_moment(self, id: str, sequence: int, label: str | None = None,
                      metadata: dict[str, Any] | None = None) -> str:
        """Create a temporal marker; ``id`` and ``sequence`` must both be new.
        Returns the moment id."""
        return self._timeline.create_moment(id, sequence, label, metadata)

    def create_take(self, parent_take_id: int | None = None, branch_point: str | None = None,
                    notes: str | None = None) -> int:
        """A root take (no parent, no branch point), or, with a parent, the same
        as ``branch(parent_take_id, branch_point, notes)``. Returns the take id."""
        if parent_take_id is not None:
            return self.branch(parent_take_id, branch_point, notes)  # type: ignore[arg-type]
        if branch_point is not None:
            raise InvalidArgumentError("a root take has no branch point (give parent_take_id to branch)")
        return self._timeline.create_root(notes)

    def branch(self, parent_take_id: int, branch_point: str, notes: str | None = None) -> int:
        """Retry the story from ``branch_point``: the new take sees the parent's
        history strictly before that moment and never the parent's writes at or
        after it (nor, down a chain, anything its ancestors' branch points cut);
        the parent is untouched. Write to the returned take id from now on."""
        return self._timeline.branch(parent_take_id, branch_point, notes)

    def list_takes(self, status: str | None = None, moment_id: str | None = None) -> list[Take]:
        """Takes in creation order; ``status`` keeps those of one status,
        ``moment_id`` those branched at that moment."""
        return self._timeline.list_takes(status, moment_id)

    def set_take_status(self, take_id: int, status: str) -> None:
        """'active', 'archived' or 'trunk'; management is manual (no automatic GC)."""
        self._timeline.set_take_status(take_id, status)

    def get_ancestry(self, take_id: int) -> list[int]:
        """Take ids from the root to ``take_id``."""
        return self._timeline.ancestry(take_id)

    def register_character(self, id: str, name: str, traits: dict[str, Any] | None = None,
                           voice: dict[str, Any] | None = None) -> str:
        """Register a character; its memory is ready at once (rows keyed by its
        id in the shared ``memories`` table). Returns the character id."""
        return self._cast.register(id, name, traits, voice)

    # ------------------------------------------------------------------
    # facts and knowledge (knowledge.py)

    def log_fact(self, content: str, category: str | None, moment_id: str) -> int:
        """Record a world fact, known to nobody until ``log_knowledge``. It is
        embedded so that a query text can rank it. Returns the fact id."""
        return self._knowledge.log_fact(content, category, moment_id)

    def log_knowledge(self, character_id: str, fact_id: int, moment_id: str, take_id: int,
                      source: str | None = None) -> int:
        """Record that a character learned a fact at a moment in a take.
        ``source``: 'witnessed', 'told', 'inferred', 'discovered' or None.

        A character learns a fact once per take (the spec's UNIQUE(character,
        fact, take)): logging it again in the same take returns the existing
        event's id and changes nothing, so the first moment recorded stands.
        Returns the knowledge event id.
        """
        return self._knowledge.log_knowledge(character_id, fact_id, moment_id, take_id, source)

    # ------------------------------------------------------------------
    # experiential memory (memories.py)

    def embed_memory(self, character_id: str, chunk: str, moment_id: str, take_id: int,
                     chunk_type: str, tags: dict[str, Any] | None = None) -> int:
        """Store one experience of a character. ``chunk_type``: 'said', 'heard',
        'internal', 'perceived' or 'action'. The same text twice is kept twice.
        Returns the memory id."""
        ids = self._memories.write(
            [(character_id, chunk_type, json_text(tags, "tags"))], chunk, moment_id, take_id)
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
        listener_text = json_text(listener_tags, "listener_tags")
        rows = [(speaker, "said", json_text(speaker_tags, "speaker_tags"))]
        rows += [(listener, "heard", listener_text) for listener in listeners]
        ids = self._memories.write(rows, content, moment_id, take_id)
        return {"speaker_memory_id": ids[0], "listener_memory_ids": ids[1:]}

    # ------------------------------------------------------------------
    # the character's view (queries.py)

    def query_state(self, character_id: str, moment_id: str, take_id: int,
                    query_text: str | None = None, fact_limit: int = 50,
                    memory_limit: int = 20) -> CharacterState:
        """Everything ``character_id`` knows and has experienced up to
        ``moment_id`` in ``take_id``: facts and memories gated by character,
        moment and take (see ``timeline.py``).

        With ``query_text``, facts and memories are ranked by cosine similarity to
        it (facts by their content) and results carry ``score``; without, they come
        in story order (moment sequence, then id). A fact learned more than once in
        the visible history is reported once, as first learned.
        """
        return self._queries.state(character_id, moment_id, take_id, query_text, fact_limit,
                                   memory_limit)
