"""State-bound UI icons (docs/campaigns.md, "Icons"): the index and each step of its resolution,
and the session view a front-end draws (hidden stats never in it, bad values as null).

Real campaign folders under tmp_path with real files; the built-in long_ebb for the
shipped icons.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from narratoria.runtime.campaign.icons import IconIndex, default_kind
from narratoria.runtime.campaign.library import CampaignLibrary
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.runtime.sessions.view import number_or_none, session_view, visible_state

REPO = Path(__file__).resolve().parent.parent
LONG_EBB = REPO / "campaigns" / "long_ebb"
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="8" height="8"/>\n'


def campaign(root: Path, *files: str) -> Path:
    (root / "campaign.yml").parent.mkdir(parents=True, exist_ok=True)
    (root / "campaign.yml").write_text("title: Icons\nversion: 1.0.0\n")
    for relative in files:
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SVG)
    return root


@pytest.fixture
def index(tmp_path) -> IconIndex:
    return IconIndex.build(campaign(
        tmp_path / "c",
        "ui/state/player.hp.svg",
        "ui/state/player.hp.png",                       # same name: PNG preferred over SVG
        "ui/state/player.stats.*.svg",
        "ui/state/player.stats.luck.svg",
        "ui/state/world.locations.*.marker.svg",
        "ui/state/world.locations.capital.marker.svg",
        "ui/state/npcs.**.svg",
        "ui/state/npcs.*.stats.trust.svg",
        "ui/state/player.inventory.svg",
        "ui/state/world.svg",
        "ui/items/rusty_dagger.webp",
        "ui/items/weapon.svg",
        "ui/items/nested/potion.svg",                   # not directly in ui/items: no icon
        "art/items/lamp.png",
        "ui/state/notes.txt"))                          # content, not an icon


def test_exact_paths_win_and_the_preferred_format_is_kept(index):
    assert index.resolve("player.hp") == "ui/state/player.hp.png"
    assert index.resolve("player.stats.luck") == "ui/state/player.stats.luck.svg"  # over player.stats.*
    assert index.resolve("world.locations.capital.marker") == \
        "ui/state/world.locations.capital.marker.svg"


def test_a_single_star_matches_exactly_one_segment(index):
    assert index.resolve("player.stats.nerve") == "ui/state/player.stats.*.svg"
    assert index.resolve("world.locations.forest_grove.marker") == \
        "ui/state/world.locations.*.marker.svg"
    # Two segments where the star stands: not that pattern (falls back to the category).
    assert index.resolve("world.locations.a.b.marker") == "ui/state/world.svg"


def test_a_double_star_matches_any_depth_and_the_more_specific_pattern_wins(index):
    assert index.resolve("npcs.owen") == "ui/state/npcs.**.svg"
    assert index.resolve("npcs.owen.mood.today") == "ui/state/npcs.**.svg"
    # npcs.*.stats.trust has more literal segments than npcs.**: it comes first.
    assert index.resolve("npcs.owen.stats.trust") == "ui/state/npcs.*.stats.trust.svg"
    assert [p.asset for p in index.patterns][:1] == ["ui/state/npcs.*.stats.trust.svg"]


def test_items_by_id_then_by_type_then_the_inventory_category(index):
    assert index.resolve("player.inventory.rusty_dagger") == "ui/items/rusty_dagger.webp"
    sword = {"name": "Sword", "type": "weapon"}
    assert index.resolve("player.inventory.sword", sword) == "ui/items/weapon.svg"
    # No id icon, no type icon: the nearest ancestor with an icon (the category).
    assert index.resolve("player.inventory.rope", {"type": "tool"}) == "ui/state/player.inventory.svg"
    assert index.resolve("player.inventory.potion") == "ui/state/player.inventory.svg"
    assert "nested/potion" not in index.items


def test_explicit_icons_come_first_when_they_name_a_campaign_file(index):
    assert index.resolve_item("rusty_dagger", {"icon": "art/items/lamp.png"}) == "art/items/lamp.png"
    assert index.resolve_item("x", {}, definition_icon="art/items/lamp.png") == "art/items/lamp.png"
    # A path that is no file of the campaign is ignored, never served.
    assert index.resolve_item("rusty_dagger", {"icon": "../../etc/passwd"}) == \
        "ui/items/rusty_dagger.webp"
    assert index.explicit("/etc/passwd") is None


def test_the_system_default_names_a_kind(index, tmp_path):
    empty = IconIndex.build(campaign(tmp_path / "empty"))
    assert len(empty) == 0
    assert empty.resolve("player.stats.hp") == "default:stat"
    assert empty.resolve("npcs.owen.stats.trust") == "default:stat"
    assert empty.resolve("player.inventory") == "default:inventory"
    assert empty.resolve("player.inventory.rope") == "default:item"
    assert empty.resolve("world.location") == "default:location"
    assert empty.resolve("world.time") == "default:time"
    assert empty.resolve("npcs.owen") == "default:npc"
    assert empty.resolve("flags.met_owen") == "default:state"
    assert default_kind("quest") == "quest"
    # The category fallback comes before the default.
    assert index.resolve("world.weather") == "ui/state/world.svg"


def test_symlinks_and_hidden_files_are_never_icons(tmp_path):
    root = campaign(tmp_path / "c", "ui/state/player.hp.svg")
    outside = tmp_path / "secret.svg"
    outside.write_text(SVG)
    os.symlink(outside, root / "ui" / "state" / "world.time.svg")
    (root / "ui" / "state" / ".world.location.svg").write_text(SVG)
    index = IconIndex.build(root)
    assert index.resolve("world.time") == "default:time"
    assert index.resolve("world.location") == "default:location"
    assert index.resolve("player.hp") == "ui/state/player.hp.svg"


def test_the_index_is_built_once_per_campaign_load(tmp_path):
    root = tmp_path / "c"
    shutil.copytree(LONG_EBB, root)
    loaded = load_campaign(root)
    first = loaded.icons
    assert loaded.icons is first  # cached on the LoadedCampaign
    # Lookups come from memory: the folder can go away and answers stay the same.
    shutil.rmtree(root / "ui")
    assert loaded.icons.resolve("player.stats.vigour") == "ui/state/player.stats.vigour.svg"
    # A new load (the library reloads when files change) builds a new index.
    library = CampaignLibrary(tmp_path / "data", roots=[])
    again = library.load(str(root))
    assert again.icons is not first
    assert again.icons.resolve("player.stats.vigour") == "default:stat"
    assert library.load(str(root)).icons is again.icons  # unchanged files: the same load


def test_long_ebb_ships_icons_for_every_resolution_step():
    loaded = load_campaign(LONG_EBB)
    icons = loaded.icons
    assert icons.resolve("player.stats.vigour") == "ui/state/player.stats.vigour.svg"   # exact
    assert icons.resolve("player.stats.nerve") == "ui/state/player.stats.*.svg"         # *
    assert icons.resolve("npcs.odile_venn.stats.trust") == "ui/state/npcs.**.trust.svg"  # **
    assert icons.resolve("player.inventory.lamp_oil_flask") == "ui/items/lamp_oil_flask.svg"
    assert icons.resolve("player.inventory.boathook", {"type": "weapon"}) == "ui/items/weapon.svg"
    assert icons.resolve("player.inventory.bell_token", {"type": "charm"}) == \
        "ui/state/player.inventory.svg"                                                  # category
    assert icons.resolve("world.time") == "default:time"


# -- the session view ------------------------------------------------------------------------

def test_the_view_of_long_ebb_has_no_hidden_stat_and_resolves_icons():
    loaded = load_campaign(LONG_EBB)
    state = loaded.initial_state()
    state["plot"] = {"beats": {"fired": ["the_contract"]}}
    view = session_view(state, loaded.stats, loaded.icons, items=loaded.items, cast=loaded.cast)
    text = json.dumps(view)
    assert "drowned_regard" not in text and "Regard of the Drowned" not in text
    assert "beats" not in json.dumps(view["state"])
    assert state["player"]["stats"]["drowned_regard"] == 50  # the input is left alone
    paths = [s["path"] for s in view["stats"]]
    assert set(paths) == {"player.stats.vigour", "player.stats.nerve", "player.stats.lamp_oil",
                          "npcs.odile_venn.stats.trust"}
    vigour = next(s for s in view["stats"] if s["id"] == "vigour")
    assert (vigour["display"], vigour["min"], vigour["max"], vigour["value"]) == ("bar", 0, 100, 100)
    assert view["icons"]["player.stats.vigour"] == "campaign/ui/state/player.stats.vigour.svg"
    assert view["icons"]["player.stats.nerve"] == "campaign/ui/state/player.stats.*.svg"
    assert view["icons"]["world.location"] == "campaign/ui/state/world.location.svg"
    assert view["icons"]["world.time"] == "default:time"
    items = {i["id"]: i for i in view["inventory"]}
    assert items["boathook"]["icon"] == "campaign/ui/items/weapon.svg"
    assert items["tide_lantern"]["icon"] == "campaign/art/items/tide_lantern.png"  # explicit
    assert items["lamp_oil_flask"]["quantity"] == 1
    odile = view["npcs"][0]
    assert (odile["id"], odile["name"], odile["relationship"], odile["max"]) == \
        ("odile_venn", "Odile Venn", 4, 10)
    assert odile["portrait"] == "campaign/art/characters/odile_venn.png"


def test_missing_and_invalid_values_are_null():
    loaded = load_campaign(LONG_EBB)
    state = loaded.initial_state()
    state["player"]["stats"]["nerve"] = "abc"
    del state["player"]["stats"]["vigour"]
    state["player"]["stats"]["lamp_oil"] = float("nan")
    state["player"]["inventory"]["boathook"]["quantity"] = "many"
    state["npcs"]["odile_venn"]["stats"]["trust"] = True
    view = session_view(state, loaded.stats, loaded.icons, items=loaded.items, cast=loaded.cast)
    values = {s["id"]: s["value"] for s in view["stats"]}
    assert values == {"nerve": None, "vigour": None, "lamp_oil": None, "trust": None}
    assert next(i for i in view["inventory"] if i["id"] == "boathook")["quantity"] is None
    assert view["npcs"][0]["relationship"] is None
    assert number_or_none(3) == 3 and number_or_none(2.5) == 2.5 and number_or_none(None) is None


def test_a_view_without_a_campaign_uses_defaults_and_survives_odd_state():
    state = {"player": {"inventory": ["rope", {"id": "lamp", "quantity": 2}, 7], "stats": "x"},
             "npcs": {"owen": {"perception": 35}, "bad": 3}}
    view = session_view(state)
    assert [i["id"] for i in view["inventory"]] == ["rope", "lamp"]
    assert view["inventory"][1]["quantity"] == 2
    owen = next(n for n in view["npcs"] if n["id"] == "owen")
    assert (owen["relationship"], owen["min"], owen["max"]) == (35, -100.0, 100.0)
    assert view["icons"]["player.inventory.rope"] == "default:item"
    assert view["stats"] == []
    assert visible_state(state, None) == state
