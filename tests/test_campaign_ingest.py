"""Campaign ingestion into a real store (DuckDB file) with the real MiniLM embedder.

What is stored must be exactly what grounding reads: the scope ``lore_scope(id)``,
searched the way ``Storyline.lore`` searches it and turned into context fragments.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from narratoria.runtime.campaign import CampaignError, chunk_file, ingest
from narratoria.runtime.embedding import shared_local
from narratoria.runtime.planner.context import Fragment, assemble
from narratoria.runtime.store import PersistenceStore
from narratoria.runtime.turn.grounding import lore_scope

from conftest import TESTS

TINY = TESTS / "fixtures" / "campaigns" / "tiny"


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    return Path(shutil.copytree(TINY, tmp_path / "tiny"))


@pytest.fixture
def store(tmp_path: Path):
    with PersistenceStore(tmp_path / "narratoria.duckdb", shared_local()) as s:
        yield s


def stored(store: PersistenceStore, campaign: str = "tiny") -> dict[str, object]:
    records = store.playthrough(lore_scope(campaign)).exact_match("lore_chunk")
    return {r.id: r for r in records}


def expected_chunks(root: Path) -> list:
    files = ["character_merlin.txt", "world_setting.md", "lore/magicsystemlore.txt",
             "items/item_staff.yml", "stats/health.json", "stats/hidden/suspicion.json"]
    return [c for f in files for c in chunk_file(f, (root / f).read_text())]


def test_ingestion_stores_every_chunk_with_its_metadata_in_the_campaign_scope(tiny, store):
    progress: list[tuple[str, int, int]] = []
    result = ingest(tiny, store, progress=lambda *p: progress.append(p))
    chunks = expected_chunks(tiny)
    assert (result.campaign_id, result.version, result.status) == ("tiny", "1.0.0", "complete")
    assert (result.total_files, result.binary_assets) == (6, 1)
    assert result.text_chunks == result.chunks_embedded == len(chunks)
    assert (result.chunks_reused, result.chunks_removed, result.files_reingested) == (0, 0, 6)
    assert ("embedding", len(chunks), len(chunks)) in progress and progress[0][0] == "files"

    records = stored(store)
    assert len(records) == len(chunks)
    by_place = {(r.file_path, r.chunk_index): r for r in records.values()}
    for c in chunks:
        r = by_place[(c.file, c.chunk_index)]
        assert (r.campaign_id, r.campaign_version) == ("tiny", "1.0.0")
        assert (r.content, r.token_count, r.paragraph_id) == (c.content, c.token_count, c.paragraph_id)
        assert (r.source_type, r.weight_tier, r.file_origin, r.is_player) == (
            c.source_type, c.weight_tier, c.file, False)
        assert r.entity_ids == c.entity_ids
    merlin_fm = by_place[("character_merlin.txt", 0)]
    assert (merlin_fm.source_type, merlin_fm.weight_tier, merlin_fm.entity_ids) == ("frontmatter", 1, ["merlin"])
    # Nothing of the campaign leaks into other scopes.
    assert store.playthrough_ids("lore_chunk") == ["campaign:tiny"]


def test_ingested_chunks_keep_where_they_came_from(tiny, store):
    ingest(tiny, store)
    scope = store.playthrough(lore_scope("tiny"))
    by_place = {(r.file_path, r.chunk_index): r for r in stored(store).values()}
    # A structured file: one chunk a field, its JSON path kept.
    staff = scope.exact_match("lore_chunk", {"filePath": "items/item_staff.yml",
                                             "jsonField": "properties"})
    assert len(staff) == 1 and "rarity: rare" in staff[0].content
    assert (staff[0].chunk_method, staff[0].json_field, staff[0].entity_type, staff[0].source_line) == (
        "field", "properties", "item", 1)
    assert {r.json_field for r in scope.exact_match("lore_chunk", {"chunkMethod": "field"})
            if r.file_path == "items/item_staff.yml"} == {
        "display_name", "description", "properties", "flavor_text"}
    # Prose: the paragraph and the line it starts on; the frontmatter block from line 1.
    tower = by_place[("world_setting.md", 2)]
    assert tower.content.startswith("The tower stands alone")
    assert (tower.chunk_method, tower.source_line, tower.json_field) == ("paragraph", 8, None)
    assert (tower.entity_type, tower.content_type) == ("world", "setting")
    front = by_place[("world_setting.md", 0)]
    assert (front.chunk_method, front.source_line) == ("frontmatter", 1)
    # Every stored chunk says how it was made, as the chunker said.
    for c in expected_chunks(tiny):
        r = by_place[(c.file, c.chunk_index)]
        assert (r.chunk_method, r.source_line, r.json_field, r.entity_type, r.content_type) == (
            c.method, c.line, c.json_path, c.entity_type or None, c.content_type or None)


def test_grounding_finds_the_ingested_lore_as_binding_and_authoritative_fragments(tiny, store):
    ingest(tiny, store)
    # What Storyline.lore does for a campaign session's scene.
    hits = store.playthrough(lore_scope("tiny")).semantic_search(
        "an old wizard with grey eyes and a patient voice", "lore_chunk", 6)
    fragments = [Fragment.from_hit(h) for h in hits]
    top = fragments[0]
    assert (top.file_origin, top.source_type, top.weight_tier, top.entity) == (
        "character_merlin.txt", "prose", 3, "merlin")
    assert top.text.startswith("Merlin is an old wizard")
    binding = store.playthrough(lore_scope("tiny")).exact_match(
        "lore_chunk", {"entityId": "merlin", "sourceType": "frontmatter"})
    block = assemble([Fragment.from_lore(r) for r in binding] + fragments, 2000).text
    assert "BINDING assertion from character_merlin.txt" in block
    assert "core_traits: [never_accepts_evil]" in block


def test_a_second_ingestion_of_an_unchanged_campaign_embeds_nothing(tiny, store):
    first = ingest(tiny, store)
    before = stored(store)
    again = ingest(tiny, store)
    assert (again.files_reingested, again.chunks_embedded, again.chunks_removed) == (0, 0, 0)
    assert again.chunks_reused == again.text_chunks == first.text_chunks
    assert stored(store).keys() == before.keys()


def test_editing_one_file_reingests_only_that_file(tiny, store):
    ingest(tiny, store)
    before = stored(store)
    world = tiny / "world_setting.md"
    world.write_text(world.read_text() + "\nA new paragraph: the river floods every spring.\n")
    result = ingest(tiny, store)
    world_chunks = chunk_file("world_setting.md", world.read_text())
    assert result.files_reingested == 1
    assert result.chunks_embedded == len(world_chunks)
    assert result.chunks_removed == sum(r.file_path == "world_setting.md" for r in before.values())
    after = stored(store)
    # Every other file's chunks are the very same rows (same ids: not re-embedded).
    assert {k for k, r in after.items() if r.file_path != "world_setting.md"} == \
        {k for k, r in before.items() if r.file_path != "world_setting.md"}
    assert sorted(r.content for r in after.values() if r.file_path == "world_setting.md") == \
        sorted(c.content for c in world_chunks)
    assert len(after) == result.text_chunks


def test_a_deleted_file_loses_its_chunks_and_a_new_version_is_recorded_on_all(tiny, store):
    ingest(tiny, store)
    (tiny / "items" / "item_staff.yml").unlink()
    (tiny / "campaign.yml").write_text((tiny / "campaign.yml").read_text().replace("1.0.0", "1.1.0"))
    result = ingest(tiny, store)
    assert (result.version, result.chunks_embedded, result.files_reingested) == ("1.1.0", 0, 0)
    after = stored(store)
    assert not any(r.file_path == "items/item_staff.yml" for r in after.values())
    assert {r.campaign_version for r in after.values()} == {"1.1.0"}


def test_a_realised_player_characters_chunks_survive_reingestion(tiny, store):
    from narratoria.runtime.store import LoreChunk

    ingest(tiny, store)
    player = LoreChunk(id="player:char_1#0", campaign_id="tiny", campaign_version="1.0.0",
                       file_path="characters/player/char_1", chunk_index=0, paragraph_id=0,
                       content="Wren, a lamplighter's daughter who hums when she is afraid.",
                       token_count=14, source_type="frontmatter", weight_tier=2,
                       file_origin="characters/player/char_1", is_player=True,
                       entity_ids=["char_1"], tags=[])
    store.playthrough(lore_scope("tiny")).store_many("lore_chunk", [player])
    world = tiny / "world_setting.md"
    world.write_text(world.read_text() + "\nThe ferry stops running at dusk.\n")
    result = ingest(tiny, store)
    assert result.files_reingested == 1 and result.chunks_removed >= 1
    assert "player:char_1#0" in stored(store)  # not a campaign file's chunk: never obsolete


def test_a_broken_new_version_leaves_the_previous_one_stored_and_searchable(tiny, store):
    ingest(tiny, store)
    before = stored(store)
    (tiny / "world_setting.md").write_text("---\nentity_type: world\n---\nThe hill is now a lake.\n")
    (tiny / "stats" / "health.json").write_text('{\n  "id": "health",\n  "range": {"min": 5, "max": 1}\n}')
    with pytest.raises(CampaignError) as caught:
        ingest(tiny, store)
    assert [str(p) for p in caught.value.problems] == [
        "stats/health.json:3: range: min (5) must be below max (1)"]
    after = stored(store)
    assert after.keys() == before.keys()
    assert {r.campaign_version for r in after.values()} == {"1.0.0"}
    hits = store.playthrough(lore_scope("tiny")).semantic_search("sheep graze on the green hill",
                                                                "lore_chunk", 1)
    assert hits[0].record.file_path == "world_setting.md" and "Sheep graze" in hits[0].record.content


def test_two_campaigns_live_in_separate_scopes(tiny, store, tmp_path):
    other = Path(shutil.copytree(TINY, tmp_path / "other"))
    (other / "campaign.yml").write_text("id: second_tower\ntitle: Another\nversion: '2'\n")
    ingest(tiny, store)
    ingest(other, store)
    assert store.playthrough_ids("lore_chunk") == ["campaign:second_tower", "campaign:tiny"]
    assert {r.campaign_id for r in stored(store, "second_tower").values()} == {"second_tower"}
    assert len(stored(store, "second_tower")) == len(stored(store))


# -- the command line ---------------------------------------------------------------------------

def run_cli(*args: str) -> tuple[int, str, str]:
    import subprocess
    import sys
    narratoria = Path(sys.executable).parent / "narratoria"
    proc = subprocess.run([str(narratoria), *args], capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_cli_validate_prints_every_problem_and_fails():
    broken = TESTS / "fixtures" / "campaigns" / "broken"
    code, out, err = run_cli("campaigns", "validate", str(broken))
    assert code == 1
    lines = out.splitlines()
    assert f"{broken}/campaign.yml:1: version: required field is missing" in lines
    assert f"{broken}/stats/mana.json:3: range: min (50) must be below max (10)" in lines
    assert len(lines) == 10 and "9 error(s), 1 warning(s)" in err
    code, out, _ = run_cli("campaigns", "validate", str(broken), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False and len(doc["problems"]) == 10
    assert doc["problems"][0] == {"file": "campaign.yml", "line": 1, "field": "version",
                                  "message": "required field is missing", "severity": "error"}
    code, out, _ = run_cli("campaigns", "validate", str(TINY), "--json")
    assert code == 0 and json.loads(out)["campaign"] == {"id": "tiny", "title": "The Tiny Tower",
                                                         "version": "1.0.0"}


@pytest.mark.model
def test_cli_ingest_stores_the_campaign_and_reports_progress(tiny, tmp_path):
    data = tmp_path / "data"
    code, out, err = run_cli("campaigns", "ingest", str(tiny), "--data-dir", str(data), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["campaignId"], doc["status"], doc["chunksReused"]) == ("tiny", "complete", 0)
    assert doc["textChunks"] == doc["chunksEmbedded"] == len(expected_chunks(tiny))
    assert "files: 6/6" in err and f"embedding: {doc['textChunks']}/{doc['textChunks']}" in err
    code, out, _ = run_cli("campaigns", "ingest", str(tiny), "--data-dir", str(data), "--json")
    assert code == 0 and json.loads(out)["chunksEmbedded"] == 0
    broken = TESTS / "fixtures" / "campaigns" / "broken"
    code, out, err = run_cli("campaigns", "ingest", str(broken), "--data-dir", str(data))
    assert code == 1 and "stats/mana.json:3: range: min (50) must be below max (10)" in err
