"""The six kinds of record the persistence layer stores (docs/store.md, "Records").

Records are msgspec structs: Python code builds them with snake_case keywords,
and their wire form (JSON from a skill, via the daemon's Store service) uses the
spec's camelCase names (``weightTier``, ``playthroughId``). Validation runs in
``__post_init__`` — on construction and on decoding alike — and every message
starts with the camelCase field name (``weightTier: must be 1-6, got 9``), so a
skill author can find the offending key in the JSON they sent.

Every record carries ``playthrough_id``; the store fills it in from the scope it
was called through and refuses a record naming another playthrough. Timestamps
are normalised to aware UTC datetimes (a naive one is taken to be UTC already).
"""

from __future__ import annotations

import enum
import hashlib
import math
import typing
from datetime import datetime, timezone
from typing import Any, Literal

import msgspec

UTC = timezone.utc


class RecordError(ValueError):
    """A record, a change or a filter failed validation; the message names the field."""


class DataType(enum.StrEnum):
    MEMORY_EVENT = "memory_event"
    LORE_CHUNK = "lore_chunk"
    FACTION_REPUTATION = "faction_reputation"
    NPC_PERCEPTION = "npc_perception"
    CHARACTER_PORTRAIT = "character_portrait"
    PLAYTHROUGH_SESSION = "playthrough_session"


def parse_data_type(value: DataType | str) -> DataType:
    try:
        return DataType(value)
    except ValueError:
        known = ", ".join(t.value for t in DataType)
        raise RecordError(f"dataType: unknown data type {value!r} (expected one of {known})") from None


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)


# -- field checks: each names the field in its camelCase wire form ----------------

def _text(name: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"{camel(name)}: must be a non-empty string, got {value!r}")


def _number(name: str, value: Any, low: float | None = None, high: float | None = None) -> None:
    # bool is an int subclass, but True is not a score.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RecordError(f"{camel(name)}: must be a finite number, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise RecordError(f"{camel(name)}: must be {_span(low, high)}, got {value!r}")


def _integer(name: str, value: Any, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"{camel(name)}: must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        raise RecordError(f"{camel(name)}: must be {_span(low, high)}, got {value!r}")


def _span(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"{low:g}-{high:g}" if low >= 0 else f"{low:g} to {high:g}"
    return f">= {low:g}" if low is not None else f"<= {high:g}"


def _strings(name: str, value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise RecordError(f"{camel(name)}: must be a list of non-empty strings, got {value!r}")


def utc(name: str, value: Any, *, optional: bool = False) -> datetime | None:
    if value is None and optional:
        return None
    if not isinstance(value, datetime):
        raise RecordError(f"{camel(name)}: must be a datetime, got {value!r}")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def description_hash(description: str) -> str:
    """What a portrait was generated from, so a changed description is noticed."""
    return hashlib.sha256(description.encode("utf-8")).hexdigest()


# -- the records ---------------------------------------------------------------------

class Record(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """Fields every record has. The store sets ``playthrough_id`` from its scope."""

    playthrough_id: str | None = None

    def __post_init__(self) -> None:
        _text("playthrough_id", self.playthrough_id, optional=True)


class MemoryEvent(Record):
    summary: str
    timestamp: datetime
    session_id: str
    id: str | None = None  # assigned by the store when absent
    character_ids: list[str] = []
    action_type: str | None = None
    semantic_tags: list[str] = []
    location: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _text("id", self.id, optional=True)
        _text("summary", self.summary)
        self.timestamp = utc("timestamp", self.timestamp)
        _text("session_id", self.session_id)
        _strings("character_ids", self.character_ids)
        _text("action_type", self.action_type, optional=True)
        _strings("semantic_tags", self.semantic_tags)
        _text("location", self.location, optional=True)


ChunkMethod = Literal["frontmatter", "paragraph", "sentence", "field"]
CHUNK_METHODS: tuple[str, ...] = typing.get_args(ChunkMethod)


class LoreChunk(Record):
    campaign_id: str
    campaign_version: str
    file_path: str
    chunk_index: int
    paragraph_id: int
    content: str
    token_count: int
    source_type: Literal["frontmatter", "prose"]
    weight_tier: int
    id: str | None = None  # assigned by the store when absent
    file_origin: str | None = None  # defaults to file_path
    is_player: bool = False
    entity_ids: list[str] = []
    tags: list[str] = []
    ingested_at: datetime | None = None  # the store's clock when absent
    # Where the chunk came from (ingestion's provenance step, docs/campaigns.md, "Provenance"); None: not recorded
    # (chunks stored before these fields existed, or by a writer that does not know).
    chunk_method: ChunkMethod | None = None
    source_line: int | None = None  # 1-based line of the file where the chunk starts
    content_type: str | None = None  # "profile", "backstory", ...
    json_field: str | None = None  # structured files: the field path ("properties.damage_bonus")
    entity_type: str | None = None  # "npc", "item", "stat", ...

    def __post_init__(self) -> None:
        super().__post_init__()
        _text("id", self.id, optional=True)
        _text("campaign_id", self.campaign_id)
        _text("campaign_version", self.campaign_version)
        _text("file_path", self.file_path)
        _integer("chunk_index", self.chunk_index, 0)
        _integer("paragraph_id", self.paragraph_id, 0)
        _text("content", self.content)
        _integer("token_count", self.token_count, 0)
        if self.source_type not in ("frontmatter", "prose"):
            raise RecordError(f"sourceType: must be 'frontmatter' or 'prose', got {self.source_type!r}")
        _integer("weight_tier", self.weight_tier, 1, 6)
        if self.file_origin is None:
            self.file_origin = self.file_path
        _text("file_origin", self.file_origin)
        if not isinstance(self.is_player, bool):
            raise RecordError(f"isPlayer: must be true or false, got {self.is_player!r}")
        _strings("entity_ids", self.entity_ids)
        _strings("tags", self.tags)
        self.ingested_at = utc("ingested_at", self.ingested_at, optional=True)
        if self.chunk_method is not None and self.chunk_method not in CHUNK_METHODS:
            expected = ", ".join(repr(m) for m in CHUNK_METHODS)
            raise RecordError(f"chunkMethod: must be one of {expected}, got {self.chunk_method!r}")
        if self.source_line is not None:
            _integer("source_line", self.source_line, 1)
        _text("content_type", self.content_type, optional=True)
        _text("json_field", self.json_field, optional=True)
        _text("entity_type", self.entity_type, optional=True)


class FactionReputation(Record):
    faction_id: str
    current_score: float
    last_updated: datetime
    decay_rate: float | None = None  # per time unit; None: the store's configured rate
    # Computed when read (stored value decayed to the store's clock); never stored.
    decayed_score: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _text("faction_id", self.faction_id)
        _number("current_score", self.current_score)
        self.last_updated = utc("last_updated", self.last_updated)
        if self.decay_rate is not None:
            _number("decay_rate", self.decay_rate, 0.0, 1.0)


class NpcPerception(Record):
    npc_id: str
    perception_score: float
    last_interaction: datetime
    event_history: list[str] = []
    decay_rate: float | None = None  # per time unit; None: the store's configured rate
    # Computed when read (stored value decayed to the store's clock); never stored.
    decayed_score: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _text("npc_id", self.npc_id)
        _number("perception_score", self.perception_score, -100.0, 100.0)
        self.last_interaction = utc("last_interaction", self.last_interaction)
        _strings("event_history", self.event_history)
        if self.decay_rate is not None:
            _number("decay_rate", self.decay_rate, 0.0, 1.0)


class CharacterPortrait(Record):
    character_id: str
    image_path: str
    description: str  # embedded, so a similar description finds the cached portrait
    generated_at: datetime
    description_hash: str | None = None  # sha256 of description when absent

    def __post_init__(self) -> None:
        super().__post_init__()
        _text("character_id", self.character_id)
        _text("image_path", self.image_path)
        _text("description", self.description)
        self.generated_at = utc("generated_at", self.generated_at)
        if self.description_hash is None:
            self.description_hash = description_hash(self.description)
        _text("description_hash", self.description_hash)


class PlaythroughSession(Record):
    session_id: str
    start_time: datetime
    end_time: datetime | None = None
    current_location: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        _text("session_id", self.session_id)
        self.start_time = utc("start_time", self.start_time)
        self.end_time = utc("end_time", self.end_time, optional=True)
        if self.end_time is not None and self.end_time < self.start_time:
            raise RecordError(f"endTime: must not precede startTime, got {self.end_time.isoformat()}")
        _text("current_location", self.current_location, optional=True)


# Fields computed from another when absent: an update that changes the source
# without giving the derived field recomputes it.
DERIVED_FIELDS: dict[DataType, dict[str, str]] = {
    DataType.CHARACTER_PORTRAIT: {"description": "description_hash"},
}

RECORD_TYPES: dict[DataType, type[Record]] = {
    DataType.MEMORY_EVENT: MemoryEvent,
    DataType.LORE_CHUNK: LoreChunk,
    DataType.FACTION_REPUTATION: FactionReputation,
    DataType.NPC_PERCEPTION: NpcPerception,
    DataType.CHARACTER_PORTRAIT: CharacterPortrait,
    DataType.PLAYTHROUGH_SESSION: PlaythroughSession,
}


def to_record(data_type: DataType, value: Record | dict[str, Any]) -> Record:
    """A validated record of ``data_type`` from a record or a dict (camelCase or snake_case keys).

    A struct built in Python skipped msgspec's type checks (only decoding runs
    them), so it goes through one round trip to get them.
    """
    cls = RECORD_TYPES[data_type]
    if isinstance(value, Record):
        if not isinstance(value, cls):
            raise RecordError(
                f"dataType: {data_type.value} needs a {cls.__name__}, got {type(value).__name__}")
        value = msgspec.to_builtins(value)
    elif isinstance(value, dict):
        value = {camel(k): v for k, v in value.items()}
    else:
        raise RecordError(f"record: expected a {cls.__name__} or a dict, got {type(value).__name__}")
    try:
        return msgspec.convert(value, cls)
    except msgspec.ValidationError as exc:
        raise RecordError(_readable(exc)) from None


def _readable(exc: msgspec.ValidationError) -> str:
    """msgspec says 'Expected `int`, got `str` - at `$.weightTier`'; lead with the field."""
    text = str(exc)
    if " - at `$." in text:
        message, path = text.rsplit(" - at `$.", 1)
        return f"{path.rstrip('`')}: {message}"
    return text
