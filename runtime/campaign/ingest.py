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

Atomicity. Everything that can fail on the campaign's side (validation, parsing,
chunking) runs before the store is touched, so a broken campaign leaves the stored
version as it was. The new and changed chunks are embedded and stored in a staging
playthrough of their own (``staging_scope``), which grounding never reads; then
one ``replace_many`` removes the obsolete chunks, relabels the kept ones and moves
the staged ones into the campaign's scope, in one transaction: grounding sees the
previous version or this one, never both. A run that dies midway leaves only
staged rows, which the next run clears first. One run per campaign at a time (a
lock): two sessions opening the same new campaign ingest it once.

Bounded steps. Ingestion shares the embedder and the store with every player's
turn (a turn embeds its query, its lore search and its scene memory). So the new
chunks go in steps of ``STEP_CHUNKS``, each one short transaction, embedded in
calls of ``EMBED_BATCH`` texts (a forward pass well under a second, so a turn's
one-text request waits at most that long); the daemon's store adds a rest after
each call that leaves the embedder and the CPU free for turns (``STEP_PAUSE``). The size of a file and
of a campaign are capped by validation (``discovery.MAX_TEXT_FILE_BYTES``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable

import msgspec

from narratoria.runtime.campaign.chunking import Chunk, chunk_file
from narratoria.runtime.campaign.package import open_campaign
from narratoria.runtime.campaign.problems import CampaignError
from narratoria.runtime.campaign.validate import ValidationReport, validate
from narratoria.runtime.store import LoreChunk, Pace, PersistenceStore, Playthrough
from narratoria.runtime.turn.grounding import lore_scope

# Bump when chunking output or what a stored chunk records changes for the same file:
# every file is then re-chunked. 2: chunks record their method, line, content type,
# JSON field and entity type (store migration 2).
CHUNKER_VERSION = "2"

Progress = Callable[[str, int, int], None]  # (phase, done, total)

# Chunks stored per step (one transaction of the staging playthrough).
STEP_CHUNKS = 64
# Texts per embedder call. A call of 256 (the store's default) held the embedder ~5-10 s
# on the 2-core machine, and a turn's one-text request waited behind it: one player's
# turn took 10 s while another's campaign was ingested. In calls of 4 (~0.1-0.2 s each)
# the whole ingestion took no longer than in calls of 8 (49 s and 53 s for 715 chunks,
# busy machine), and a turn waits behind one call at most.
EMBED_BATCH = 4
# Where the store serves turns too, rest this fraction of each embedder call's own
# duration after it: ingestion then takes about two thirds of the embedder and the CPU,
# the rest stays free for turns.
STEP_PAUSE = 0.5
STAGING = "#ingesting"

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def staging_scope(campaign_id: str) -> str:
    """Where a run stores a campaign's new chunks until its swap: a playthrough of its own,
    so no search of the campaign's lore ever sees them."""
    return lore_scope(campaign_id) + STAGING


def _campaign_lock(campaign_id: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(campaign_id, threading.Lock())


class IngestResult(msgspec.Struct, rename="camel"):
    """The completion record of ingestion's last phase, and what the incremental run did."""

    campaign_id: str
    version: str
    total_files: int          # content files
    text_chunks: int          # chunks the campaign has now
    binary_assets: int
    files_reingested: int     # content files chunked and embedded this time
    chunks_embedded: int
    chunks_reused: int        # kept from the stored version, not re-embedded
    chunks_removed: int       # of the previous version, gone
    embedding_time_ms: float  # staged steps (embedding, inserts) and the swap
    total_ingestion_ms: float
    warnings: list[str]
    status: str = "complete"


def chunk_id(relative: str, digest: str, index: int) -> str:
    return f"{relative}@{digest}#{index}"


def file_digest(relative: str, data: bytes) -> str:
    h = hashlib.sha256(f"{CHUNKER_VERSION}\0{relative}\0".encode())
    h.update(data)
    return h.hexdigest()[:16]


def ingest(root: Path, store: PersistenceStore, *, progress: Progress | None = None,
           pause: float = 0.0) -> IngestResult:
    """Validate, chunk, embed and store the campaign folder or package ``root``.

    ``pause``: rest this fraction of each step's duration after it (``STEP_PAUSE`` where
    the store also serves players' turns; 0 where ingestion has the machine to itself).
    CampaignError if it is invalid (or, a package, unsafe to extract).
    """
    with open_campaign(Path(root)) as folder:
        return _ingest_folder(folder, store, progress, pause)


def _ingest_folder(root: Path, store: PersistenceStore, progress: Progress | None,
                   pause: float = 0.0) -> IngestResult:
    started = time.perf_counter()
    say = progress or (lambda phase, done, total: None)
    report = validate(Path(root))
    if not report.ok:
        raise CampaignError(report.errors)
    manifest = report.manifest
    assert manifest is not None  # a report without errors has one
    with _campaign_lock(manifest.id):
        return _ingest_checked(root, store, report, say, started, pause)


def _ingest_checked(root: Path, store: PersistenceStore, report: ValidationReport, say: Progress,
                    started: float, pause: float) -> IngestResult:
    manifest = report.manifest
    assert manifest is not None
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
        staging = store.playthrough(staging_scope(manifest.id))
        staging.clear("lore_chunk")  # what a run that died midway left
        _store_in_steps(staging, fresh, say, pause)
        # One transaction: grounding sees the previous version or this one, never both.
        scope.replace_many("lore_chunk", [], remove=obsolete, changes=relabel, adopt=staging)
        embed_ms = (time.perf_counter() - t0) * 1000.0

    return IngestResult(
        campaign_id=manifest.id, version=manifest.version, total_files=len(content),
        text_chunks=len(keep) + len(fresh),
        binary_assets=sum(f.kind == "asset" for f in report.files),
        files_reingested=changed, chunks_embedded=len(fresh), chunks_reused=len(keep),
        chunks_removed=len(obsolete), embedding_time_ms=round(embed_ms, 1),
        total_ingestion_ms=round((time.perf_counter() - started) * 1000.0, 1),
        warnings=[str(p) for p in report.warnings])


def _store_in_steps(staging: Playthrough, fresh: list[LoreChunk], say: Progress,
                    pause: float) -> None:
    """Embed and store ``fresh`` in the staging playthrough, STEP_CHUNKS a transaction,
    EMBED_BATCH an embedder call, resting ``pause`` times each call's duration after it;
    progress after every step."""
    pace = Pace(EMBED_BATCH, pause)
    for start in range(0, len(fresh), STEP_CHUNKS):
        staging.store_many("lore_chunk", fresh[start:start + STEP_CHUNKS], pace=pace)
        say("embedding", min(start + STEP_CHUNKS, len(fresh)), len(fresh))


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
