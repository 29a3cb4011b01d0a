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


def __getattr__(name: str):
    # The engine needs DuckDB and numpy (~0.2 s to import); code that only reads and
    # patches a session's state, skills and the CLI's start-up among it, never pays.
    if name == "NarrativeStateEngine":
        from .engine import NarrativeStateEngine

        return NarrativeStateEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
