"""The persistence layer skills use: memories, lore, reputation, perception, portraits, sessions.

    store = PersistenceStore(data_dir / "narratoria.duckdb", make_backend())
    pt = store.playthrough("pt-1")          # every query is bound to one playthrough
    pt.store("memory_event", MemoryEvent(summary=..., timestamp=..., session_id=...))
    pt.semantic_search("craftspeople interactions", "memory_event", limit=5)
    pt.exact_match("npc_perception", {"npcId": "blacksmith_aldric"})

See ``store.py`` for concurrency and durability, ``decay.py`` for decay,
``retention.py`` for retention and ``filters.py`` for scoping.
"""

from narratoria.runtime.store.decay import DecayPolicy, decayed
from narratoria.runtime.store.filters import Filters
from narratoria.runtime.store.monitor import QueryMonitor, QueryStat
from narratoria.runtime.store.records import (
    CharacterPortrait,
    DataType,
    FactionReputation,
    LoreChunk,
    MemoryEvent,
    NpcPerception,
    PlaythroughSession,
    Record,
    RecordError,
    description_hash,
)
from narratoria.runtime.store.retention import RetentionPolicy, RetentionResult
from narratoria.runtime.store.store import (
    DEFAULT_MIN_SCORE,
    DuplicateRecord,
    Hit,
    Pace,
    PersistenceStore,
    Playthrough,
    RecordNotFound,
    ScoreChange,
    StoreConfig,
    StoreError,
)

__all__ = [
    "DEFAULT_MIN_SCORE",
    "CharacterPortrait",
    "DataType",
    "DecayPolicy",
    "DuplicateRecord",
    "FactionReputation",
    "Filters",
    "Hit",
    "LoreChunk",
    "MemoryEvent",
    "NpcPerception",
    "Pace",
    "PersistenceStore",
    "Playthrough",
    "PlaythroughSession",
    "QueryMonitor",
    "QueryStat",
    "Record",
    "RecordError",
    "RecordNotFound",
    "RetentionPolicy",
    "RetentionResult",
    "ScoreChange",
    "StoreConfig",
    "StoreError",
    "decayed",
    "description_hash",
]
