"""The built-in campaigns (campaigns/): both load, the minimal one is minimal, the rich one
uses every part of the campaign format (docs/campaigns.md).

Real files, real parsers: these are the campaigns a player starts, so whatever the
validator, the stat, item, beat and asset loaders say about them is what a session gets.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from narratoria.runtime.campaign import (
    MAX_TOKENS,
    campaign_graph,
    chunk_file,
    dangling,
    discover,
    list_campaigns,
    load_assets,
    load_items,
    load_manifest,
    load_stats,
    read_metadata,
    validate,
)
from narratoria.runtime.campaign.beats import load_beats

from conftest import REPO

CAMPAIGNS = REPO / "campaigns"
MINIMAL = CAMPAIGNS / "ninth_milestone"
RICH = CAMPAIGNS / "long_ebb"
MAKE_ART = CAMPAIGNS / "tools" / "make_art.py"


def _all_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file())


def _characters(root: Path):
    """Metadata of every NPC file (entity_type npc or character) of the campaign."""
    found = []
    for f in discover(root):
        if f.kind == "content" and f.format in ("md", "txt"):
            meta = read_metadata(f.relative, f.path.read_text("utf-8"))
            if meta.entity_type in ("npc", "character"):
                found.append(meta)
    return found


# -- both ---------------------------------------------------------------------------------

@pytest.mark.parametrize("root", [MINIMAL, RICH], ids=lambda p: p.name)
def test_validates_without_errors(root):
    report = validate(root)
    assert report.errors == [], "\n".join(map(str, report.errors))
    assert report.manifest is not None and report.manifest.id == root.name
    # The only warning allowed is the notice counting generated assets.
    assert [p for p in report.warnings if p.field != "generated"] == []


@pytest.mark.parametrize("root", [MINIMAL, RICH], ids=lambda p: p.name)
def test_every_chunk_fits(root):
    for f in discover(root):
        if f.kind == "content":
            for chunk in chunk_file(f.relative, f.path.read_text("utf-8")):
                assert chunk.token_count <= MAX_TOKENS, (f.relative, chunk.chunk_index)


def test_listed_as_valid_builtin_campaigns():
    entries = {e.id: e for e in list_campaigns([("builtin", CAMPAIGNS)])}
    assert {"ninth_milestone", "long_ebb"} <= set(entries)
    for campaign_id in ("ninth_milestone", "long_ebb"):
        assert entries[campaign_id].valid, entries[campaign_id].errors
    assert not any(e.path.name == "tools" for e in entries.values())  # the art script is no campaign


# -- the minimal campaign (fewer than five files) ----------------------------------------

def test_minimal_has_fewer_than_five_files():
    assert len(_all_files(MINIMAL)) < 5


def test_minimal_is_playable():
    manifest = load_manifest(MINIMAL)
    assert manifest.title and manifest.version
    types = {read_metadata(f.relative, f.path.read_text("utf-8")).entity_type
             for f in discover(MINIMAL) if f.kind == "content"}
    assert {"world", "npc", "lore"} <= types  # a place, someone to meet, what happens


# -- the rich campaign ---------------------------------------------------------------------

def test_rich_manifest_has_style_content_and_narrative_guidance():
    fields = load_manifest(RICH).fields
    for key in ("description", "genre", "tone", "rules_hint", "content_rating",
                "content_warnings", "hydration_guidance", "narrative_guidance"):
        assert fields.get(key), key


def test_rich_is_modest():
    content = [f for f in discover(RICH) if f.kind == "content"]
    assert 15 <= len(content) <= 35
    chunks = sum(len(chunk_file(f.relative, f.path.read_text("utf-8"))) for f in content)
    assert chunks <= 200


def test_rich_player_character_constraints():
    data = yaml.safe_load((RICH / "player_character_constraints.yml").read_text("utf-8"))
    assert data["entity_type"] == "player_character"
    assert data["allowed_races"] and data["allowed_classes"]
    assert data["hard_constraints"]
    assert set(data["starting_items"]) <= {item.id for item in load_items(RICH)}


def test_rich_characters_have_frontmatter_and_resolving_relationships():
    npcs = _characters(RICH)
    assert 4 <= len(npcs) <= 6
    ids = {m.entity_id for m in npcs}
    for meta in npcs:
        fm = meta.frontmatter
        assert meta.has_frontmatter and fm["entity_id"] == meta.entity_id
        for key in ("name", "traits", "core_traits", "faction", "relationships"):
            assert fm.get(key), (meta.file, key)
        assert set(fm["relationships"]) <= ids, meta.file
    graph = campaign_graph(RICH)
    assert dangling(graph) == []
    kinds = {(e.source, e.target, e.kind) for e in graph.edges}
    assert ("odile_venn", "tamsin_cask", "relationships") in kinds
    assert ("odile_venn", "lampwrights_guild", "faction") in kinds


def test_rich_frontmatter_outranks_the_rumour_that_contradicts_it():
    tamsin = RICH / "characters" / "character_tamsin_cask.md"
    chunks = chunk_file("characters/character_tamsin_cask.md", tamsin.read_text("utf-8"))
    assertion = chunks[0]
    assert assertion.source_type == "frontmatter" and assertion.weight_tier == 1
    assert "has_entered_undercourt: false" in assertion.content
    rumour = RICH / "lore" / "lore_tavern_rumours.md"
    contradicting = [c for c in chunk_file("lore/lore_tavern_rumours.md", rumour.read_text("utf-8"))
                     if "Tamsin Cask walked the Undercourt" in c.content]
    assert contradicting and all(c.weight_tier > assertion.weight_tier for c in contradicting)


def test_rich_stats_visible_hidden_and_npc():
    stats = list(load_stats(RICH))
    visible = [s for s in stats if not s.hidden and s.npc is None]
    assert len(visible) >= 3
    assert len({s.display for s in visible}) >= 3
    assert all(s.behavioral_prompt and s.min < s.max for s in stats)
    hidden = [s for s in stats if s.hidden]
    assert hidden and all(s.file.startswith("stats/hidden/") for s in hidden)
    npc_stats = [s for s in stats if s.npc is not None]
    assert npc_stats and {s.npc for s in npc_stats} <= {m.entity_id for m in _characters(RICH)}
    assert any(s.file == f"stats/npc.{s.npc}.{s.id}.json" for s in npc_stats)


def test_rich_items_one_changes_a_stat():
    catalog = load_items(RICH)
    assert 3 <= len(catalog) <= 5
    stat_paths = {s.path for s in load_stats(RICH)}
    effects = [e for item in catalog for e in item.effects]
    assert effects and all(e.path in stat_paths for e in effects)


def test_rich_plot_beats():
    beats = {b.id: b for b in load_beats(RICH)}
    assert 3 <= len(beats) <= 5
    assert all(b.scene_min is not None and b.scene_max is not None for b in beats.values())
    assert any(b.requires for b in beats.values())
    assert all(set(b.requires) <= set(beats) for b in beats.values())
    assert any(b.state for b in beats.values())
    npc_conditions = [c for b in beats.values() for c in b.npcs]
    assert npc_conditions
    npc_stats = {(s.npc, s.id) for s in load_stats(RICH) if s.npc}
    assert all((c.npc, c.attribute) in npc_stats for c in npc_conditions)
    assert any(b.ending for b in beats.values())


def test_rich_art_with_sidecars_and_provenance():
    records = {r.path: r for r in load_assets(RICH)}
    images = [p for p in _all_files(RICH / "art") if p.suffix == ".png"]
    assert 3 <= len(images) <= 4
    for image in images:
        relative = image.relative_to(RICH).as_posix()
        assert image.stat().st_size < 30_000, relative
        record = records[relative]  # loaded: its provenance passed
        assert (RICH / f"{relative}.keywords.txt").is_file()
        assert record.sidecar and record.alt_text
        assert record.generated and record.provenance is not None


def test_art_script_is_deterministic_and_matches_the_campaign(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):  # run as an author runs it
        subprocess.run([sys.executable, str(MAKE_ART), str(out)], check=True, capture_output=True,
                       timeout=60)
    made = [p.relative_to(first) for p in _all_files(first)]
    assert made == [p.relative_to(RICH) for p in _all_files(RICH / "art")]
    for relative in made:
        assert (first / relative).read_bytes() == (second / relative).read_bytes(), relative
        if relative.name.endswith(".keywords.txt"):  # the committed sidecars are the script's
            assert (first / relative).read_text() == (RICH / relative).read_text(), relative
