"""Phase 3 of ingestion: a content file as the chunks that are embedded and searched.

- Frontmatter: the author's block, serialised as ``key: value`` lines, is one
  chunk (``sourceType: frontmatter``, tier 1): binding assertions (docs/scene.md,
  "Context precedence"). A file without frontmatter has none; inferred metadata is
  a guess and rides on the prose chunks (entity ids, tags) instead of outranking them.
- Prose: split on blank lines, one chunk a paragraph (tier 3, same-file prose);
  a paragraph over 512 tokens is split between sentences, packing whole
  sentences up to the limit (a single sentence over it is cut by tokens).
- Structured files (``.yml``/``.yaml``/``.json``): one chunk a top-level field,
  its JSON path kept (``range``, ``properties``); a field too long for one chunk
  is split into its children (``properties.damage_bonus``, ``steps[2]``). They
  are the author's structured data, which the grounding hierarchy uses exactly
  as written, so they are frontmatter-typed, tier 1. Each field chunk names its
  entity (``entity_id: health``) so that it is findable and readable alone.

Tokens are counted with tiktoken cl100k_base (the offline copy the context
assembler uses), so a chunk's count is the count the prompt budget sees.
A file's chunks depend only on its path and its text: that is what lets an
unchanged file keep its stored chunks and vectors across ingestions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any, Literal

import yaml

from narratoria.runtime.campaign.discovery import STRUCTURED_FORMATS
from narratoria.runtime.campaign.frontmatter import FileMetadata, name_hints, read_metadata
from narratoria.runtime.campaign.parsing import load_json, load_yaml
from narratoria.runtime.planner.context import ENCODING
from narratoria.runtime.sentences import sentences

MAX_TOKENS = 512
FRONTMATTER_TIER = 1
PROSE_TIER = 3
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


@dataclass(frozen=True)
class Chunk:
    file: str                      # relative path of the source file (its fileOrigin)
    chunk_index: int               # position within the file, from 0
    paragraph_id: int              # which paragraph (prose) or field (structured), from 0
    content: str
    token_count: int
    source_type: Literal["frontmatter", "prose"]
    weight_tier: int
    method: Literal["frontmatter", "paragraph", "sentence", "field"]
    line: int                      # 1-based line of the file where the chunk starts
    entity_type: str
    entity_ids: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    content_type: str | None = None
    json_path: str | None = None   # structured files: the field this chunk holds
    is_player: bool = False        # campaign files never describe the player; realisation does


@lru_cache(maxsize=1)
def _encoding():
    # Loading the BPE ranks takes a while; only callers that chunk pay for it.
    import tiktoken
    return tiktoken.get_encoding(ENCODING)


def count_tokens(text: str) -> int:
    # Author text may contain "<|endoftext|>": counted as text, not refused.
    return len(_encoding().encode(text, disallowed_special=()))


def chunk_file(file: str, text: str) -> list[Chunk]:
    """The chunks of content file ``file`` (relative path) holding ``text``."""
    fmt = PurePosixPath(file).suffix[1:].lower()
    if fmt in STRUCTURED_FORMATS:
        return chunk_structured(file, text, fmt)
    return chunk_prose(read_metadata(file, text))


# -- prose -----------------------------------------------------------------------------

def chunk_prose(meta: FileMetadata) -> list[Chunk]:
    chunks: list[Chunk] = []
    common = dict(file=meta.file, entity_type=meta.entity_type, entity_ids=[meta.entity_id],
                  tags=list(meta.tags), content_type=meta.content_type)
    if meta.frontmatter:
        text = _yaml_lines(meta.frontmatter)
        chunks.append(Chunk(chunk_index=0, paragraph_id=0, content=text,
                            token_count=count_tokens(text), source_type="frontmatter",
                            weight_tier=FRONTMATTER_TIER, method="frontmatter",
                            line=1, **common))
    for paragraph_id, (line, paragraph) in enumerate(_paragraphs(meta.body, meta.body_line)):
        tokens = count_tokens(paragraph)
        pieces = [(paragraph, tokens)] if tokens <= MAX_TOKENS else _split_sentences(paragraph)
        method = "paragraph" if len(pieces) == 1 else "sentence"
        for piece, count in pieces:
            chunks.append(Chunk(chunk_index=len(chunks), paragraph_id=paragraph_id, content=piece,
                                token_count=count, source_type="prose", weight_tier=PROSE_TIER,
                                method=method, line=line, **common))
    return chunks


def _paragraphs(body: str, first_line: int) -> list[tuple[int, str]]:
    """(1-based line, text) of each non-blank paragraph of ``body``."""
    out, start = [], 0
    for match in [*_PARAGRAPH_BREAK.finditer(body), None]:
        end = match.start() if match else len(body)
        text = body[start:end]
        if text.strip():
            lead = len(text) - len(text.lstrip())
            line = first_line + body.count("\n", 0, start + lead)
            out.append((line, text.strip()))
        if match:
            start = match.end()
    return out


def _split_sentences(paragraph: str) -> list[tuple[str, int]]:
    """Whole sentences packed into pieces of at most MAX_TOKENS tokens, with their counts."""
    pieces: list[tuple[str, int]] = []
    current: list[str] = []
    for sentence in sentences(paragraph):
        for part in _cut(sentence.strip()):
            candidate = " ".join(current + [part])
            if current and count_tokens(candidate) > MAX_TOKENS:
                text = " ".join(current)
                pieces.append((text, count_tokens(text)))
                current = [part]
            else:
                current.append(part)
    if current:
        text = " ".join(current)
        pieces.append((text, count_tokens(text)))
    return pieces


def _cut(sentence: str) -> list[str]:
    """A sentence longer than the limit, cut into token windows (no sentence boundary to use)."""
    enc = _encoding()
    tokens = enc.encode(sentence, disallowed_special=())
    if len(tokens) <= MAX_TOKENS:
        return [sentence]
    return [enc.decode(tokens[i:i + MAX_TOKENS]).strip()
            for i in range(0, len(tokens), MAX_TOKENS)]


# -- structured ------------------------------------------------------------------------

def load_structured(file: str, text: str, fmt: str) -> Any:
    parsed = load_json(text, file) if fmt == "json" else load_yaml(text, file)
    return parsed.value


def chunk_structured(file: str, text: str, fmt: str) -> list[Chunk]:
    data = load_structured(file, text, fmt)
    if data is None:
        return []
    hints = name_hints(file)
    mapping = data if isinstance(data, dict) else {}
    entity_type = _text_value(mapping.get("entity_type")) or hints.entity_type
    entity_id = (_text_value(mapping.get("entity_id")) or _text_value(mapping.get("id"))
                 or hints.entity_id)
    tags = mapping.get("tags") if isinstance(mapping.get("tags"), list) else hints.words
    fields = list(data.items()) if isinstance(data, dict) else \
        [(f"[{i}]", v) for i, v in enumerate(data)] if isinstance(data, list) else [("value", data)]
    chunks: list[Chunk] = []
    for paragraph_id, (key, value) in enumerate(fields):
        if key in ("entity_type", "entity_id", "id"):
            continue  # said in every chunk's entity line and metadata
        for path, part in _fit_field(str(key), value, entity_id):
            content = _render(entity_id, path, part)
            chunks.append(Chunk(
                file=file, chunk_index=len(chunks), paragraph_id=paragraph_id, content=content,
                token_count=count_tokens(content), source_type="frontmatter",
                weight_tier=FRONTMATTER_TIER, method="field", line=1,
                entity_type=entity_type, entity_ids=[entity_id], tags=[str(t) for t in tags],
                content_type=_text_value(mapping.get("content_type")), json_path=path))
    if not chunks and isinstance(data, dict) and data:
        # Only identity fields: still one chunk, so the entity is known to exist.
        content = _render(entity_id, None, None)
        chunks.append(Chunk(file=file, chunk_index=0, paragraph_id=0, content=content,
                            token_count=count_tokens(content), source_type="frontmatter",
                            weight_tier=FRONTMATTER_TIER, method="field", line=1,
                            entity_type=entity_type, entity_ids=[entity_id]))
    return chunks


def _fit_field(path: str, value: Any, entity_id: str) -> list[tuple[str, Any]]:
    """``value`` at ``path`` as one piece, or its children if it is too long for a chunk."""
    if count_tokens(_render(entity_id, path, value)) <= MAX_TOKENS:
        return [(path, value)]
    if isinstance(value, dict) and value:
        return [piece for k, v in value.items() for piece in _fit_field(f"{path}.{k}", v, entity_id)]
    if isinstance(value, list) and value:
        return [piece for i, v in enumerate(value) for piece in _fit_field(f"{path}[{i}]", v, entity_id)]
    return [(path, value)]  # one long scalar: kept whole rather than cut mid-fact


def _render(entity_id: str, path: str | None, value: Any) -> str:
    doc = {"entity_id": entity_id} if path is None else {"entity_id": entity_id, path: value}
    return _yaml_lines(doc)


def _yaml_lines(doc: dict[str, Any]) -> str:
    """``key: value`` lines, short lists and mappings inline (``tags: [wise, mentor]``).

    Dumped key by key: PyYAML would write a mapping of scalars as one ``{…}`` line,
    and the context assembler reads assertions as top-level ``key: value`` lines.
    """
    return "\n".join(
        yaml.safe_dump({key: value}, sort_keys=False, allow_unicode=True, width=100,
                       default_flow_style=False if not isinstance(value, (dict, list)) else None
                       ).strip()
        for key, value in doc.items())


def _text_value(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None

