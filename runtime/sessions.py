"""Play sessions the daemon serves, persisted in the store's database.

A session row holds everything a resumed session needs: its state tree and stat
ranges, the turn count, the last narration and the choices offered. A turn's
outcome is saved with one UPDATE (DuckDB commits it to its write-ahead log before
returning), so a daemon killed between turns resumes exactly where it was and one
killed mid-turn resumes from before that turn, never from half of it.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import duckdb

from .db import Migration, migrate
from .state import SessionState, StatRange

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


MIGRATIONS = [Migration(1, "daemon sessions", _create_v1)]


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

    def session_state(self) -> SessionState:
        return SessionState(self.state, {p: StatRange(**r) for p, r in self.stats.items()})


_COLUMNS = ("id, owner, campaign, title, playthrough_id, status, created_at, updated_at, turns, "
            "state_json, stats_json, last_narration, choices_json")


def _record(row: tuple[Any, ...]) -> SessionRecord:
    (sid, owner, campaign, title, playthrough, status, created, updated, turns, state, stats,
     narration, choices) = row
    return SessionRecord(sid, owner, campaign, title, playthrough, status,
                         created.replace(tzinfo=UTC), updated.replace(tzinfo=UTC), turns,
                         json.loads(state), json.loads(stats), narration, json.loads(choices))


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def stats_json(state: SessionState) -> dict[str, dict[str, Any]]:
    return {p: {"minimum": r.minimum, "maximum": r.maximum, "integer": r.integer}
            for p, r in state.stats.items()}


class SessionStore:
    """Sessions in one DuckDB database (shared with the rest of the store)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con.cursor()
        self._lock = threading.Lock()  # a DuckDB cursor is not thread-safe
        migrate(self._con, COMPONENT, MIGRATIONS)

    def create(self, owner: str, campaign: str = "", title: str = "",
               state: SessionState | None = None) -> SessionRecord:
        sid = uuid.uuid4().hex[:12]
        now = _now()
        state = state or SessionState()
        with self._lock:
            self._con.execute(
                f"INSERT INTO {SCHEMA}.sessions (id, owner, campaign, title, playthrough_id, status, "
                "created_at, updated_at, state_json, stats_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [sid, owner, campaign, title, f"pt-{sid}", ACTIVE, now, now,
                 json.dumps(state.tree), json.dumps(stats_json(state))])
        return self.get(sid, owner)

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
                  choices: list[str]) -> SessionRecord:
        """Record a finished turn: one statement, so all of it or none of it."""
        with self._lock:
            updated = self._con.execute(
                f"UPDATE {SCHEMA}.sessions SET state_json = ?, stats_json = ?, last_narration = ?, "
                "choices_json = ?, turns = turns + 1, updated_at = ? WHERE id = ? AND status = 'active' "
                "RETURNING id",
                [json.dumps(state.tree), json.dumps(stats_json(state)), narration,
                 json.dumps(choices), _now(), session_id]).fetchone()
        if updated is None:
            raise SessionEnded(f"session {session_id!r} is not active")
        return self.get(session_id)

    def end(self, session_id: str, owner: str | None = None) -> SessionRecord:
        self.get(session_id, owner)
        with self._lock:
            self._con.execute(f"UPDATE {SCHEMA}.sessions SET status = 'ended', updated_at = ? "
                              "WHERE id = ?", [_now(), session_id])
        return self.get(session_id)

    def count(self, status: str = ACTIVE) -> int:
        with self._lock:
            return int(self._con.execute(f"SELECT count(*) FROM {SCHEMA}.sessions WHERE status = ?",
                                         [status]).fetchone()[0])
