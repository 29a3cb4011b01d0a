"""Records and errors of the narrative state engine (docs/narrative.md, "Concepts").

The records are the spec's data classes. ``Fact`` and ``Memory``
add ``score``: the cosine similarity to the query text when a query ranked them,
``None`` when they came back in chronological or recency order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CHUNK_TYPES = ("said", "heard", "internal", "perceived", "action")
KNOWLEDGE_SOURCES = ("witnessed", "told", "inferred", "discovered")
TAKE_STATUSES = ("active", "archived", "trunk")


@dataclass
class EngineConfig:
    db_path: str
    embedding_backend: str = "local"  # local | openai | hash
    embedding_model: str = "all-MiniLM-L6-v2"  # for local
    openai_model: str = "text-embedding-3-small"  # if embedding_backend == "openai"
    vector_dimensions: int = 384  # matches the model
    openai_api_key: str | None = None  # else OPENAI_API_KEY from the environment


@dataclass
class Fact:
    id: int
    content: str
    category: str | None
    source: str | None  # how the character learned it
    moment_id: str  # when the character learned it
    score: float | None = None


@dataclass
class Memory:
    id: int
    chunk: str
    chunk_type: str
    tags: dict[str, Any]
    moment_id: str
    score: float | None = None


@dataclass
class CharacterState:
    character_id: str
    moment_id: str
    take_id: int
    facts: list[Fact]
    memories: list[Memory]
    traits: dict[str, Any] = field(default_factory=dict)
    voice: dict[str, Any] = field(default_factory=dict)


@dataclass
class Take:
    id: int
    parent_take_id: int | None  # None for a root take
    branch_point: str | None  # None for a root take
    created_at: str  # ISO-8601, UTC
    status: str
    notes: str | None


class NarrativeStateError(ValueError):
    """A call the engine refused; nothing was written."""


class UnknownMomentError(NarrativeStateError):
    pass


class UnknownCharacterError(NarrativeStateError):
    pass


class UnknownTakeError(NarrativeStateError):
    pass


class UnknownFactError(NarrativeStateError):
    pass


class DuplicateError(NarrativeStateError):
    """An id or a moment sequence that is already taken."""


class InvalidArgumentError(NarrativeStateError):
    """A value outside its allowed set (chunk type, source, status, ...)."""
