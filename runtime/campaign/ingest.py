"""Ingestion into the persistence layer: a campaign's chunks as the lore grounding reads.

Chunks are stored as ``LoreChunk`` records in the store scope
``lore_scope(campaign_id)`` (``campaign:<id>``), which is where
``Storyline.lore`` searches them: every field grounding and the context
assembler use (content, ``sourceType``, ``weightTier``, ``fileOrigin``,
``isPlayer``, entity ids first) is set here.

Incremental. A chunk's id is ``<file>@<digest>#<index>``, the digest being the
sha256 of the chunker's version, the file's path and its bytes; a file's chunks
depend on nothing else (``chunking.py``). A file whose stored chunks carry its
current digest is neither re-chunked nor re-embedded; an edited file's chunks
are replaced; a deleted file's chunks are removed.

Atomicity, as far as the store's public API allows. Everything that can fail on
the campaign's side (validation, parsing, chunking) runs before the store is
touched, so a broken campaign leaves the stored version as it was. The new and
changed chunks then go in with one ``store_many`` (one transaction: all or
none, embedding included), and only after that are the previous version's
obsolete chunks deleted. A crash between the two leaves the new chunks and some
old ones side by side; the next ingestion removes the old ones. A swap in one
transaction needs a store call that deletes and inserts together (reported to
the store's owner).
"""

from __future__ import annotations

import hashlib
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

import msgspec

from ..grounding import lore_scope
from ..store import LoreChunk, PersistenceStore
from .chunking import Chunk, chunk_file
from .package import open_campaign
from .problems import CampaignError
from .validate import validate

# Bump when chunking output or what a stored chunk records changes for the same file:
# every file is then re-chunked. 2: chunks record their method, line, content type,
# JSON field and entity type (store migration 2).
CHUNKER_VERSION = "2"

Progress = Callable[[str, int, int], None]  # (phase, done, total)


class IngestResult(msgspec.Struct, rename="camel"):
    """The completion record of §6.2.15 phase 10, and what the incremental run did."""

    campaign_id: str
    version: str
    total_files: int          # content files
    text_chunks: int          # chunks the campaign has now
    binary_assets: int
    files_reingested: int     # content files chunked and embedded this time
    chunks_embedded: int
    chunks_reused: int        # kept from the stored version, not re-embedded
    chunks_removed: int       # of the previous version, gone
    embedding_time_ms: float  # the one replace_many: embedding, insert, removal
    total_ingestion_ms: float
    warnings: list[str]
    status: str = "complete"


def chunk_id(relative: str, digest: str, index: int) -> str:
    return f"{relative}@{digest}#{index}"


def file_digest(relative: str, data: bytes) -> str:
    h = hashlib.sha256(f"{CHUNKER_VERSION}\0{relative}\0".encode())
    h.update(data)
    return h.hexdigest()[:16]


def ingest(root: Path, store: PersistenceStore, *, progress: Progress | None = None) -> IngestResult:
    """Validate, chunk, embed and store the campaign folder or package ``root``.

    CampaignError if it is invalid (or, a package, unsafe to extract).
    """
    with open_campaign(Path(root)) as folder:
        return _ingest_folder(folder, store, progress)


def _ingest_folder(root: Path, store: PersistenceStore, progress: Progress | None) -> IngestResult:
    started = time.perf_counter()
    say = progress or (lambda phase, done, total: None)
    report = validate(Path(root))
    if not report.ok:
        raise CampaignError(report.errors)
    manifest = report.manifest
    assert manifest is not None  # a report without errors has one
    content = [f for f in report.files if f.kind == "content"]
    say("files", len(content), len(content))

    scope = store.playthrough(lore_scope(manifest.id))
    # A realised player character's chunks share the scope but no campaign file:
    # they are the character's (runtime/characters/realize.py), never obsolete here.
    stored = [r for r in scope.exact_match("lore_chunk", {"campaignId": manifest.id})
              if not r.is_player]
    stored_by_file: dict[str, dict[str, LoreChunk]] = defaultdict(dict)
    for record in stored:
        stored_by_file[record.file_path][record.id] = record

    keep: set[str] = set()
    fresh: list[LoreChunk] = []
    changed = 0
    for i, f in enumerate(content, 1):
        data = f.path.read_bytes()
        digest = file_digest(f.relative, data)
        prefix = f"{f.relative}@{digest}#"
        mine = stored_by_file.get(f.relative, {})
        if mine and all(key.startswith(prefix) for key in mine):
            keep.update(mine)  # unchanged since it was stored: its vectors stand
        else:
            chunks = chunk_file(f.relative, data.decode("utf-8"))
            changed += bool(chunks or mine)  # an empty file, still empty, changed nothing
            fresh += [_record(c, manifest.id, manifest.version, digest) for c in chunks]
        say("chunking", i, len(content))

    obsolete = [r.id for r in stored if r.id not in keep]
    # Kept chunks belong to the new version too; their text is unchanged, so no re-embedding.
    relabel = {r.id: {"campaign_version": manifest.version} for r in stored
               if r.id in keep and r.campaign_version != manifest.version}
    embed_ms = 0.0
    if fresh or obsolete or relabel:
        say("embedding", 0, len(fresh))
        t0 = time.perf_counter()
        # One transaction: grounding sees the previous version or this one, never both.
        scope.replace_many("lore_chunk", fresh, remove=obsolete, changes=relabel)
        embed_ms = (time.perf_counter() - t0) * 1000.0
        say("embedding", len(fresh), len(fresh))

    return IngestResult(
        campaign_id=manifest.id, version=manifest.version, total_files=len(content),
        text_chunks=len(keep) + len(fresh),
        binary_assets=sum(f.kind == "asset" for f in report.files),
        files_reingested=changed, chunks_embedded=len(fresh), chunks_reused=len(keep),
        chunks_removed=len(obsolete), embedding_time_ms=round(embed_ms, 1),
        total_ingestion_ms=round((time.perf_counter() - started) * 1000.0, 1),
        warnings=[str(p) for p in report.warnings])


def _record(chunk: Chunk, campaign_id: str, version: str, digest: str) -> LoreChunk:
    def given(text: str | None) -> str | None:  # the record takes None, never a blank string
        return text if text and text.strip() else None

    return LoreChunk(
        id=chunk_id(chunk.file, digest, chunk.chunk_index), campaign_id=campaign_id,
        campaign_version=version, file_path=chunk.file, chunk_index=chunk.chunk_index,
        paragraph_id=chunk.paragraph_id, content=chunk.content, token_count=chunk.token_count,
        source_type=chunk.source_type, weight_tier=chunk.weight_tier, file_origin=chunk.file,
        is_player=chunk.is_player, entity_ids=list(chunk.entity_ids),
        tags=[t for t in chunk.tags if t.strip()],
        chunk_method=chunk.method, source_line=chunk.line,
        content_type=given(chunk.content_type), json_field=given(chunk.json_path),
        entity_type=given(chunk.entity_type))
