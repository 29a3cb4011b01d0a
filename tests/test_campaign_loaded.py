"""A campaign as a session plays it (campaign/loaded.py) and the daemon's campaign
library (campaign/library.py): real campaign folders and packages, no daemon."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import TESTS
from narratoria.runtime.campaign import CampaignError, pack
from narratoria.runtime.campaign.library import CampaignLibrary, CampaignNotFound
from narratoria.runtime.campaign.loaded import TRACKER_PATH, load_campaign, merge_trees
from narratoria.runtime.state import SessionState

REPO = TESTS.parent
LONG_EBB = REPO / "campaigns" / "long_ebb"
TINY = TESTS / "fixtures" / "campaigns" / "tiny"


@pytest.fixture(scope="module")
def ebb():
    return load_campaign(LONG_EBB)


def test_a_session_starts_from_the_campaigns_stats_items_location_and_cast(ebb):
    tree = ebb.initial_state()
    assert tree["player"]["stats"]["vigour"] == 100
    assert tree["player"]["stats"]["drowned_regard"] == 50  # hidden stats are tracked too
    assert tree["npcs"]["odile_venn"]["stats"] == {"trust": 4}
    assert "tide_lantern" in tree["player"]["inventory"]
    assert tree["world"]["location"] == "brinehollow_quay"
    assert ebb.cast["odile_venn"]["name"] == "Odile Venn"
    assert ebb.cast["odile_venn"]["traits"]["faction"] == "lampwrights_guild"
    assert set(ebb.cast) == {"odile_venn", "tamsin_cask", "wick", "corran_hale", "meret_alder"}
    state = SessionState(tree, ebb.ranges())
    state.apply_patch({"player": {"stats": {"nerve": 50}}})
    assert state.get("player.stats.nerve") == 10  # clamped on every patch


def test_guidance_triggers_beats_in_their_windows_and_carries_the_tracker(ebb):
    state = SessionState(ebb.initial_state(), ebb.ranges())
    first = ebb.guidance(1, state, "I look around the quay")
    assert first.triggered == ("the_contract",)
    assert any(line.startswith("Plot beat — The Lampwright's Contract") for line in first.lines)
    state.apply_patch(first.state_patch)
    assert state.get(".".join(TRACKER_PATH))  # saved with the turn's state
    assert ebb.guidance(2, state, "I wait").triggered == ()
    state.apply_patch(ebb.guidance(2, state, "I wait").state_patch)
    # A turn retried at a scene already decided does not fail: no beat moves.
    retried = ebb.guidance(2, state, "I wait")
    assert retried.triggered == () and retried.state_patch == {}


def test_only_the_stat_prompts_that_apply_now_reach_the_narrator(ebb):
    state = SessionState(ebb.initial_state(), ebb.ranges())
    assert ebb.stat_lines(state) == (
        "Regard of the Drowned (hidden: show it only through the story): "
        "Between 30 and 70, the Drowned are distant and distracted.",)
    state.apply_patch({"player": {"stats": {"lamp_oil": 1}}})
    assert any(line.startswith("Lamp Oil") and "gutters" in line for line in ebb.stat_lines(state))


def test_a_campaign_with_errors_does_not_load(tmp_path):
    folder = Path(shutil.copytree(TINY, tmp_path / "tiny"))
    (folder / "stats" / "health.json").write_text('{"id": "health", "range": {"min": 5, "max": 1}}')
    with pytest.raises(CampaignError, match="stats/health.json"):
        load_campaign(folder)


def test_the_library_finds_campaigns_by_id_path_and_package(tmp_path):
    library = CampaignLibrary(tmp_path / "data", roots=[REPO / "campaigns"])
    assert library.locate("long_ebb") == LONG_EBB.resolve()
    folder = Path(shutil.copytree(TINY, tmp_path / "tiny"))
    assert library.locate(str(folder)) == folder.resolve()
    with pytest.raises(CampaignNotFound, match="no campaign with id 'tiny'"):
        library.locate("tiny")
    library.remember("tiny", folder)
    # Remembered on disk: another daemon (after a restart) finds it by id.
    assert CampaignLibrary(tmp_path / "data", roots=[]).locate("tiny") == folder
    package = pack(folder, tmp_path / "tiny.narratoria").output
    loaded = library.load(str(package))
    assert loaded.id == "tiny" and loaded.root.parent.parent == tmp_path / "data" / "unpacked"
    assert library.load(str(package)).root == loaded.root  # extracted once
    with pytest.raises(CampaignNotFound, match="does not exist"):
        library.locate(str(tmp_path / "missing"))


def test_the_library_reloads_a_campaign_only_when_a_file_changed(tmp_path):
    folder = Path(shutil.copytree(TINY, tmp_path / "tiny"))
    library = CampaignLibrary(tmp_path / "data", roots=[])
    first = library.load(str(folder))
    assert library.load(str(folder)) is first
    health = folder / "stats" / "health.json"
    health.write_text(health.read_text().replace('"default": 100', '"default": 90'))
    second = library.load(str(folder))
    assert second is not first and second.initial_state()["player"]["stats"]["health"] == 90


def test_merge_trees_lays_objects_over_each_other():
    assert merge_trees({"a": {"b": 1, "c": 2}, "d": 1}, {"a": {"c": 3}, "e": 4}) == \
        {"a": {"b": 1, "c": 3}, "d": 1, "e": 4}


@pytest.mark.parametrize("ref", ["~nobody-has-this-name", "~nobody-has-this-name/x", "x" * 5000])
def test_a_ref_naming_no_home_or_too_long_is_not_found_never_a_crash(tmp_path, ref):
    from narratoria.runtime.campaign.library import CampaignLibrary, CampaignNotFound

    with pytest.raises(CampaignNotFound, match="campaign: "):
        CampaignLibrary(tmp_path).locate(ref)


def test_the_tracker_is_saved_by_replacement_and_handed_over_whole():
    two = load_campaign(TESTS / "fixtures" / "campaigns" / "two_beats")
    state = SessionState(two.initial_state(), two.ranges())
    from narratoria.runtime.campaign.beat_tracker import BeatTracker

    for scene in (1, 2, 3):
        guidance = two.guidance(scene, state, "I wait")
        state.apply_patch(guidance.state_patch)
        # What the scene saved is exactly the tracker it hands to others (choices).
        assert state.get(".".join(TRACKER_PATH)) == guidance.tracker
        assert BeatTracker.from_json(guidance.tracker).scene == scene
    assert state.get("plot.beats.due") == {}  # "encounters" left `due` when it triggered
    assert guidance.triggered == ()
    # A scene not told by the narrator keeps its beats due and applies no consequence.
    fresh = SessionState(two.initial_state(), two.ranges())
    first = two.guidance(1, fresh, "I wait")
    fresh.apply_patch(first.deferred_patch)
    assert fresh.get("plot.beats.due") == {"premise": 1, "encounters": 1}
    assert fresh.get("world.premise_told") is None
