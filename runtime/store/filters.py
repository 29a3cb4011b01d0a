"""Query filters (docs/store.md, "Filters") and the one place they become SQL.

``scoped_where`` is the only function that writes a WHERE clause, and it always
starts with ``playthrough_id = ?``: no query, update, delete or retention run can
leave its playthrough. The playthrough is not a filter field at all — it comes
from the scope the caller went through (``store.playthrough(id)``).

A filter that does not apply to the data type is refused, never ignored: a
silently dropped ``location`` filter would return out-of-scope rows.
Column names come from this module's tables, values only ever travel as
parameters.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable, Mapping

import msgspec

from narratoria.runtime.store.records import UTC, DataType, RecordError, camel, utc
from narratoria.runtime.store.schema import SPECS


class Filters(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True,
              omit_defaults=True):
    """Every field is optional; the ones given must all hold (AND)."""

    since: datetime | None = None  # inclusive, on the data type's time column
    until: datetime | None = None  # exclusive
    session_id: str | None = None
    character_id: str | None = None
    npc_id: str | None = None
    faction_id: str | None = None
    file_path: str | None = None
    file_origin: str | None = None
    location: str | None = None
    tags: list[str] | None = None  # the record carries every one of them
    action_type: str | None = None
    entity_id: str | None = None
    campaign_id: str | None = None
    campaign_version: str | None = None
    source_type: str | None = None
    weight_tiers: list[int] | None = None  # any of them
    is_player: bool | None = None
    chunk_method: str | None = None
    content_type: str | None = None
    json_field: str | None = None
    entity_type: str | None = None


Clause = Callable[[Any], tuple[str, list[Any]]]


def _equals(column: str) -> Clause:
    return lambda value: (f'"{column}" = ?', [value])


def _contains(column: str) -> Clause:
    return lambda value: (f'list_contains("{column}", ?)', [value])


def _contains_all(column: str) -> Clause:
    # One list_contains per tag: a list parameter would cost more to bind than the scan.
    def clause(values: list[str]) -> tuple[str, list[Any]]:
        if not values:
            return "TRUE", []
        return " AND ".join(f'list_contains("{column}", ?)' for _ in values), list(values)
    return clause


def _any_of(column: str) -> Clause:
    def clause(values: list[Any]) -> tuple[str, list[Any]]:
        if not values:
            return "FALSE", []  # "one of no tiers" matches nothing
        return f'"{column}" IN ({", ".join("?" for _ in values)})', list(values)
    return clause


def _since(column: str) -> Clause:
    return lambda value: (f'"{column}" >= ?', [naive_utc(value)])


def _until(column: str) -> Clause:
    return lambda value: (f'"{column}" < ?', [naive_utc(value)])


def _time_range(data_type: DataType) -> dict[str, Clause]:
    column = SPECS[data_type].time_column
    return {"since": _since(column), "until": _until(column)}


# Which filters each data type understands, and what they mean for it.
APPLICABLE: dict[DataType, dict[str, Clause]] = {
    DataType.MEMORY_EVENT: {
        **_time_range(DataType.MEMORY_EVENT),
        "session_id": _equals("session_id"),
        "character_id": _contains("character_ids"),
        "npc_id": _contains("character_ids"),  # an NPC is a character the event involved
        "location": _equals("location"),
        "tags": _contains_all("semantic_tags"),
        "action_type": _equals("action_type"),
    },
    DataType.LORE_CHUNK: {
        **_time_range(DataType.LORE_CHUNK),
        "character_id": _contains("entity_ids"),
        "npc_id": _contains("entity_ids"),
        "entity_id": _contains("entity_ids"),
        "file_path": _equals("file_path"),
        "file_origin": _equals("file_origin"),
        "tags": _contains_all("tags"),
        "campaign_id": _equals("campaign_id"),
        "campaign_version": _equals("campaign_version"),
        "source_type": _equals("source_type"),
        "weight_tiers": _any_of("weight_tier"),
        "is_player": _equals("is_player"),
        "chunk_method": _equals("chunk_method"),
        "content_type": _equals("content_type"),
        "json_field": _equals("json_field"),
        "entity_type": _equals("entity_type"),
    },
    DataType.FACTION_REPUTATION: {
        **_time_range(DataType.FACTION_REPUTATION),
        "faction_id": _equals("faction_id"),
    },
    DataType.NPC_PERCEPTION: {
        **_time_range(DataType.NPC_PERCEPTION),
        "npc_id": _equals("npc_id"),
    },
    DataType.CHARACTER_PORTRAIT: {
        **_time_range(DataType.CHARACTER_PORTRAIT),
        "character_id": _equals("character_id"),
        "npc_id": _equals("character_id"),
    },
    DataType.PLAYTHROUGH_SESSION: {
        **_time_range(DataType.PLAYTHROUGH_SESSION),
        "session_id": _equals("session_id"),
        "location": _equals("current_location"),
    },
}


def naive_utc(value: datetime) -> datetime:
    """DuckDB TIMESTAMP columns hold UTC without a zone."""
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def to_filters(value: Filters | Mapping[str, Any] | None) -> Filters:
    if value is None:
        return Filters()
    if isinstance(value, Filters):
        value = msgspec.to_builtins(value)  # re-validate: direct construction skips type checks
    elif not isinstance(value, Mapping):
        raise RecordError(f"filters: expected Filters or a dict, got {type(value).__name__}")
    data = {camel(k): v for k, v in value.items()}
    if "playthroughId" in data:
        raise RecordError("playthroughId: the playthrough comes from the scope "
                          "(store.playthrough(id)); cross-playthrough queries are not supported")
    try:
        filters = msgspec.convert(data, Filters)
    except msgspec.ValidationError as exc:
        raise RecordError(f"filters: {exc}") from None
    for name in ("since", "until"):
        if getattr(filters, name) is not None:
            setattr(filters, name, utc(name, getattr(filters, name)))
    return filters


FILTER_NAMES = Filters.__struct_fields__


def given(filters: Filters) -> dict[str, Any]:
    """The filters that were set, by field name."""
    return {name: getattr(filters, name) for name in FILTER_NAMES
            if getattr(filters, name) is not None}


def scoped_where(data_type: DataType, playthrough_id: str,
                 filters: Filters | None = None) -> tuple[str, list[Any]]:
    """``playthrough_id = ? AND <each filter>``, with its parameters."""
    if not isinstance(playthrough_id, str) or not playthrough_id:
        raise RecordError(f"playthroughId: must be a non-empty string, got {playthrough_id!r}")
    clauses, params = ['"playthrough_id" = ?'], [playthrough_id]
    applicable = APPLICABLE[data_type]
    for name, value in given(filters or Filters()).items():
        if name not in applicable:
            names = ", ".join(sorted(camel(n) for n in applicable))
            raise RecordError(f"{camel(name)}: filter does not apply to {data_type.value} "
                              f"(applicable: {names})")
        sql, values = applicable[name](value)
        clauses.append(sql)
        params.extend(values)
    return " AND ".join(clauses), params
