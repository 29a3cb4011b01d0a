"""StoreActor: the only process that opens the DuckDB file.

It holds the persistence layer (memories, lore, reputation, …), the daemon's
sessions and the narrative state engine (sessions as takes, scenes as moments,
NPCs as characters: ``runtime/sessions/storyline.py``) in one database. Vectors
come from the EmbedderActor. A threaded actor: DuckDB serves concurrent readers
through per-thread cursors, and the store serialises writers itself.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from narratoria.runtime.campaign import IngestResult, ingest
from narratoria.runtime.campaign.ingest import STEP_PAUSE
from narratoria.runtime.characters.realize import Realization, ensure_in_store
from narratoria.runtime.db import DB_FILENAME, connect
from narratoria.runtime.files import PRIVATE_UMASK
from narratoria.runtime.sessions import export
from narratoria.runtime.sessions.store import SessionRecord, SessionStore
from narratoria.runtime.sessions.storyline import OpenScene, Storyline
from narratoria.runtime.state import SessionState, StatRange
from narratoria.runtime.store import MemoryEvent, PersistenceStore, ScoreChange
from narratoria.runtime.streams import ProducerStream, Put
from narratoria.runtime.turn.grounding import lore_scope

from narratoria.actors.embedder import RemoteEmbedder


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _doc(text: str, what: str) -> Any:
    try:
        return msgspec.json.decode(text) if text else {}
    except msgspec.DecodeError as exc:
        raise ValueError(f"{what}: not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError(f"{what}: JSON nested too deeply") from None


class StoreActor:
    """Holds the database connection and the stores over it; a plain class, made a Ray
    actor in ``daemon.py``."""

    def __init__(self, data_dir: str, embedder_name: str = "embedder") -> None:
        # The daemon sets this umask before starting Ray; a worker of a cluster joined
        # through RAY_ADDRESS was started without it, and the database must stay private.
        os.umask(PRIVATE_UMASK)
        self.path = Path(data_dir) / DB_FILENAME
        self._con = connect(self.path)
        embedder = RemoteEmbedder.named(embedder_name)
        self.store = PersistenceStore(self._con, embedder)
        self.sessions = SessionStore(self._con)
        self.storyline = Storyline(self._con, self.sessions, self.store, embedder)

    def status(self) -> dict[str, Any]:
        return {"path": str(self.path), "pid": os.getpid()}

    # sessions --------------------------------------------------------------------------

    def create_session(self, owner: str, campaign: str, title: str,
                       state_json: str = "", stats: dict[str, StatRange] | None = None,
                       cast: dict[str, Any] | None = None) -> SessionRecord:
        initial = _doc(state_json, "state_json")
        if not isinstance(initial, dict):
            raise ValueError("state_json: must be a JSON object")
        return self.storyline.create_session(owner, campaign, title, initial, stats=stats,
                                             cast=cast)

    def set_opening(self, session_id: str, narration: str, choices: list[str]) -> SessionRecord:
        return self.sessions.set_opening(session_id, narration, choices)

    def branch_session(self, session_id: str, owner: str | None, at_scene: int) -> SessionRecord:
        return self.storyline.branch(session_id, owner, at_scene)

    def export_session(self, session_id: str, owner: str | None,
                       campaign_version: str = "") -> bytes:
        """The session as a .narratorio-full archive (runtime/sessions/export.py)."""
        return export.export_session(self._con, session_id, owner, campaign_version)

    def import_session(self, archive: bytes, owner: str) -> tuple[SessionRecord, export.Imported]:
        """Restore an archive as a session of ``owner``: one transaction, or nothing."""
        imported = export.import_session(self._con, self.store, self.sessions, archive, owner)
        return self.sessions.get(imported.session_id), imported

    def open_scene(self, session_id: str, scene: int, player_input: str) -> OpenScene:
        return self.storyline.open_scene(session_id, scene, player_input)

    def get_session(self, session_id: str, owner: str | None = None) -> SessionRecord:
        return self.sessions.get(session_id, owner)

    def list_sessions(self, owner: str | None, include_ended: bool) -> list[SessionRecord]:
        return self.sessions.list(owner, include_ended)

    def end_session(self, session_id: str, owner: str | None) -> SessionRecord:
        return self.sessions.end(session_id, owner)

    def save_turn(self, session_id: str, state: SessionState, narration: str, choices: list[str],
                  player_input: str = "", moment_id: str | None = None,
                  witnesses: list[str] | None = None, summary: str = "",
                  memory: tuple[str, MemoryEvent] | None = None) -> SessionRecord:
        return self.storyline.save_turn(session_id, state, narration, choices, player_input,
                                        moment_id, witnesses or [], summary, memory)

    def session_count(self) -> int:
        return self.sessions.count()

    # campaigns -------------------------------------------------------------------------

    def ingest_campaign(self, path: str) -> Iterator[tuple[str, int, int] | IngestResult]:
        """Ingest the campaign at ``path`` (incremental): its progress as (phase, done,
        total), then the IngestResult (a streaming generator). Runs here because this
        actor owns the database file; a CLI beside a running daemon cannot open it."""
        def work(put: Put[tuple[str, int, int]], stop: threading.Event) -> IngestResult:
            # In paced steps: this store and the embedder serve turns meanwhile.
            return ingest(Path(path), self.store, progress=lambda *p: put(p), pause=STEP_PAUSE)

        with ProducerStream.thread(work, name="ingest") as progress:
            yield from progress
            yield progress.result

    def add_player_chunks(self, realization: Realization) -> int:
        """A realised player character's chunks in its campaign's lore (isPlayer)."""
        return ensure_in_store(self.store, realization)

    def has_lore(self, campaign_id: str) -> bool:
        """Whether lore of ``campaign_id`` is stored (ingested, perhaps from a folder gone since)."""
        return bool(self.store.playthrough(lore_scope(campaign_id)).exact_match(
            "lore_chunk", {"campaignId": campaign_id}, limit=1))

    # the scene's memory ----------------------------------------------------------------

    def recall(self, playthrough_id: str, query: str, limit: int) -> list[str]:
        hits = self.store.playthrough(playthrough_id).semantic_search(query, "memory_event", limit)
        return [hit.record.summary for hit in hits]  # type: ignore[attr-defined]

    # the Store service (skills), JSON in and out ----------------------------------------

    def put(self, playthrough_id: str, data_type: str, record_json: str) -> str:
        record = self.store.playthrough(playthrough_id).store(data_type, _doc(record_json, "record_json"))
        return _json(record)

    def update(self, playthrough_id: str, data_type: str, key: str, changes_json: str) -> str:
        changes = _doc(changes_json, "changes_json")
        return _json(self.store.playthrough(playthrough_id).update(data_type, key, changes))

    def adjust_score(self, playthrough_id: str, data_type: str, key: str, delta: float,
                     event: str) -> str:
        record = self.store.playthrough(playthrough_id).adjust_score(
            data_type, key, delta, event=event or None)
        return _json(record)

    def adjust_scores(self, playthrough_id: str, data_type: str, changes: list[dict[str, Any]],
                      event: str) -> list[str]:
        """Several scores in one store transaction; ``changes``: {key, delta, minimum?,
        maximum?, decay_rate?} each (the proto's ScoreDelta)."""
        records = self.store.playthrough(playthrough_id).adjust_scores(
            data_type, [ScoreChange(**change) for change in changes], event=event or None)
        return [_json(r) for r in records]

    def delete(self, playthrough_id: str, data_type: str, key: str) -> bool:
        return self.store.playthrough(playthrough_id).delete(data_type, key)

    def get(self, playthrough_id: str, data_type: str, key: str) -> str:
        record = self.store.playthrough(playthrough_id).get(data_type, key)
        return "" if record is None else _json(record)

    def semantic_search(self, playthrough_id: str, data_type: str, query: str, limit: int,
                        filters_json: str, min_score: float | None) -> list[tuple[str, float]]:
        hits = self.store.playthrough(playthrough_id).semantic_search(
            query, data_type, limit or 5, _doc(filters_json, "filters_json") or None,
            min_score=min_score)
        return [(_json(h.record), h.score) for h in hits]

    def exact_match(self, playthrough_id: str, data_type: str, filters_json: str,
                    limit: int) -> list[str]:
        records = self.store.playthrough(playthrough_id).exact_match(
            data_type, _doc(filters_json, "filters_json") or None, limit=limit or None)
        return [_json(r) for r in records]

    def close(self) -> None:
        self.storyline.close()
        self.store.close()
        self._con.close()
