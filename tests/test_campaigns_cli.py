"""`narratoria campaigns related|assets` (clients/commands/campaign_queries.py) and the
graph and assets a LoadedCampaign keeps (campaign/loaded.py): real campaigns, no daemon."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, TESTS
from narratoria.clients.cli import main
from narratoria.runtime.campaign.assets import AssetRecord
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.campaign.relations import Graph

LONG_EBB = REPO / "campaigns" / "long_ebb"
TINY = TESTS / "fixtures" / "campaigns" / "tiny"


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch):
    """A data dir of the test's own: locating a campaign never touches the user's."""
    monkeypatch.setenv("NARRATORIA_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["campaigns", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_json(capsys, *args: str) -> dict:
    code, out, err = run(capsys, *args, "--json")
    assert code == 0, err
    return json.loads(out)


# -- related ---------------------------------------------------------------------------------

def test_related_by_campaign_id_groups_edges_by_direction_with_file_and_line(capsys):
    doc = run_json(capsys, "related", "long_ebb", "odile_venn")
    assert doc["campaign"] == "long_ebb"
    assert doc["root"] == str(LONG_EBB.resolve())
    assert doc["entity"]["id"] == "odile_venn"
    assert doc["entity"]["name"] == "Odile Venn"
    assert doc["entity"]["files"] == ["characters/character_odile_venn.md"]
    out = {(e["target"], e["kind"]): e for e in doc["outgoing"]}
    assert all(e["source"] == "odile_venn" for e in doc["outgoing"])
    assert all(e["target"] == "odile_venn" for e in doc["incoming"])
    tamsin = out[("tamsin_cask", "relationships")]
    assert tamsin["file"] == "characters/character_odile_venn.md"
    assert tamsin["line"] == 16 and tamsin["explicit"] is True
    assert ("lampwrights_guild", "faction") in out
    assert ("art/characters/odile_venn.png", "portrait_asset") in out
    incoming = {(e["source"], e["kind"]) for e in doc["incoming"]}
    assert ("tamsin_cask", "relationships") in incoming  # her side of it
    assert ("lampwrights_guild", "leader") in incoming
    assert ("art/characters/odile_venn.png", "depicts") in incoming
    for edge in doc["outgoing"] + doc["incoming"]:  # every edge cites a real line
        lines = (LONG_EBB / edge["file"]).read_bytes().split(b"\n")
        assert 1 <= edge["line"] <= len(lines)


def test_related_text_output_by_name_shows_both_directions(capsys):
    code, out, err = run(capsys, "related", "long_ebb", "Tamsin Cask")  # a name, not the id
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("tamsin_cask \u2014 Tamsin Cask")
    outgoing = lines.index(next(l for l in lines if l.startswith("outgoing")))
    incoming = lines.index(next(l for l in lines if l.startswith("incoming")))
    assert outgoing < incoming
    mine = "\n".join(lines[outgoing:incoming])
    assert "relationships" in mine and "odile_venn" in mine
    assert "characters/character_tamsin_cask.md:" in mine
    theirs = "\n".join(lines[incoming:])
    assert "characters/character_odile_venn.md:16" in theirs


def test_related_by_folder_path(capsys):
    doc = run_json(capsys, "related", str(TINY), "merlin")
    assert doc["root"] == str(TINY.resolve())
    assert doc["entity"]["id"] == "merlin"
    assert [(e["target"], e["kind"], e["file"], e["line"]) for e in doc["outgoing"]] == [
        ("art/characters/merlin.png", "portrait_asset", "character_merlin.txt", 5)]
    assert {(e["source"], e["kind"]) for e in doc["incoming"]} == {
        ("art/characters/merlin.png", "depicts"), ("oak_staff", "mentions"),
        ("magicsystem", "mentions")}
    code, out, _ = run(capsys, "related", str(TINY), "Merlin")
    assert code == 0
    assert "items/item_staff.yml:4" in out and "character_merlin.txt:5" in out


def test_an_unknown_entity_fails_naming_close_matches(capsys):
    code, out, err = run(capsys, "related", "long_ebb", "odile_ven")
    assert code == 1
    assert out == ""
    assert "odile_ven" in err and "did you mean" in err and "odile_venn" in err
    code, _, err = run(capsys, "related", str(TINY), "merlyn")
    assert code == 1 and "merlin" in err
    code, _, err = run(capsys, "related", str(TINY), "zzzzzz")
    assert code == 1 and "no such entity" in err


def test_an_unknown_campaign_fails(capsys):
    code, out, err = run(capsys, "related", "no_such_campaign_here", "merlin")
    assert code == 1 and out == ""
    assert "no_such_campaign_here" in err
    code, _, err = run(capsys, "assets", "no_such_campaign_here")
    assert code == 1 and "no_such_campaign_here" in err


# -- assets ----------------------------------------------------------------------------------

LONG_EBB_ART = {"art/characters/odile_venn.png", "art/characters/tamsin_cask.png",
                "art/items/tide_lantern.png", "art/locations/undercourt_at_low_water.png"}
LONG_EBB_ICONS = {"ui/items/lamp_oil_flask.svg", "ui/items/weapon.svg",
                  "ui/state/npcs.**.trust.svg", "ui/state/player.inventory.svg",
                  "ui/state/player.stats.*.svg", "ui/state/player.stats.vigour.svg",
                  "ui/state/world.location.svg"}


def test_assets_by_campaign_id_lists_the_four_pngs_and_the_svg_icons(capsys):
    doc = run_json(capsys, "assets", "long_ebb")
    assert doc["campaign"] == "long_ebb"
    assets = {a["path"]: a for a in doc["assets"]}
    assert set(assets) == LONG_EBB_ART | LONG_EBB_ICONS
    for a in assets.values():
        assert a["type"] == "image" and a["format"] == ("png" if a["path"] in LONG_EBB_ART
                                                        else "svg")
        assert a["width"] > 0 and a["height"] > 0
        assert a["keywords"]
        assert a["generated"] is True and a["provenance"]["sourceModel"]
    assert (assets["art/characters/odile_venn.png"]["width"],
            assets["art/characters/odile_venn.png"]["height"]) == (192, 256)
    assert "lampwright" in assets["art/characters/odile_venn.png"]["keywords"]
    assert doc["rejected"] == []
    assert [p["severity"] for p in doc["problems"]] == ["warning"]  # the AI-generated notice


def test_assets_text_output(capsys):
    code, out, err = run(capsys, "assets", "long_ebb")
    assert code == 0, err
    assert out.startswith("11 asset(s) in ")
    assert "art/items/tide_lantern.png  image/png  128x128  generated by " in out
    assert "keywords: tide, lantern" in out
    code, out, _ = run(capsys, "assets", str(TINY))
    assert code == 0
    assert "art/characters/merlin.png  image/png  2x3  human-made" in out
    assert "keywords: merlin, wizard, grey_eyes" in out


def test_assets_shows_the_rejected_ones_with_file_and_line(capsys, tmp_path):
    folder = tmp_path / "tiny"
    shutil.copytree(TINY, folder)
    (folder / "art" / "characters" / "merlin.png.keywords.txt").write_text(
        "---\ngenerated: true\n---\nwizard\n")
    (folder / "art" / "broken.png").write_bytes(b"not a png at all")
    doc = run_json(capsys, "assets", str(folder))
    assert doc["assets"] == []
    rejected = {r["path"]: r["problems"] for r in doc["rejected"]}
    assert set(rejected) == {"art/broken.png", "art/characters/merlin.png"}
    [bad] = rejected["art/broken.png"]
    assert bad["file"] == "art/broken.png" and "cannot read the image" in bad["message"]
    [missing] = rejected["art/characters/merlin.png"]
    assert missing["file"] == "art/characters/merlin.png.keywords.txt"
    assert missing["line"] == 2 and "missing provenance" in missing["message"]
    code, out, _ = run(capsys, "assets", str(folder))
    assert code == 0
    assert "2 rejected" in out
    assert "art/characters/merlin.png.keywords.txt:2: provenance: Generated asset missing" in out


def test_the_installed_command_runs_them(data_dir):
    env = {**os.environ, "NARRATORIA_DATA_DIR": str(data_dir)}
    proc = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "campaigns", "related",
                           str(TINY), "merlin", "--json"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["entity"]["id"] == "merlin"
    proc = subprocess.run([sys.executable, "-m", "narratoria.clients.cli", "campaigns", "related",
                           "long_ebb", "odile_ven"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 1 and "odile_venn" in proc.stderr


# -- validate --------------------------------------------------------------------------------

def test_validate_takes_a_built_in_campaigns_id(capsys):
    code, out, err = run(capsys, "validate", "long_ebb")
    assert code == 0, err
    assert f"{LONG_EBB}: valid: 0 error(s)" in out + err
    doc = run_json(capsys, "validate", "long_ebb")
    assert doc["ok"] is True and doc["campaign"]["id"] == "long_ebb"
    assert doc["path"] == str(LONG_EBB.resolve())


def test_validate_takes_a_user_campaigns_id_and_still_a_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "share"))
    shutil.copytree(TINY, tmp_path / "share" / "narratoria" / "campaigns" / "tiny_copy")
    doc = run_json(capsys, "validate", "tiny_copy")
    assert doc["ok"] is True and doc["campaign"]["id"] == "tiny_copy"
    assert run_json(capsys, "validate", str(TINY))["path"] == str(TINY)


def test_validate_refuses_an_unknown_id_or_a_missing_path_in_one_line(capsys, tmp_path):
    code, out, err = run(capsys, "validate", "no_such_campaign_here")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("narratoria: ")
    assert "no campaign with id 'no_such_campaign_here'" in err
    missing = tmp_path / "gone"
    code, out, err = run(capsys, "validate", str(missing))
    assert code == 1 and out == ""
    assert err == f"narratoria: campaign: {missing} does not exist\n"


# -- LoadedCampaign ----------------------------------------------------------------------------

def test_a_loaded_campaign_keeps_its_graph_and_assets():
    ebb = load_campaign(LONG_EBB)
    graph = ebb.graph
    assert isinstance(graph, Graph)
    assert graph is ebb.graph  # computed once
    assert "odile_venn" in graph.entities
    assert any(e.source == "odile_venn" and e.target == "tamsin_cask" for e in graph.edges)
    assets = ebb.assets
    assert assets is ebb.assets
    assert all(isinstance(a, AssetRecord) for a in assets)
    assert {a.path for a in assets} == LONG_EBB_ART | LONG_EBB_ICONS
    with pytest.raises(AttributeError):  # still frozen
        ebb.root = TINY
    assert load_campaign(TINY).graph.resolve("Merlin") == "merlin"
