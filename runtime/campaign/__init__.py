"""Campaigns (docs/campaigns.md): a folder of text, structured data and art, made searchable.

The ingestion phases (docs/campaigns.md, "Ingestion"), one module each: ``discovery`` (phase 1),
``manifest`` and ``frontmatter`` (phase 2), ``chunking`` (phase 3), ``ingest``
(phases 4, 6 and 10, through the persistence layer) and ``validate``;
``stats`` and ``items``, a campaign's stats and items bound to session state;
``assets``, art and music described and their provenance enforced (phase 5);
``relations``, the relationship graph (phase 7);
``package`` (opening ``.narratoria``/``.zip`` packages safely) and ``pack``
(writing them); ``catalog``, the campaigns a player can start.
Plain Python: the daemon's actors and the CLI call these functions.
"""

from narratoria.runtime.campaign.assets import AssetRecord, Provenance, check_assets, load_assets
from narratoria.runtime.campaign.catalog import CatalogEntry, builtin_campaigns_dir, list_campaigns, user_campaigns_dir
from narratoria.runtime.campaign.chunking import MAX_TOKENS, Chunk, chunk_file, count_tokens
from narratoria.runtime.campaign.discovery import CampaignFile, discover
from narratoria.runtime.campaign.frontmatter import FileMetadata, read_metadata
from narratoria.runtime.campaign.ingest import IngestResult, ingest
from narratoria.runtime.campaign.items import ItemCatalog, ItemDefinition, ItemEffect, check_items, load_items
from narratoria.runtime.campaign.manifest import Manifest, load_manifest
from narratoria.runtime.campaign.pack import PackResult, pack
from narratoria.runtime.campaign.package import is_package, open_campaign
from narratoria.runtime.campaign.problems import CampaignError, Problem
from narratoria.runtime.campaign.relations import Edge, Entity, Graph, build_graph, campaign_graph, dangling, related
from narratoria.runtime.campaign.stats import StatBand, StatDefinition, StatRegistry, check_stats, load_stats
from narratoria.runtime.campaign.validate import ValidationReport, validate

__all__ = [
    "AssetRecord",
    "Edge",
    "Entity",
    "Graph",
    "Provenance",
    "build_graph",
    "campaign_graph",
    "check_assets",
    "dangling",
    "load_assets",
    "related",
    "MAX_TOKENS",
    "CampaignError",
    "CampaignFile",
    "CatalogEntry",
    "Chunk",
    "FileMetadata",
    "IngestResult",
    "ItemCatalog",
    "ItemDefinition",
    "ItemEffect",
    "Manifest",
    "PackResult",
    "Problem",
    "StatBand",
    "StatDefinition",
    "StatRegistry",
    "ValidationReport",
    "builtin_campaigns_dir",
    "check_items",
    "check_stats",
    "chunk_file",
    "count_tokens",
    "discover",
    "ingest",
    "is_package",
    "list_campaigns",
    "load_items",
    "load_manifest",
    "load_stats",
    "open_campaign",
    "pack",
    "read_metadata",
    "user_campaigns_dir",
    "validate",
]
