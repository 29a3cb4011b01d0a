"""Campaigns (architecture §6.2): a folder of text, structured data and art, made searchable.

The ingestion phases of §6.2.15, one module each: ``discovery`` (phase 1),
``manifest`` and ``frontmatter`` (phase 2), ``chunking`` (phase 3), ``ingest``
(phases 4, 6 and 10, through the persistence layer) and ``validate`` (§6.2.16).
Plain Python: the daemon's actors and the CLI call these functions.
"""

from .chunking import MAX_TOKENS, Chunk, chunk_file, count_tokens
from .discovery import CampaignFile, discover
from .frontmatter import FileMetadata, read_metadata
from .ingest import IngestResult, ingest
from .manifest import Manifest, load_manifest
from .problems import CampaignError, Problem
from .validate import ValidationReport, validate

__all__ = [
    "MAX_TOKENS",
    "CampaignError",
    "CampaignFile",
    "Chunk",
    "FileMetadata",
    "IngestResult",
    "Manifest",
    "Problem",
    "ValidationReport",
    "chunk_file",
    "count_tokens",
    "discover",
    "ingest",
    "load_manifest",
    "read_metadata",
    "validate",
]
