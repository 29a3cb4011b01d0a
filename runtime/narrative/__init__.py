"""The narrative state engine: bounded character knowledge with branching takes, on DuckDB."""

from narratoria.runtime.narrative.models import (
    CharacterState,
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

__all__ = [
    "CharacterState",
    "DuplicateError",
    "EngineConfig",
    "Fact",
    "InvalidArgumentError",
    "Memory",
    "NarrativeStateEngine",
    "NarrativeStateError",
    "Take",
    "UnknownCharacterError",
    "UnknownFactError",
    "UnknownMomentError",
    "UnknownTakeError",
]


def __getattr__(name: str):
    # The engine needs DuckDB and numpy (~0.2 s to import); code that only reads and
    # patches a session's state, skills and the CLI's start-up among it, never pays.
    if name == "NarrativeStateEngine":
        from narratoria.runtime.narrative.engine import NarrativeStateEngine

        return NarrativeStateEngine
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
