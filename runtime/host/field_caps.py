"""Size caps for every field of every request the daemon's gRPC services accept.

Invariants:

- Every string, bytes, repeated and map field of a request, nested messages included,
  has a cap: its own below, else the default for its kind. A request over any cap is
  refused before a handler (or an actor) sees it.
- The refusal names the field (``changes[3].key``) and its size, never its value: a
  4 MB id is not sent back, logged, or kept in an error anywhere.

gRPC's ``max_receive_message_length`` (8 MiB, for a 5 MB portrait) bounds a whole
request; these caps bound each field well below it, because what passes the door is
copied on: into Ray's object store (any actor argument over 100 KiB), into exception
messages that name it, and from there into Ray's task records. Caps are generous
beside what a real front-end or skill sends; the handlers' own checks (a title of at
most 200 characters...) still say what is allowed.

Text is measured in characters (as the handlers' messages count), bytes in bytes.
"""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from narratoria.runtime.characters.store import PORTRAIT_MAX_BYTES

KIB = 1024
MIB = 1024 * KIB

DEFAULT_TEXT = 4 * KIB     # any string field not named below
DEFAULT_BYTES = 64 * KIB   # any bytes field not named below
DEFAULT_ENTRIES = 256      # any repeated or map field not named below

# By field name: the same name means the same thing in every message of the API.
TEXT_CAPS: dict[str, int] = {
    # ids and names the daemon made or lists
    "session_id": 200, "id": 200, "character_id": 200, "skill": 200, "data_type": 64,
    "style": 32, "name": 1 * KIB,
    # what a player or a campaign writes
    "campaign": 4 * KIB, "title": 200, "text": 4000, "description": 20 * KIB,
    "path": 4 * KIB, "player_input": 4000, "scene": 16 * KIB, "outcomes": 4000,
    "event": 4 * KIB, "query": 4 * KIB, "key": 1 * KIB, "unset": 200,
    # JSON documents
    "state_json": 1 * MIB, "plan_json": 256 * KIB, "record_json": 1 * MIB,
    "changes_json": 1 * MIB, "filters_json": 64 * KIB,
}
# A playthrough archive (ImportSession) as large as a portrait may be: a few thousand
# scenes with their NPC memories' vectors.
BYTES_CAPS: dict[str, int] = {"portrait": PORTRAIT_MAX_BYTES, "archive": 5 * MIB}
ENTRY_CAPS: dict[str, int] = {"changes": 1000, "outcomes": 32, "set": 100, "unset": 100}
# A map's keys and values (SetSkillConfigRequest.set: setting name -> value text).
MAP_KEY_CAP = 200
MAP_VALUE_CAP = 16 * KIB


def _size_problem(label: str, value: object, cap: int) -> str | None:
    if isinstance(value, str):
        return f"{label}: {len(value)} characters; at most {cap}" if len(value) > cap else None
    if isinstance(value, (bytes, bytearray)):
        return f"{label}: {len(value)} bytes; at most {cap}" if len(value) > cap else None
    return None


def _scalar_cap(field: FieldDescriptor) -> int:
    if field.type == FieldDescriptor.TYPE_BYTES:
        return BYTES_CAPS.get(field.name, DEFAULT_BYTES)
    return TEXT_CAPS.get(field.name, DEFAULT_TEXT)


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def oversized(message: Message, prefix: str = "") -> str | None:
    """Why ``message`` is over a cap (the field and its size), or None."""
    for field, value in message.ListFields():
        label = f"{prefix}{field.name}"
        repeated = field.is_repeated
        if repeated:
            cap = ENTRY_CAPS.get(field.name, DEFAULT_ENTRIES)
            if len(value) > cap:
                return f"{label}: {len(value)} entries; at most {cap}"
        if _is_map(field):
            for key in value:
                if problem := _size_problem(f"{label} key", key, MAP_KEY_CAP):
                    return problem
                entry = value[key]
                if isinstance(entry, Message):
                    if problem := oversized(entry, f"{label} value."):
                        return problem
                elif problem := _size_problem(f"{label} value", entry, MAP_VALUE_CAP):
                    return problem
            continue
        items = value if repeated else (value,)
        for index, item in enumerate(items):
            where = f"{label}[{index}]" if repeated else label
            if isinstance(item, Message):
                if problem := oversized(item, f"{where}."):
                    return problem
            elif problem := _size_problem(where, item, _scalar_cap(field)):
                return problem
    return None
