"""Session state: deep merge of state patches, dot paths, stat clamping (spec §2.4, §2.6)."""

from .merge import deep_merge, json_copy, merged
from .paths import StatePathError, delete_path, get_path, iter_matching, path_matches, set_path, split_path
from .session import SessionState, StatRange, check_json

__all__ = [
    "SessionState",
    "StatePathError",
    "StatRange",
    "check_json",
    "deep_merge",
    "delete_path",
    "get_path",
    "iter_matching",
    "json_copy",
    "merged",
    "path_matches",
    "set_path",
    "split_path",
]

# The narrative state engine (phantom-state-engine.md): bounded character knowledge
# with branching takes, on DuckDB.
from .chunking import GRANULARITIES, Chunk, chunk_text
from .engine import NarrativeStateEngine
from .models import (
    CharacterState,
    CorpusChunk,
    DuplicateError,
    EngineConfig,
    Fact,
    InvalidArgumentError,
    Memory,
    NarrativeStateError,
    Take,
    UnknownCharacterError,
    UnknownFactError,
    UnknownMomentError,
    UnknownTakeError,
)

__all__ += [
    "CharacterState",
    "Chunk",
    "CorpusChunk",
    "DuplicateError",
    "EngineConfig",
    "Fact",
    "GRANULARITIES",
    "InvalidArgumentError",
    "Memory",
    "NarrativeStateEngine",
    "NarrativeStateError",
    "Take",
    "UnknownCharacterError",
    "UnknownFactError",
    "UnknownMomentError",
    "UnknownTakeError",
    "chunk_text",
]
