"""`narratoria campaigns import` (clients/commands/campaign_import.py, runtime/campaign/lorebook.py):
SillyTavern World Info, NovelAI lorebooks and character-card books as campaign folders
that validate and ingest into a real store, run as the installed command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from narratoria.runtime.campaign import ingest
from narratoria.runtime.campaign.frontmatter import split_frontmatter
from narratoria.runtime.campaign.lorebook import LorebookError, book_lore_files
from narratoria.runtime.embedding import shared_local
from narratoria.runtime.store import PersistenceStore
from narratoria.runtime.turn.grounding import lore_scope

NARRATORIA = Path(sys.executable).parent / "narratoria"

WORLD_INFO = {"entries": {
    "0": {"uid": 0, "key": ["saltglass", "Heartglass"], "keysecondary": ["lens"],
          "comment": "Saltglass", "constant": False, "selective": True, "selectiveLogic": 0,
          "order": 100, "position": 0, "disable": False, "probability": 100, "depth": 4,
          "content": "Saltglass is fired from the white sand of the flats with kelp ash. Light "
                     "shone through it shows drowned streets as they were, lamps lit."},
    "1": {"uid": 7, "key": ["bell chapel", "bells"], "keysecondary": [], "comment": "Bell Chapel",
          "constant": True, "selective": False, "order": 50, "position": 1, "disable": False,
          "content": "The Bell Chapel rings one dusk bell for each day of the Ebb."},
    "2": {"uid": 9, "key": ["kraken"], "keysecondary": [], "comment": "Old kraken rumour",
          "constant": False, "selective": False, "order": 10, "position": 0, "disable": True,
          "content": "Some say a kraken sleeps under the harbour."},
}}

NOVELAI = {"lorebookVersion": 5, "settings": {"orderByKeyLocations": False},
           "categories": [{"name": "Places", "id": "c1"}],
           "entries": [
               {"id": "a1", "displayName": "Crooked Quay", "keys": ["quay", "Crooked Quay"],
                "text": "The Crooked Quay bends like a broken finger into the bay.",
                "enabled": True, "forceActivation": False, "searchRange": 1000,
                "contextConfig": {"prefix": "", "suffix": "\n", "budgetPriority": 400,
                                  "insertionPosition": -1},
                "category": "c1"},
               {"id": "a2", "displayName": "Gaff and Lantern", "keys": ["tavern"],
                "text": "The Gaff and Lantern sells bitter and rumours.", "enabled": True}]}

CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Odile Venn", "description": "A bankrupt lampwright.",
                 "character_book": {
                     "name": "Venn family lore", "scan_depth": 3,
                     "description": "What the Venns would rather forget.",
                     "entries": [
                         {"keys": ["Aubin Venn", "guildmaster"], "secondary_keys": [],
                          "content": "Aubin Venn commissioned the Heartglass in the year of the flood.",
                          "enabled": True, "insertion_order": 5, "name": "Aubin Venn",
                          "comment": "the founder",
                          "constant": False, "extensions": {"weight": 3}, "id": 1},
                         {"keys": ["debt"], "content": "{{char}} owes the Harbour Council.",
                          "enabled": True, "insertion_order": 1, "comment": "The debt",
                          "position": "after_char", "extensions": {}}]}}}


def write(path: Path, data) -> Path:
    path.write_text(json.dumps(data) if not isinstance(data, str) else data, "utf-8")
    return path


def narratoria(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(NARRATORIA), "campaigns", *args], capture_output=True, text=True,
                          timeout=180, env={**os.environ}, cwd=cwd)


def imported(source: Path, out: Path, *extra: str) -> dict:
    proc = narratoria("import", str(source), "-o", str(out), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def front(path: Path) -> tuple[dict, str]:
    fm, body, _ = split_frontmatter(path.read_text("utf-8"), path.name)
    return fm or {}, body.strip()


def test_world_info_becomes_a_campaign_that_validates_and_is_found_after_ingestion(tmp_path):
    source = write(tmp_path / "brinehollow.json", WORLD_INFO)
    out = tmp_path / "camps" / "ebb-import"
    doc = imported(source, out)
    assert (doc["campaign"], doc["title"], doc["format"]) == ("ebb-import", "brinehollow", "sillytavern")
    assert sorted(doc["files"]) == [".disabled/lore/old_kraken_rumour.md", "campaign.yml",
                                    "lore/bell_chapel.md", "lore/saltglass.md"]
    manifest = (out / "campaign.yml").read_text()
    assert "id: ebb-import" in manifest and "title: brinehollow" in manifest
    assert "brinehollow.json (SillyTavern World Info)" in manifest

    fm, body = front(out / "lore" / "saltglass.md")
    assert fm["entity_type"] == "lore" and fm["tags"] == ["saltglass", "Heartglass"]
    assert fm["secondary_keys"] == ["lens"]
    assert fm["provenance"] == {"source_file": "brinehollow.json", "format": "sillytavern",
                                "entry": 0, "uid": 0}
    assert body.startswith("Saltglass is fired")
    assert front(out / "lore" / "bell_chapel.md")[0]["priority"] == 5  # constant: always on

    # Disabled: kept for the author, marked, and out of play (a hidden folder is never ingested).
    fm, body = front(out / ".disabled" / "lore" / "old_kraken_rumour.md")
    assert fm["enabled"] is False and fm["provenance"]["uid"] == 9 and "kraken" in body
    assert any("entry 2 (uid 9)" in line and "disabled" in line for line in doc["report"])

    # Every field with no equivalent, per entry, with its value.
    unmapped = {u["index"]: u for u in doc["unmapped"]}
    assert unmapped[0]["fields"] == {"selective": True, "selectiveLogic": 0, "order": 100,
                                     "position": 0, "probability": 100, "depth": 4}
    assert unmapped[0]["file"] == "lore/saltglass.md" and unmapped[0]["uid"] == 0
    assert unmapped[1]["fields"]["order"] == 50 and unmapped[2]["fields"] == {"selective": False,
                                                                             "order": 10, "position": 0}
    assert any(line.startswith("entry 0 (uid 0) -> lore/saltglass.md: unmapped selective=true")
               for line in doc["report"])

    proc = narratoria("validate", str(out), "--json")
    assert proc.returncode == 0, proc.stdout
    report = json.loads(proc.stdout)
    assert report["ok"] and report["files"] == 2 and report["problems"] == []

    with PersistenceStore(tmp_path / "narratoria.duckdb", shared_local()) as store:
        result = ingest(out, store)
        assert (result.campaign_id, result.total_files) == ("ebb-import", 2)
        lore = store.playthrough(lore_scope("ebb-import"))
        hits = lore.semantic_search("what does light through the green glass show", "lore_chunk", 3)
        assert hits[0].record.file_path == "lore/saltglass.md"
        bound = lore.exact_match("lore_chunk", {"entityId": "saltglass", "sourceType": "frontmatter"})
        assert len(bound) == 1 and "Heartglass" in bound[0].content
        assert "Heartglass" in next(r for r in lore.exact_match("lore_chunk", {"entityId": "saltglass"})
                                    if r.source_type == "prose").tags
        assert not [r for r in lore.exact_match("lore_chunk") if "kraken" in r.content]


def test_world_info_entries_as_a_list_are_accepted(tmp_path):
    source = write(tmp_path / "list.json", {"entries": list(WORLD_INFO["entries"].values())})
    doc = imported(source, tmp_path / "listed")
    assert [e["where"] for e in doc["entries"]] == ["entries[0]", "entries[1]", "entries[2]"]


def test_a_novelai_lorebook_maps_display_names_keys_and_reports_context_config(tmp_path):
    source = write(tmp_path / "quay.lorebook", NOVELAI)
    out = tmp_path / "quay"
    doc = imported(source, out)
    assert doc["format"] == "novelai" and doc["title"] == "quay"
    fm, body = front(out / "lore" / "crooked_quay.md")
    assert fm["tags"] == ["quay", "Crooked Quay"] and fm["title"] == "Crooked Quay"
    assert fm["provenance"] == {"source_file": "quay.lorebook", "format": "novelai", "entry": 0,
                                "uid": "a1"}
    assert body == "The Crooked Quay bends like a broken finger into the bay."
    first = next(u for u in doc["unmapped"] if u["index"] == 0)
    assert set(first["fields"]) == {"searchRange", "contextConfig", "category"}
    assert first["fields"]["contextConfig"]["budgetPriority"] == 400
    book = next(u for u in doc["unmapped"] if u["index"] is None)
    assert set(book["fields"]) == {"lorebookVersion", "settings", "categories"}
    assert narratoria("validate", str(out)).returncode == 0


def test_a_v2_card_imports_its_character_book_with_the_macros_and_extensions_said(tmp_path):
    source = write(tmp_path / "odile.json", CARD)
    out = tmp_path / "odile"
    proc = narratoria("import", str(source), "-o", str(out))  # the text output
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"{out}: campaign 'odile' (Venn family lore) from odile.json "
                                  "(character_book): 2 lore file(s), 0 disabled")
    assert 'entry 0 (uid 1) -> lore/aubin_venn.md: unmapped insertion_order=5, extensions={"weight": 3}' \
        ', comment="the founder"' in proc.stdout  # the name is the title: the comment is said
    assert "entry 1 -> lore/the_debt.md: unmapped insertion_order=1, position=\"after_char\"" in proc.stdout
    assert "{{char}}/{{user}} macros kept verbatim" in proc.stdout
    assert "book: unmapped scan_depth=3" in proc.stdout
    fm, body = front(out / "lore" / "the_debt.md")
    assert body == "{{char}} owes the Harbour Council." and fm["title"] == "The debt"
    manifest = (out / "campaign.yml").read_text()
    assert "What the Venns would rather forget." in manifest and "odile.json" in manifest
    assert narratoria("validate", str(out)).returncode == 0


def test_book_lore_files_converts_a_bare_character_book():
    files, report = book_lore_files(CARD["data"]["character_book"], source="odile.png")
    assert sorted(files) == ["lore/aubin_venn.md", "lore/the_debt.md"]
    fm, body = split_frontmatter(files["lore/aubin_venn.md"], "x")[:2]
    assert fm["tags"] == ["Aubin Venn", "guildmaster"] and fm["provenance"]["source_file"] == "odile.png"
    assert body.strip().startswith("Aubin Venn commissioned")
    assert "book: unmapped scan_depth=3" in report
    with pytest.raises(LorebookError, match=r"odile.png: entries\[0\].content: the entry has no content"):
        book_lore_files({"entries": [{"keys": ["x"], "content": "  "}]}, source="odile.png")


@pytest.mark.parametrize("data, where, message", [
    ("{not json", "line 1, column 2", "not JSON"),
    ({"name": "nothing"}, "entries", "unknown format"),
    ({"spec": "chara_card_v3", "data": {"name": "No book"}}, "data.character_book", "no character_book"),
    ({"entries": {"0": {"uid": 0, "key": ["a"], "content": "fine"},
                  "1": {"uid": 1, "key": ["b"], "content": ""}}}, 'entries["1"].content',
     "the entry has no content"),
    ({"lorebookVersion": 5, "entries": [{"keys": ["a"], "text": "ok"}, {"keys": ["b"]}]},
     "entries[1].text", "the entry has no content"),
])
def test_bad_input_names_the_file_and_the_entry_and_leaves_nothing(tmp_path, data, where, message):
    source = write(tmp_path / "bad.json", data)
    out = tmp_path / "out" / "bad"
    proc = narratoria("import", str(source), "-o", str(out), "--json")
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"narratoria: bad.json: {where}: ") and message in proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["status"], doc["file"], doc["where"]) == ("error", "bad.json", where)
    assert not out.exists()
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_a_non_empty_folder_is_kept_unless_forced(tmp_path):
    source = write(tmp_path / "brinehollow.json", WORLD_INFO)
    out = tmp_path / "ebb"
    out.mkdir()
    (out / "notes.md").write_text("mine")
    proc = narratoria("import", str(source), "-o", str(out))
    assert proc.returncode == 2 and "is not empty: pass --force" in proc.stderr
    assert [p.name for p in out.iterdir()] == ["notes.md"]
    # A failed forced import leaves the old folder as it was, and no staging folder behind.
    broken = write(tmp_path / "broken.json", {"entries": [{"uid": 0, "key": ["a"], "content": None}]})
    assert narratoria("import", str(broken), "-o", str(out), "--force").returncode == 2
    assert [p.name for p in out.iterdir()] == ["notes.md"]
    # So does one that fails after writing: an entry past the 1 MiB a text file may hold
    # is written, fails validation in the staging folder, and the staging folder goes.
    huge = write(tmp_path / "huge.json", {"entries": [{"uid": 0, "key": ["a"],
                                                       "content": "word " * 220_000}]})
    proc = narratoria("import", str(huge), "-o", str(out), "--force")
    assert proc.returncode == 2 and "does not validate" in proc.stderr and "lore/a.md" in proc.stderr
    assert [p.name for p in out.iterdir()] == ["notes.md"]
    imported(source, out, "--force")
    assert not (out / "notes.md").exists() and (out / "lore" / "saltglass.md").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["brinehollow.json", "broken.json", "ebb",
                                                           "huge.json"]


def test_the_current_empty_folder_can_be_the_campaign(tmp_path):
    source = write(tmp_path / "quay.lorebook", NOVELAI)
    here = tmp_path / "quay_here"
    here.mkdir()
    proc = narratoria("import", str(source), "-o", ".", cwd=here)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in here.iterdir()) == ["campaign.yml", "lore"]
    assert "id: quay_here" in (here / "campaign.yml").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quay.lorebook", "quay_here"]


def test_a_provenance_naming_an_image_is_no_missing_asset(tmp_path):
    """A card's book read from ``odile.png``: where the lore came from is not an asset the
    campaign should hold, so validation warns of nothing."""
    out = tmp_path / "odile"
    imported(write(tmp_path / "odile.json", CARD), out)
    files, _ = book_lore_files(CARD["data"]["character_book"], source="odile.png")
    for name, text in files.items():
        (out / name).write_text(text, "utf-8")
    proc = narratoria("validate", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert "odile.png" not in proc.stdout
