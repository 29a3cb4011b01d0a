"""Play sessions the daemon serves, persisted in the store's database.

A session row holds everything a resumed session needs: its state tree and stat
ranges, the turn count, the last narration and the choices offered. A turn's
outcome is saved in one transaction (the session row and that scene's history
row; DuckDB commits it to its write-ahead log before returning), so a daemon
killed between turns resumes exactly where it was and one killed mid-turn
resumes from before that turn, never from half of it.

History: ``session_scenes`` keeps, per scene N, what the session was after it
(state, narration, choices; scene 0 is the initial state, with the campaign's opening
narration and choices when it has one) and the narrative
state engine's moment of that scene. A branch at scene N starts from the row of
scene N-1 and copies rows 0..N-1, so it can itself be branched at any scene it has.

Size: states are stored as compact JSON, the form GetState sends, so the stored size
is what ``state/caps.py`` measures. A new session past the state cap is refused, and so
is a turn that would leave one past it and larger than before (the executor refuses
such patches first); a session saved larger before the cap still loads and plays.
"""

from __future__ import annotations

import json
import threading
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb
import msgspec

from narratoria.runtime.bounded import depth_of
from narratoria.runtime.db import Migration, migrate, transaction
from narratoria.runtime.sessions.summaries import SceneText
from narratoria.runtime.state import SessionState, StatRange
from narratoria.runtime.state.caps import StateCapError

COMPONENT = "sessions"
SCHEMA = "daemon"
ACTIVE, ENDED = "active", "ended"


class SessionError(RuntimeError):
    pass


class SessionNotFound(SessionError):
    pass


class SessionForbidden(SessionError):
    pass


class SessionEnded(SessionError):
    pass


class BadScene(SessionError, ValueError):
    """A scene number a session does not have (a bad ``at_scene``)."""


def _create_v1(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    con.execute(f"""CREATE TABLE {SCHEMA}.sessions (
        id VARCHAR PRIMARY KEY,
        owner VARCHAR NOT NULL,
        campaign VARCHAR NOT NULL DEFAULT '',
        title VARCHAR NOT NULL DEFAULT '',
        playthrough_id VARCHAR NOT NULL,
        status VARCHAR NOT NULL CHECK (status IN ('active', 'ended')),
        created_at TIMESTAMP NOT NULL,
        updated_at TIMESTAMP NOT NULL,
        turns INTEGER NOT NULL DEFAULT 0,
        state_json VARCHAR NOT NULL DEFAULT '{{}}',
        stats_json VARCHAR NOT NULL DEFAULT '{{}}',
        last_narration VARCHAR NOT NULL DEFAULT '',
        choices_json VARCHAR NOT NULL DEFAULT '[]')""")


def _scenes_v2(con: duckdb.DuckDBPyConnection) -> None:
    # A session is a take of the narrative state engine; a branch names its parent.
    # Sessions older than this have no take and no history: they play on, unbranchable.
    # (DuckDB adds no column with a constraint: defaults only, NULLs read as the default.)
    for column in ("take_id BIGINT", "parent_id VARCHAR DEFAULT ''",
                   "branch_scene INTEGER DEFAULT 0", "cast_json VARCHAR DEFAULT '[]'"):
        con.execute(f"ALTER TABLE {SCHEMA}.sessions ADD COLUMN {column}")
    con.execute(f"""CREATE TABLE {SCHEMA}.session_scenes (
        session_id VARCHAR NOT NULL,
        scene INTEGER NOT NULL,
        moment_id VARCHAR,
        input VARCHAR NOT NULL DEFAULT '',
        state_json VARCHAR NOT NULL,
        stats_json VARCHAR NOT NULL,
        narration VARCHAR NOT NULL DEFAULT '',
        choices_json VARCHAR NOT NULL DEFAULT '[]',
        saved_at TIMESTAMP NOT NULL,
        PRIMARY KEY (session_id, scene))""")


MIGRATIONS = [Migration(1, "daemon sessions", _create_v1),
              Migration(2, "scene history and takes", _scenes_v2)]


@dataclass
class SessionRecord:
    id: str
    owner: str
    campaign: str
    title: str
    playthrough_id: str
    status: str
    created_at: datetime
    updated_at: datetime
    turns: int = 0
    state: dict[str, Any] = field(default_factory=dict)
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_narration: str = ""
    choices: list[str] = field(default_factory=list)
    take_id: int | None = None       # its take in the narrative state engine
    parent_id: str = ""              # the session it branched from ("" for none)
    branch_scene: int = 0            # the scene it retried from (0 for none)
    cast: list[dict[str, Any]] = field(default_factory=list)  # npcs.cast_json

    def session_state(self) -> SessionState:
        return SessionState(self.state, {p: StatRange(**r) for p, r in self.stats.items()})


@dataclass
class SceneRecord:
    """A session as it was after one scene (scene 0: as created)."""

    session_id: str
    scene: int
    moment_id: str | None
    input: str
    state: dict[str, Any]
    stats: dict[str, dict[str, Any]]
    narration: str
    choices: list[str]


_COLUMNS = ("id, owner, campaign, title, playthrough_id, status, created_at, updated_at, turns, "
            "state_json, stats_json, last_narration, choices_json, take_id, parent_id, "
            "branch_scene, cast_json")
_SCENE_COLUMNS = "session_id, scene, moment_id, input, state_json, stats_json, narration, choices_json"


def _record(row: tuple[Any, ...]) -> SessionRecord:
    (sid, owner, campaign, title, playthrough, status, created, updated, turns, state, stats,
     narration, choices, take, parent, branch_scene, cast) = row
    return SessionRecord(sid, owner, campaign, title, playthrough, status,
                         created.replace(tzinfo=UTC), updated.replace(tzinfo=UTC), turns,
                         json.loads(state), json.loads(stats), narration, json.loads(choices),
                         take, parent or "", branch_scene or 0, json.loads(cast or "[]"))


def _scene(row: tuple[Any, ...]) -> SceneRecord:
    sid, scene, moment, text, state, stats, narration, choices = row
    return SceneRecord(sid, scene, moment, text, json.loads(state), json.loads(stats), narration,
                       json.loads(choices))


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _tree_json(state: SessionState) -> str:
    # Compact UTF-8, as GetState sends it: the stored size is the size the caps measure.
    return msgspec.json.encode(state.tree).decode()


def stats_json(state: SessionState) -> dict[str, dict[str, Any]]:
    return {p: {"minimum": r.minimum, "maximum": r.maximum, "integer": r.integer}
            for p, r in state.stats.items()}


class SessionStore:
    """Sessions in one DuckDB database (shared with the rest of the store)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con.cursor()
        self._lock = threading.Lock()  # a DuckDB cursor is not thread-safe
        # One writer of session rows at a time, whatever its connection: DuckDB lets a
        # transaction whose snapshot predates another's committed UPDATE of the same row
        # write that row over it (seen: a session ended while its turn was being stored
        # came back active). Taken before any connection's lock, never after.
        self._rows = threading.RLock()
        migrate(self._con, COMPONENT, MIGRATIONS)

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex[:12]

    def create(self, owner: str, campaign: str = "", title: str = "",
               state: SessionState | None = None, *, session_id: str | None = None,
               take_id: int | None = None, cast: list[dict[str, Any]] | None = None,
               moment_id: str | None = None) -> SessionRecord:
        """A new session and its scene 0 (the initial state), in one transaction."""
        sid = session_id or self.new_id()
        now = _now()
        state = state or SessionState()
        if state.size() > state.caps.state_bytes:
            raise StateCapError("state", state.size(), state.caps.state_bytes, "initial session state")
        if (depth := depth_of(state.tree, state.caps.depth)) > state.caps.depth:
            raise StateCapError("depth", depth, state.caps.depth, "initial session state nesting")
        tree, stats = _tree_json(state), json.dumps(stats_json(state))
        with self._lock, transaction(self._con):
            self._con.execute(
                f"INSERT INTO {SCHEMA}.sessions (id, owner, campaign, title, playthrough_id, status, "
                "created_at, updated_at, state_json, stats_json, take_id, cast_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [sid, owner, campaign, title, f"pt-{sid}", ACTIVE, now, now, tree, stats, take_id,
                 json.dumps(cast or [])])
            self._con.execute(
                f"INSERT INTO {SCHEMA}.session_scenes ({_SCENE_COLUMNS}, saved_at) "
                "VALUES (?, 0, ?, '', ?, ?, '', '[]', ?)", [sid, moment_id, tree, stats, now])
        return self.get(sid, owner)

    def set_opening(self, session_id: str, narration: str, choices: list[str]) -> SessionRecord:
        """Scene 0 told: the opening narration and its choices, on the session (what a
        resume shows) and on its scene 0 row (what a branch from scene 1 restores), in
        one transaction. Only a session no turn has been played in is opened."""
        with self._rows, self._lock, transaction(self._con):
            opened = self._con.execute(
                f"UPDATE {SCHEMA}.sessions SET last_narration = ?, choices_json = ? "
                "WHERE id = ? AND turns = 0 RETURNING id",
                [narration, json.dumps(choices), session_id]).fetchone()
            if opened is None:
                raise SessionError(f"session {session_id!r}: no session before its first turn")
            self._con.execute(
                f"UPDATE {SCHEMA}.session_scenes SET narration = ?, choices_json = ? "
                "WHERE session_id = ? AND scene = 0", [narration, json.dumps(choices), session_id])
        return self.get(session_id)

    def branch(self, parent: SessionRecord, at_scene: int, take_id: int, owner: str,
               title: str | None = None) -> SessionRecord:
        """A new session that retries ``parent`` from scene ``at_scene``: as it was after
        scene ``at_scene - 1``, with that history (one transaction); the parent is untouched."""
        base = self.scene(parent.id, at_scene - 1)
        sid = self.new_id()
        now = _now()
        with self._lock, transaction(self._con):
            self._con.execute(
                f"INSERT INTO {SCHEMA}.sessions (id, owner, campaign, title, playthrough_id, status, "
                "created_at, updated_at, turns, state_json, stats_json, last_narration, choices_json, "
                "take_id, parent_id, branch_scene, cast_json) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [sid, owner, parent.campaign, parent.title if title is None else title, f"pt-{sid}",
                 ACTIVE, now, now, at_scene - 1, json.dumps(base.state), json.dumps(base.stats),
                 base.narration, json.dumps(base.choices), take_id, parent.id, at_scene,
                 json.dumps(parent.cast)])
            self._con.execute(
                f"INSERT INTO {SCHEMA}.session_scenes ({_SCENE_COLUMNS}, saved_at) "
                f"SELECT ?, scene, moment_id, input, state_json, stats_json, narration, choices_json, ? "
                f"FROM {SCHEMA}.session_scenes WHERE session_id = ? AND scene < ?",
                [sid, now, parent.id, at_scene])
        return self.get(sid, owner)

    def scene(self, session_id: str, scene: int) -> SceneRecord:
        with self._lock:
            row = self._con.execute(f"SELECT {_SCENE_COLUMNS} FROM {SCHEMA}.session_scenes "
                                    "WHERE session_id = ? AND scene = ?", [session_id, scene]).fetchone()
        if row is None:
            raise BadScene(f"session {session_id!r} has no saved scene {scene} "
                           "(sessions created before scene history cannot be branched)")
        return _scene(row)

    def scenes(self, session_id: str) -> list[SceneRecord]:
        with self._lock:
            rows = self._con.execute(f"SELECT {_SCENE_COLUMNS} FROM {SCHEMA}.session_scenes "
                                     "WHERE session_id = ? ORDER BY scene", [session_id]).fetchall()
        return [_scene(r) for r in rows]

    def scene_texts(self, session_id: str, first: int, last: int) -> list[SceneText]:
        """What scenes ``first``..``last`` said (input and narration), in order: the
        rolling summaries and the narrator's recent scenes read these, never the states."""
        with self._lock:
            rows = self._con.execute(
                f"SELECT scene, input, narration FROM {SCHEMA}.session_scenes "
                "WHERE session_id = ? AND scene BETWEEN ? AND ? AND scene > 0 ORDER BY scene",
                [session_id, first, last]).fetchall()
        return [SceneText(scene, text, narration) for scene, text, narration in rows]

    def get(self, session_id: str, owner: str | None = None) -> SessionRecord:
        """The session; ``owner`` given, only if that client owns it."""
        with self._lock:
            row = self._con.execute(f"SELECT {_COLUMNS} FROM {SCHEMA}.sessions WHERE id = ?",
                                    [session_id]).fetchone()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}")
        record = _record(row)
        if owner is not None and record.owner != owner:
            raise SessionForbidden(f"session {session_id!r} belongs to another client")
        return record

    def list(self, owner: str | None = None, include_ended: bool = False) -> list[SessionRecord]:
        where, params = [], []
        if owner is not None:
            where.append("owner = ?")
            params.append(owner)
        if not include_ended:
            where.append("status = 'active'")
        sql = f"SELECT {_COLUMNS} FROM {SCHEMA}.sessions"
        if where:
            sql += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._con.execute(sql + " ORDER BY created_at, id", params).fetchall()
        return [_record(r) for r in rows]

    def save_turn(self, session_id: str, state: SessionState, narration: str,
                  choices: list[str], *, player_input: str = "",
                  moment_id: str | None = None) -> SessionRecord:
        """Record a finished turn and its history row: one transaction, all of it or none."""
        with self._rows, self._lock, transaction(self._con):
            self.write_turn(self._con, session_id, state, narration, choices,
                            player_input=player_input, moment_id=moment_id)
        return self.get(session_id)

    def row_writes(self) -> AbstractContextManager[bool]:
        """Held around a transaction on another connection that writes a session row
        (:meth:`write_turn`): no other write of session rows overlaps it."""
        return self._rows

    def write_turn(self, cur: duckdb.DuckDBPyConnection, session_id: str, state: SessionState,
                   narration: str, choices: list[str], *, player_input: str = "",
                   moment_id: str | None = None) -> None:
        """The turn's rows, written with ``cur`` inside a transaction the caller holds, so
        another write (the scene's memory) can commit or fail with them. The caller holds
        :meth:`row_writes` from before that transaction begins until it ends.

        StateCapError if the state is past the state cap and larger than the one saved
        (caps.py; the executor refuses such patches first, this is the last line)."""
        tree, stats = _tree_json(state), json.dumps(stats_json(state))
        size, cap = len(tree.encode()), state.caps.state_bytes
        if size > cap:
            saved = cur.execute(f"SELECT strlen(state_json) FROM {SCHEMA}.sessions WHERE id = ?",
                                [session_id]).fetchone()
            if saved is not None and size > saved[0]:
                raise StateCapError("state", size, cap, f"session {session_id!r} state")
        now = _now()
        updated = cur.execute(
            f"UPDATE {SCHEMA}.sessions SET state_json = ?, stats_json = ?, last_narration = ?, "
            "choices_json = ?, turns = turns + 1, updated_at = ? WHERE id = ? AND status = 'active' "
            "RETURNING turns",
            [tree, stats, narration, json.dumps(choices), now, session_id]).fetchone()
        if updated is None:
            raise SessionEnded(f"session {session_id!r} is not active")
        cur.execute(
            f"INSERT INTO {SCHEMA}.session_scenes ({_SCENE_COLUMNS}, saved_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [session_id, updated[0], moment_id, player_input, tree, stats, narration,
             json.dumps(choices), now])

    def end(self, session_id: str, owner: str | None = None) -> SessionRecord:
        self.get(session_id, owner)
        with self._rows, self._lock:
            self._con.execute(f"UPDATE {SCHEMA}.sessions SET status = 'ended', updated_at = ? "
                              "WHERE id = ?", [_now(), session_id])
        return self.get(session_id)

    def count(self, status: str = ACTIVE) -> int:
        with self._lock:
            return int(self._con.execute(f"SELECT count(*) FROM {SCHEMA}.sessions WHERE status = ?",
                                         [status]).fetchone()[0])
