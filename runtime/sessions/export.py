"""Playthrough export and import: one session as a ``.narratorio-full`` archive.

The architecture spec's full export ("Campaign + session saves + progress") is a
single ZIP. This one holds a playthrough, never the campaign's files: the campaign
is named by id and version, and the importing side plays it from its own copy.

Members (JSON, UTF-8)::

    manifest.json   format, formatVersion, exportedAt, session id, campaign {id, version}
    session.json    the session row (state, stats, cast, counters) and every scene row
                    (input, narration, choices, state after it, its engine moment)
    records.json    the playthrough's persistence records by data type (memories,
                    reputation, perception...), as the Store service sends them; their
                    vectors are made again from their text on import (same embedder)
    narrative.json  the narrative state engine's rows the session can see: its take
                    and the ancestry it branched from (cut at each branch point),
                    moments, characters, facts, knowledge events and NPC memories,
                    with their vectors (base64 float32), so an NPC's knowledge query
                    answers the same after import

Import writes everything in ONE database transaction after checking the whole
archive: a bad or corrupt file raises ``ArchiveError`` naming the member and field,
and writes nothing. It never overwrites: a session id, moment id or character id the
database already has gets a new one; moment sequences are renumbered above the
database's (only their order matters to visibility); takes, facts and memories get
new ids from the engine's sequences.
"""

from __future__ import annotations

import base64
import io
import json
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb
import msgspec
import numpy as np

from narratoria.runtime.narrative.models import CHUNK_TYPES, KNOWLEDGE_SOURCES, TAKE_STATUSES
from narratoria.runtime.narrative.schema import SCHEMA as NARRATIVE
from narratoria.runtime.sessions.store import (_COLUMNS, _SCENE_COLUMNS, SCHEMA as SESSIONS,
                                               SceneRecord, SessionForbidden, SessionNotFound,
                                               SessionRecord, SessionStore, _record, _scene)
from narratoria.runtime.state import SessionState, StatRange
from narratoria.runtime.store import DuplicateRecord, PersistenceStore, Record, RecordError
from narratoria.runtime.store.records import DataType, to_record
from narratoria.runtime.store.rows import from_row, insert_many, quoted
from narratoria.runtime.store.schema import SPECS

FORMAT = "narratorio-full"
FORMAT_VERSION = 1
SUFFIX = ".narratorio-full"
MEMBERS = ("manifest.json", "session.json", "records.json", "narrative.json")
# An archive is read whole into memory, and any client may send one: refuse a member
# that would inflate past this (a thousand-turn session's records are a few MiB).
MEMBER_MAX_BYTES = 32 * 1024 * 1024
# Records of a playthrough that belong to it alone (lore is the campaign's, shared).
PLAYTHROUGH_TYPES = tuple(t for t in DataType if t is not DataType.LORE_CHUNK)


class ArchiveError(ValueError):
    """A bad or corrupt archive; the message starts with the member and field at fault."""


# -- reading the database --------------------------------------------------------------

def _rows(cur: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    result = cur.execute(sql, list(params))
    names = [d[0] for d in result.description]
    return [dict(zip(names, row)) for row in result.fetchall()]


def _vector_b64(vector: Any) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def _chain(cur: duckdb.DuckDBPyConnection, take_id: int) -> list[dict[str, Any]]:
    """The take and its ancestors, root first, each with the exclusive sequence cutoff
    below which the session sees its rows (None: all of them) -- timeline.py's rule."""
    return _rows(cur, f"""
        WITH RECURSIVE chain(depth, take_id, parent_id, branch_point, cutoff) AS (
            SELECT 0, id, parent_take_id, branch_point, CAST(NULL AS BIGINT)
            FROM {NARRATIVE}.takes WHERE id = ?
          UNION ALL
            SELECT c.depth + 1, t.id, t.parent_take_id, t.branch_point,
                   CASE WHEN c.cutoff IS NULL THEN b.sequence ELSE least(c.cutoff, b.sequence) END
            FROM chain c
            JOIN {NARRATIVE}.moments b ON b.id = c.branch_point
            JOIN {NARRATIVE}.takes t ON t.id = c.parent_id)
        SELECT t.id, t.parent_take_id, t.branch_point, t.created_at, t.status, t.notes, c.cutoff
        FROM chain c JOIN {NARRATIVE}.takes t ON t.id = c.take_id
        ORDER BY c.depth DESC""", [take_id])


def _visible(chain: list[dict[str, Any]]) -> tuple[str, list[Any]]:
    """SQL keeping the rows of the chain the session can see at some moment of its own."""
    terms, params = [], []
    for take in chain:
        if take["cutoff"] is None:
            terms.append("(take_id = ?)")
            params.append(take["id"])
        else:
            terms.append("(take_id = ? AND moment_seq < ?)")
            params += [take["id"], take["cutoff"]]
    return " OR ".join(terms) or "false", params


def _narrative(cur: duckdb.DuckDBPyConnection, session: SessionRecord,
               scenes: list[SceneRecord]) -> dict[str, Any]:
    if session.take_id is None:  # a session older than takes: no engine rows
        return {"takes": [], "moments": [], "characters": [], "facts": [],
                "knowledge": [], "memories": []}
    chain = _chain(cur, session.take_id)
    where, params = _visible(chain)
    knowledge = _rows(cur, f"SELECT id, character_id, fact_id, moment_id, take_id, source "
                           f"FROM {NARRATIVE}.knowledge_events WHERE {where} ORDER BY id", params)
    memories = _rows(cur, f"SELECT id, character_id, chunk, embedding, embedding_model, "
                          f"embedding_version, moment_id, take_id, chunk_type, tags "
                          f"FROM {NARRATIVE}.memories WHERE {where} ORDER BY id", params)
    fact_ids = sorted({k["fact_id"] for k in knowledge})
    facts = _rows(cur, f"SELECT id, content, category, created_at, embedding, embedding_model, "
                       f"embedding_version FROM {NARRATIVE}.facts "
                       f"WHERE id IN (SELECT unnest(?::BIGINT[])) ORDER BY id", [fact_ids])
    characters = sorted({c["character_id"] for c in session.cast}
                        | {k["character_id"] for k in knowledge}
                        | {m["character_id"] for m in memories})
    cast = _rows(cur, f"SELECT id, name, traits, voice FROM {NARRATIVE}.characters "
                      f"WHERE id IN (SELECT unnest(?::VARCHAR[])) ORDER BY id", [characters])
    moment_ids = ({s.moment_id for s in scenes if s.moment_id}
                  | {t["branch_point"] for t in chain if t["branch_point"]}
                  | {f["created_at"] for f in facts}
                  | {k["moment_id"] for k in knowledge} | {m["moment_id"] for m in memories})
    moments = _rows(cur, f"SELECT id, sequence, label, metadata FROM {NARRATIVE}.moments "
                         f"WHERE id IN (SELECT unnest(?::VARCHAR[])) ORDER BY sequence",
                    [sorted(moment_ids)])
    for row in (*facts, *memories):
        row["embedding"] = _vector_b64(row["embedding"])
    takes = [{k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in t.items()
              if k != "cutoff"} for t in chain]
    return {"takes": takes, "moments": moments, "characters": cast, "facts": facts,
            "knowledge": knowledge, "memories": memories}


def _records(cur: duckdb.DuckDBPyConnection, playthrough_id: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for data_type in PLAYTHROUGH_TYPES:
        spec = SPECS[data_type]
        rows = cur.execute(f"SELECT {quoted(spec.columns)} FROM {spec.table} "
                           f'WHERE playthrough_id = ? ORDER BY "{spec.time_column}", "{spec.key}"',
                           [playthrough_id]).fetchall()
        out[data_type.value] = [msgspec.to_builtins(from_row(spec, row)) for row in rows]
    return out


def _scene_doc(scene: SceneRecord) -> dict[str, Any]:
    return {"scene": scene.scene, "moment_id": scene.moment_id, "input": scene.input,
            "state": scene.state, "stats": scene.stats, "narration": scene.narration,
            "choices": scene.choices}


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.replace(tzinfo=UTC).isoformat()


def _session_doc(record: SessionRecord) -> dict[str, Any]:
    return {"id": record.id, "campaign": record.campaign, "title": record.title,
            "status": record.status, "created_at": record.created_at.isoformat(),
            "updated_at": record.updated_at.isoformat(), "turns": record.turns,
            "state": record.state, "stats": record.stats, "last_narration": record.last_narration,
            "choices": record.choices, "parent_id": record.parent_id,
            "branch_scene": record.branch_scene, "cast": record.cast}


def export_session(con: duckdb.DuckDBPyConnection, session_id: str, owner: str | None = None,
                   campaign_version: str = "") -> bytes:
    """The session ``session_id`` (``owner``'s, when given) as a ``.narratorio-full`` archive.
    Read in one transaction: a turn saved meanwhile is in it whole or not at all."""
    cur = con.cursor()
    try:
        cur.execute("BEGIN TRANSACTION")
        try:
            row = cur.execute(f"SELECT {_COLUMNS} FROM {SESSIONS}.sessions WHERE id = ?",
                              [session_id]).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id!r}")
            record = _record(row)
            if owner is not None and record.owner != owner:
                raise SessionForbidden(f"session {session_id!r} belongs to another client")
            scenes = [_scene(r) for r in cur.execute(
                f"SELECT {_SCENE_COLUMNS} FROM {SESSIONS}.session_scenes WHERE session_id = ? "
                "ORDER BY scene", [session_id]).fetchall()]
            saved = dict(cur.execute(f"SELECT scene, saved_at FROM {SESSIONS}.session_scenes "
                                     "WHERE session_id = ?", [session_id]).fetchall())
            narrative = _narrative(cur, record, scenes)
            records = _records(cur, record.playthrough_id)
        finally:
            cur.execute("ROLLBACK")
    finally:
        cur.close()
    manifest = {"format": FORMAT, "formatVersion": FORMAT_VERSION,
                "exportedAt": datetime.now(UTC).isoformat(), "sessionId": record.id,
                "campaign": {"id": record.campaign, "version": campaign_version},
                "takeId": record.take_id}
    session = {"session": _session_doc(record),
               "scenes": [{**_scene_doc(s), "saved_at": _iso(saved.get(s.scene))} for s in scenes]}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, doc in zip(MEMBERS, (manifest, session, records, narrative)):
            archive.writestr(name, json.dumps(doc, ensure_ascii=False, indent=1, default=str))
    return buffer.getvalue()


# -- reading an archive ----------------------------------------------------------------

class _Check:
    """Field checks that name where they failed: ``session.json: scenes[2].input: ...``."""

    def __init__(self, member: str) -> None:
        self.member = member

    def fail(self, path: str, message: str) -> ArchiveError:
        return ArchiveError(f"{self.member}: {path}: {message}" if path else
                            f"{self.member}: {message}")

    def obj(self, value: Any, path: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a JSON object, got {type(value).__name__}")
        return value

    def items(self, value: Any, path: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(path, f"must be a JSON list, got {type(value).__name__}")
        return value

    def field(self, doc: dict[str, Any], name: str, kind: type | tuple[type, ...], path: str,
              optional: bool = False) -> Any:
        where = f"{path}.{name}" if path else name
        if name not in doc:
            if optional:
                return None
            raise self.fail(where, "missing")
        value = doc[name]
        if value is None and optional:
            return None
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(where, f"must be {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise self.fail(where, f"must be {_kind_name(kind)}, got {type(value).__name__}")
        return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", dict: "an object", list: "a list",
             float: "a number", bool: "a boolean"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


@dataclass
class Archive:
    manifest: dict[str, Any]
    session: dict[str, Any]
    scenes: list[dict[str, Any]]
    records: dict[str, list[Record]]
    narrative: dict[str, list[dict[str, Any]]]


def _member(archive: zipfile.ZipFile, name: str) -> Any:
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise ArchiveError(f"{name}: missing from the archive") from None
    if info.file_size > MEMBER_MAX_BYTES:
        raise ArchiveError(f"{name}: {info.file_size} bytes unpacked; at most {MEMBER_MAX_BYTES}")
    try:
        data = archive.read(name)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:  # a bad CRC, a cut file
        raise ArchiveError(f"{name}: corrupt: {exc}") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ArchiveError(f"{name}: not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ArchiveError(f"{name}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ArchiveError(f"{name}: JSON nested too deeply") from None


def read_archive(data: bytes) -> Archive:
    """Every member parsed and checked, or ArchiveError naming the member and field."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile as exc:
        raise ArchiveError(f"not a {SUFFIX} archive (a ZIP file): {exc}") from None
    with archive:
        manifest, session, records, narrative = (_member(archive, n) for n in MEMBERS)
    m = _Check("manifest.json")
    m.obj(manifest, "")
    if m.field(manifest, "format", str, "") != FORMAT:
        raise m.fail("format", f"{manifest['format']!r}; expected {FORMAT!r}")
    version = m.field(manifest, "formatVersion", int, "")
    if version != FORMAT_VERSION:
        raise m.fail("formatVersion", f"{version}; this Narratoria reads version {FORMAT_VERSION}")
    m.obj(m.field(manifest, "campaign", dict, ""), "campaign")
    s = _Check("session.json")
    s.obj(session, "")
    row = s.field(session, "session", dict, "")
    _check_session(s, row)
    scenes = s.items(s.field(session, "scenes", list, ""), "scenes")
    _check_scenes(s, scenes, row["turns"])
    parsed = _check_records(records)
    _check_narrative(narrative, row, scenes)
    return Archive(manifest, row, scenes, parsed, narrative)


def _check_state(c: _Check, state: Any, stats: Any, path: str) -> None:
    c.obj(state, f"{path}.state")
    c.obj(stats, f"{path}.stats")
    try:
        ranges = {p: StatRange(**c.obj(r, f"{path}.stats.{p}")) for p, r in stats.items()}
        SessionState(state, ranges)
    except ArchiveError:
        raise
    except Exception as exc:  # noqa: BLE001 - the state's own checks name what is wrong
        raise c.fail(f"{path}.state", str(exc)) from None


def _check_session(c: _Check, row: dict[str, Any]) -> None:
    for name in ("id", "campaign", "title", "status", "created_at", "updated_at",
                 "last_narration", "parent_id"):
        c.field(row, name, str, "session")
    if not row["id"].strip():
        raise c.fail("session.id", "must not be empty")
    if row["status"] not in ("active", "ended"):
        raise c.fail("session.status", f"{row['status']!r}; expected 'active' or 'ended'")
    for name in ("created_at", "updated_at"):
        _when(c, row[name], f"session.{name}")
    if c.field(row, "turns", int, "session") < 0:
        raise c.fail("session.turns", "must not be negative")
    c.field(row, "branch_scene", int, "session")
    for i, choice in enumerate(c.field(row, "choices", list, "session")):
        if not isinstance(choice, str):
            raise c.fail(f"session.choices[{i}]", "must be a string")
    for i, npc in enumerate(c.field(row, "cast", list, "session")):
        c.obj(npc, f"session.cast[{i}]")
        for name in ("id", "name", "character_id"):
            c.field(npc, name, str, f"session.cast[{i}]")
    _check_state(c, row.get("state"), row.get("stats"), "session")


def _when(c: _Check, text: str, path: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise c.fail(path, f"{text!r} is not an ISO 8601 time") from None


def _check_scenes(c: _Check, scenes: list[Any], turns: int) -> None:
    numbers = []
    for i, scene in enumerate(scenes):
        path = f"scenes[{i}]"
        c.obj(scene, path)
        numbers.append(c.field(scene, "scene", int, path))
        c.field(scene, "moment_id", str, path, optional=True)
        c.field(scene, "input", str, path)
        c.field(scene, "narration", str, path)
        if c.field(scene, "saved_at", str, path, optional=True) is not None:
            _when(c, scene["saved_at"], f"{path}.saved_at")
        for j, choice in enumerate(c.field(scene, "choices", list, path)):
            if not isinstance(choice, str):
                raise c.fail(f"{path}.choices[{j}]", "must be a string")
        _check_state(c, scene.get("state"), scene.get("stats"), path)
    # A session older than scene history has none; any other has scenes 0..turns.
    if numbers and numbers != list(range(len(numbers))):
        raise c.fail("scenes", f"scene numbers {numbers} are not 0, 1, 2... in order")
    if numbers and numbers[-1] != turns:
        raise c.fail("scenes", f"the last scene is {numbers[-1]}, but session.turns is {turns}")


def _check_records(records: Any) -> dict[str, list[Record]]:
    c = _Check("records.json")
    c.obj(records, "")
    parsed: dict[str, list[Record]] = {}
    for name, items in records.items():
        try:
            data_type = DataType(name)
        except ValueError:
            raise c.fail(name, "not a data type of this Narratoria") from None
        if data_type not in PLAYTHROUGH_TYPES:
            raise c.fail(name, "not a playthrough's own data type")
        out = []
        for i, item in enumerate(c.items(items, name)):
            c.obj(item, f"{name}[{i}]")
            try:
                out.append(to_record(data_type, item))
            except (RecordError, msgspec.ValidationError, TypeError) as exc:
                raise c.fail(f"{name}[{i}]", str(exc)) from None
        parsed[name] = out
    return parsed


_NARRATIVE_FIELDS: dict[str, dict[str, tuple[type | tuple[type, ...], bool]]] = {
    # table -> field -> (kind, optional)
    "takes": {"id": (int, False), "parent_take_id": (int, True), "branch_point": (str, True),
              "created_at": (str, False), "status": (str, False), "notes": (str, True)},
    "moments": {"id": (str, False), "sequence": (int, False), "label": (str, True),
                "metadata": (str, True)},
    "characters": {"id": (str, False), "name": (str, False), "traits": (str, True),
                   "voice": (str, True)},
    "facts": {"id": (int, False), "content": (str, False), "category": (str, True),
              "created_at": (str, False), "embedding": (str, False),
              "embedding_model": (str, False), "embedding_version": (str, False)},
    "knowledge": {"id": (int, False), "character_id": (str, False), "fact_id": (int, False),
                  "moment_id": (str, False), "take_id": (int, False), "source": (str, True)},
    "memories": {"id": (int, False), "character_id": (str, False), "chunk": (str, False),
                 "embedding": (str, False), "embedding_model": (str, False),
                 "embedding_version": (str, False), "moment_id": (str, False),
                 "take_id": (int, False), "chunk_type": (str, False), "tags": (str, True)},
}


def _check_narrative(doc: Any, session: dict[str, Any], scenes: list[dict[str, Any]]) -> None:
    c = _Check("narrative.json")
    c.obj(doc, "")
    for table, fields in _NARRATIVE_FIELDS.items():
        for i, row in enumerate(c.items(c.field(doc, table, list, ""), table)):
            c.obj(row, f"{table}[{i}]")
            for name, (kind, optional) in fields.items():
                c.field(row, name, kind, f"{table}[{i}]", optional=optional)
            for name in ("embedding",):
                if name in row:
                    try:
                        size = len(base64.b64decode(row[name], validate=True))
                    except ValueError:
                        raise c.fail(f"{table}[{i}].embedding", "not base64") from None
                    if size == 0 or size % 4:
                        raise c.fail(f"{table}[{i}].embedding",
                                     f"{size} bytes are no float32 vector")
    for table, name, allowed in (("knowledge", "source", (None, *KNOWLEDGE_SOURCES)),
                                 ("memories", "chunk_type", CHUNK_TYPES),
                                 ("takes", "status", TAKE_STATUSES)):
        for i, row in enumerate(doc[table]):
            if row[name] not in allowed:
                raise c.fail(f"{table}[{i}].{name}", f"{row[name]!r}; expected one of "
                             f"{', '.join(repr(a) for a in allowed if a is not None)}")
    moments = {m["id"] for m in doc["moments"]}
    if len(moments) != len(doc["moments"]) or \
            len({m["sequence"] for m in doc["moments"]}) != len(doc["moments"]):
        raise c.fail("moments", "a moment id or sequence appears twice")
    takes = {t["id"] for t in doc["takes"]}
    characters = {ch["id"] for ch in doc["characters"]}
    facts = {f["id"] for f in doc["facts"]}

    def known(value: Any, among: set[Any], path: str, what: str) -> None:
        if value is not None and value not in among:
            raise c.fail(path, f"{value!r} is not among the archive's {what}")

    for i, take in enumerate(doc["takes"]):
        if i == 0 and take["parent_take_id"] is not None:
            raise c.fail("takes[0].parent_take_id", "the first take must be a root")
        if i > 0 and take["parent_take_id"] != doc["takes"][i - 1]["id"]:
            raise c.fail(f"takes[{i}].parent_take_id", "must be the take before it (root first)")
        if (take["parent_take_id"] is None) != (take["branch_point"] is None):
            raise c.fail(f"takes[{i}].branch_point", "a branch (and only a branch) has one")
        known(take["branch_point"], moments, f"takes[{i}].branch_point", "moments")
    for i, fact in enumerate(doc["facts"]):
        known(fact["created_at"], moments, f"facts[{i}].created_at", "moments")
    for table in ("knowledge", "memories"):
        for i, row in enumerate(doc[table]):
            known(row["character_id"], characters, f"{table}[{i}].character_id", "characters")
            known(row["moment_id"], moments, f"{table}[{i}].moment_id", "moments")
            known(row["take_id"], takes, f"{table}[{i}].take_id", "takes")
            if table == "knowledge":
                known(row["fact_id"], facts, f"{table}[{i}].fact_id", "facts")
    s = _Check("session.json")
    for i, scene in enumerate(scenes):
        if scene["moment_id"] is not None and doc["moments"]:
            if scene["moment_id"] not in moments:
                raise s.fail(f"scenes[{i}].moment_id",
                             f"{scene['moment_id']!r} is not among narrative.json's moments")
    for i, npc in enumerate(session["cast"]):
        if doc["takes"] and npc["character_id"] not in characters:
            raise s.fail(f"session.cast[{i}].character_id",
                         f"{npc['character_id']!r} is not among narrative.json's characters")


# -- writing it into a database --------------------------------------------------------

@dataclass
class Imported:
    session_id: str
    renamed_from: str | None       # the archive's session id, when that one was taken
    moments: int
    memories: int


def _exists(cur: duckdb.DuckDBPyConnection, table: str, key: str) -> bool:
    return cur.execute(f"SELECT 1 FROM {table} WHERE id = ?", [key]).fetchone() is not None


Vector = tuple[np.ndarray, str, str]  # the vector, its embedding model and version


def _vectors(rows: list[dict[str, Any]], dims: int, embed: Callable[[list[str]], np.ndarray],
             text: str, model: tuple[str, str], member: str) -> list[Vector]:
    """Each row's vector as exported, or made again from its text when it was made by
    another embedder or has another width than this database stores."""
    out: list[Vector | None] = []
    redo = []
    for i, row in enumerate(rows):
        vector = np.frombuffer(base64.b64decode(row["embedding"]), dtype="<f4")
        if vector.shape[0] == dims and (row["embedding_model"], row["embedding_version"]) == model:
            if not np.all(np.isfinite(vector)):
                raise ArchiveError(f"narrative.json: {member}[{i}].embedding: not finite")
            out.append((vector, row["embedding_model"], row["embedding_version"]))
        else:
            out.append(None)
            redo.append(i)
    if redo:
        made = embed([rows[i][text] for i in redo])
        for i, vector in zip(redo, made):
            out[i] = (np.asarray(vector, dtype=np.float32), *model)
    return [v for v in out if v is not None]


def _vec_sql(dims: int) -> str:
    return f"string_split(?, ',')::FLOAT[{dims}]"


def _vec_text(vector: np.ndarray) -> str:
    return ",".join(repr(float(x)) for x in vector)


@contextmanager
def _part(name: str) -> Iterator[None]:
    """A database error while writing ``name`` as an ArchiveError naming it (raised inside
    the transaction, which then rolls back)."""
    try:
        yield
    except duckdb.Error as exc:
        raise ArchiveError(f"{name}: {exc}; nothing was imported") from None


class _Writer:
    """The archive's rows, renamed where the database has them already, in one cursor's
    transaction (the caller's)."""

    def __init__(self, cur: duckdb.DuckDBPyConnection, archive: Archive, session_id: str,
                 owner: str, dims: int, vectors: dict[str, list[Vector]]) -> None:
        self.cur, self.a, self.sid, self.owner = cur, archive, session_id, owner
        self.dims, self.vectors = dims, vectors
        self.moments: dict[str, str] = {}
        self.characters: dict[str, str] = {}
        self.takes: dict[int, int] = {}
        self.facts: dict[int, int] = {}
        self.seqs: dict[str, int] = {}  # archive moment id -> its new sequence

    def write(self) -> None:
        n = self.a.narrative
        with _part("narrative.json: moments"):
            self._moments(n["moments"])
        with _part("narrative.json: characters"):
            self._characters(n["characters"])
        with _part("narrative.json: takes"):
            self._takes(n["takes"])
        with _part("narrative.json: facts"):
            self._facts(n["facts"])
        with _part("narrative.json: knowledge"):
            self._knowledge(n["knowledge"])
        with _part("narrative.json: memories"):
            self._memories(n["memories"])
        with _part("session.json"):
            self._session()

    def _knowledge(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.cur.execute(
                f"INSERT INTO {NARRATIVE}.knowledge_events (character_id, fact_id, moment_id, "
                "moment_seq, take_id, source) VALUES (?, ?, ?, ?, ?, ?)",
                [self.characters[row["character_id"]], self.facts[row["fact_id"]],
                 self.moments[row["moment_id"]], self.seqs[row["moment_id"]],
                 self.takes[row["take_id"]], row["source"]])
    def _memories(self, rows: list[dict[str, Any]]) -> None:
        for row, (vector, model, version) in zip(rows, self.vectors["memories"]):
            self.cur.execute(
                f"INSERT INTO {NARRATIVE}.memories (character_id, chunk, embedding, "
                f"embedding_model, embedding_version, moment_id, moment_seq, take_id, chunk_type, "
                f"tags) "
                f"VALUES (?, ?, {_vec_sql(self.dims)}, ?, ?, ?, ?, ?, ?, ?)",
                [self.characters[row["character_id"]], row["chunk"], _vec_text(vector), model,
                 version, self.moments[row["moment_id"]], self.seqs[row["moment_id"]],
                 self.takes[row["take_id"]], row["chunk_type"], row["tags"]])

    def _moments(self, moments: list[dict[str, Any]]) -> None:
        # Renumbered above every sequence here, in the archive's order: visibility
        # compares sequences only among the session's own moments.
        base = self.cur.execute(
            f"SELECT coalesce(max(sequence), 0) FROM {NARRATIVE}.moments").fetchone()[0]
        for i, moment in enumerate(sorted(moments, key=lambda m: m["sequence"])):
            new = moment["id"]
            if _exists(self.cur, f"{NARRATIVE}.moments", new):
                new = f"{self.sid}~{moment['id']}"
            self.moments[moment["id"]] = new
            self.seqs[moment["id"]] = base + 1 + i
            self.cur.execute(f"INSERT INTO {NARRATIVE}.moments VALUES (?, ?, ?, ?)",
                             [new, base + 1 + i, moment["label"], moment["metadata"]])

    def _characters(self, characters: list[dict[str, Any]]) -> None:
        for ch in characters:
            new, n = ch["id"], 1
            while _exists(self.cur, f"{NARRATIVE}.characters", new):
                # The engine's ids are "<lineage>/<npc>": the new session is its own lineage.
                new = f"{self.sid}/{ch['id'].rsplit('/', 1)[-1]}" + ("" if n == 1 else f"-{n}")
                n += 1
            self.characters[ch["id"]] = new
            self.cur.execute(f"INSERT INTO {NARRATIVE}.characters VALUES (?, ?, ?, ?)",
                             [new, ch["name"], ch["traits"], ch["voice"]])

    def _takes(self, takes: list[dict[str, Any]]) -> None:
        for take in takes:  # root first: each parent is written before its branch
            parent = None if take["parent_take_id"] is None else self.takes[take["parent_take_id"]]
            point = None if take["branch_point"] is None else self.moments[take["branch_point"]]
            self.takes[take["id"]] = int(self.cur.execute(
                f"INSERT INTO {NARRATIVE}.takes (parent_take_id, branch_point, created_at, status, "
                "notes) VALUES (?, ?, ?, ?, ?) RETURNING id",
                [parent, point, take["created_at"], take["status"], take["notes"]]).fetchone()[0])

    def _facts(self, facts: list[dict[str, Any]]) -> None:
        for fact, (vector, model, version) in zip(facts, self.vectors["facts"]):
            self.facts[fact["id"]] = int(self.cur.execute(
                f"INSERT INTO {NARRATIVE}.facts (content, category, created_at, embedding, "
                f"embedding_model, embedding_version) "
                f"VALUES (?, ?, ?, {_vec_sql(self.dims)}, ?, ?) RETURNING id",
                [fact["content"], fact["category"], self.moments[fact["created_at"]],
                 _vec_text(vector), model, version]).fetchone()[0])

    def _session(self) -> None:
        s, take = self.a.session, self.a.narrative["takes"]
        cast = [{**npc, "character_id": self.characters.get(npc["character_id"],
                                                             npc["character_id"])}
                for npc in s["cast"]]
        parent = s["parent_id"] if s["parent_id"] and _exists(
            self.cur, f"{SESSIONS}.sessions", s["parent_id"]) else ""
        self.cur.execute(
            f"INSERT INTO {SESSIONS}.sessions (id, owner, campaign, title, playthrough_id, status, "
            "created_at, updated_at, turns, state_json, stats_json, last_narration, choices_json, "
            "take_id, parent_id, branch_scene, cast_json) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [self.sid, self.owner, s["campaign"], s["title"], f"pt-{self.sid}", s["status"],
             _naive(s["created_at"]), _naive(s["updated_at"]), s["turns"], _json(s["state"]),
             _json(s["stats"]), s["last_narration"], _json(s["choices"]),
             self.takes[take[-1]["id"]] if take else None, parent, s["branch_scene"], _json(cast)])
        now = datetime.now(UTC).replace(tzinfo=None)
        for scene in self.a.scenes:
            moment = scene["moment_id"]
            self.cur.execute(
                f"INSERT INTO {SESSIONS}.session_scenes ({_SCENE_COLUMNS}, saved_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [self.sid, scene["scene"], self.moments.get(moment, moment) if moment else None,
                 scene["input"], _json(scene["state"]), _json(scene["stats"]),
                 scene["narration"], _json(scene["choices"]),
                 _naive(scene["saved_at"]) if scene.get("saved_at") else now])


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _naive(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return (moment.astimezone(UTC) if moment.tzinfo else moment).replace(tzinfo=None)


def _renamed_records(archive: Archive, old: str, new: str) -> dict[DataType, list[Record]]:
    """The records bound to the new playthrough, and to the new session id where they
    named the old one."""
    out: dict[DataType, list[Record]] = {}
    for name, records in archive.records.items():
        copies = []
        for record in records:
            changes: dict[str, Any] = {"playthrough_id": None}
            if getattr(record, "session_id", None) == old:
                changes["session_id"] = new
            copies.append(msgspec.structs.replace(record, **changes))
        out[DataType(name)] = copies
    return out


def import_session(con: duckdb.DuckDBPyConnection, store: PersistenceStore, sessions: SessionStore,
                   data: bytes, owner: str) -> Imported:
    """Restore the archive ``data`` as a session of ``owner``: all of it in one
    transaction, or nothing (ArchiveError names what is wrong)."""
    archive = read_archive(data)
    old = archive.session["id"]
    cur = con.cursor()
    try:
        sid = old if not _exists(cur, f"{SESSIONS}.sessions", old) else sessions.new_id()
        dims = int(cur.execute(f"SELECT value FROM {NARRATIVE}.meta "
                               "WHERE key = 'vector_dimensions'").fetchone()[0])
    finally:
        cur.close()
    embedder = store.embedder
    model = (embedder.model, embedder.version)
    vectors = {name: _vectors(archive.narrative[name], dims, embedder.embed_batch, text, model,
                              name)
               for name, text in (("facts", "content"), ("memories", "chunk"))}
    records = _renamed_records(archive, old, sid)
    playthrough = store.playthrough(f"pt-{sid}")
    # The other data types' vectors are made here, before the transaction; the memory
    # events' by the store itself, which writes them last in the same transaction.
    others = {t: rs for t, rs in records.items() if t is not DataType.MEMORY_EVENT and rs}
    other_vectors = {t: embedder.embed_batch([getattr(r, SPECS[t].text_field) for r in rs])
                     for t, rs in others.items() if SPECS[t].text_field is not None}
    now = datetime.now(UTC)

    def write(cur: duckdb.DuckDBPyConnection) -> None:
        _Writer(cur, archive, sid, owner, dims, vectors).write()
        for data_type, rs in others.items():
            with _part(f"records.json: {data_type.value}"):
                owned = [playthrough._own(SPECS[data_type], r, now) for r in rs]
                insert_many(cur, SPECS[data_type], owned, other_vectors.get(data_type), model)

    memories = records.get(DataType.MEMORY_EVENT, [])
    try:
        playthrough._insert(DataType.MEMORY_EVENT, list(memories), "import", first=write)
    except DuplicateRecord as exc:  # the store's name for a constraint its own insert broke
        raise ArchiveError(f"records.json: memory_event: {exc}; nothing was imported") from None
    except (duckdb.ConstraintException, duckdb.TransactionException) as exc:
        raise ArchiveError(f"the archive's rows clash with this database's: {exc}; "
                           "nothing was imported") from None
    return Imported(sid, old if sid != old else None, len(archive.narrative["moments"]),
                    len(memories))


# -- transcripts ----------------------------------------------------------------------

def transcript_turns(archive: Archive) -> list[tuple[int, str, str, list[str]]]:
    """(scene, input, narration, choices) in order; scene 0 is the opening (no input)."""
    return [(s["scene"], s["input"], s["narration"], s["choices"])
            for s in sorted(archive.scenes, key=lambda s: s["scene"])]


def markdown(archive: Archive) -> str:
    s = archive.session
    title = s["title"] or f"Session {s['id']}"
    lines = [f"# {title}", ""]
    campaign = archive.manifest.get("campaign", {})
    if campaign.get("id"):
        version = f" (version {campaign['version']})" if campaign.get("version") else ""
        lines += [f"Campaign: {campaign['id']}{version}", ""]
    for scene, said, narration, choices in transcript_turns(archive):
        if scene == 0 and not narration:
            continue
        lines += [f"## {'Opening' if scene == 0 else f'Scene {scene}'}", ""]
        if said:
            lines += [f"> **You:** {said}", ""]
        if narration:
            lines += [narration, ""]
        if choices:
            lines += [f"{i}. {c}" for i, c in enumerate(choices, 1)] + [""]
    return "\n".join(lines)


def _st_date(moment: datetime) -> str:
    # SillyTavern's own send_date form: "November 27, 2026 9:15pm".
    return (f"{moment.strftime('%B')} {moment.day}, {moment.year} "
            f"{moment.hour % 12 or 12}:{moment.minute:02d}{'am' if moment.hour < 12 else 'pm'}")


def sillytavern(archive: Archive, user_name: str = "You", character_name: str = "Narrator") -> str:
    """SillyTavern chat JSONL: a header line, then one line per message."""
    s = archive.session
    when = datetime.fromisoformat(s["created_at"])
    lines = [{"user_name": user_name, "character_name": character_name,
              "create_date": _st_date(when), "chat_metadata": {}}]
    for scene in sorted(archive.scenes, key=lambda sc: sc["scene"]):
        said, narration = scene["input"], scene["narration"]
        date = _st_date(datetime.fromisoformat(scene.get("saved_at") or s["updated_at"]))
        if said:
            lines.append({"name": user_name, "is_user": True, "is_system": False,
                          "send_date": date, "mes": said})
        if narration:
            lines.append({"name": character_name, "is_user": False, "is_system": False,
                          "send_date": date, "mes": narration})
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)


def summary(archive: Archive) -> dict[str, Any]:
    """What the CLI reports about an archive."""
    n = archive.narrative
    return {"session_id": archive.session["id"], "turns": archive.session["turns"],
            "campaign": archive.manifest.get("campaign", {}),
            "memories": sum(len(r) for r in archive.records.values()),
            "npc_memories": len(n["memories"]), "facts": len(n["facts"]),
            "takes": len(n["takes"])}
