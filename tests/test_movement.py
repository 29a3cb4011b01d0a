"""The player goes where the action says (runtime/turn/movement.py), read with the real
campaigns' places and names; no model."""

from __future__ import annotations

import pytest

from conftest import TESTS
from narratoria.runtime.campaign.loaded import load_campaign
from narratoria.actors.coordinator import _RemoteNarrator
from narratoria.runtime.planner.choices import SceneFacts, Thing, world_menu
from narratoria.runtime.planner.narration import NarrationContext
from narratoria.runtime.turn.movement import destination, location_patch, moved_state
from narratoria.runtime.turn.scene_world import _features, campaign_world, going_to, scene_facts

CAMPAIGNS = TESTS.parent / "campaigns"


@pytest.fixture(scope="module")
def ebb():
    campaign = load_campaign(CAMPAIGNS / "long_ebb")
    return campaign, campaign_world(campaign)


def going(world, text: str, here: str | None = "brinehollow_quay") -> str | None:
    return destination(text, world.places, world.lexicon, here)


@pytest.mark.parametrize("text, place", [
    ("Go to the Drowned Guildhall", "drowned_guildhall"),      # the menu's own line
    ("I head back to the bell chapel", "bell_chapel"),
    ("go back down to the undercourt", "undercourt"),       # lower case, no "I"
    ("I try to sneak into the Undercourt", "undercourt"),
    ("I take the tide lantern and go to the Bell Chapel", "bell_chapel"),
    ("Return to the Bell Chapel", "bell_chapel"),
    ("I make my way over to the Drowned Guildhall", "drowned_guildhall"),
    ("enter the Drowned Guildhall", "drowned_guildhall"),
    ("go" + " " * 60 + "back   to  the Bell Chapel", "bell_chapel"),  # spaces as typed
])
def test_a_deed_of_going_names_where_the_player_goes(ebb, text, place):
    assert going(ebb[1], text) == place


@pytest.mark.parametrize("text", [
    "I walk away from the Bell Chapel",          # from, not to
    "Look around the Drowned Guildhall",         # looking goes nowhere
    "I ask Odile about the Undercourt",
    "What is the Bell Chapel?",
    "I go past the Bell Chapel without stopping",
    "Go to the Brinehollow Quay",                # already there
    "I light the tide lantern",
    "I run the Drowned Guildhall's old books past Meret",   # a place's thing, not the place
])
def test_looking_asking_and_staying_go_nowhere(ebb, text):
    assert going(ebb[1], text) is None


def test_the_patch_sets_the_location_where_the_state_keeps_it(ebb):
    campaign, world = ebb
    state = campaign.initial_state()
    assert location_patch("drowned_guildhall", state) == {"world": {"location": "drowned_guildhall"}}
    moved = moved_state(state, "drowned_guildhall")
    assert moved["world"] == {**state["world"], "location": "drowned_guildhall"}
    assert state["world"]["location"] == "brinehollow_quay"  # a copy: the state is untouched
    # and the next scene is set there: its exits, its people
    facts = scene_facts(world, moved, ["I look around"])
    assert facts.place.name == "the Drowned Guildhall"
    assert "Meret Alder" in [p.name for p in facts.people]
    assert location_patch("bell_chapel", {"location": "quay"}) == {"location": "bell_chapel"}


def test_the_menu_after_going_is_the_new_places(ebb):
    campaign, world = ebb
    place, facts = going_to(world, campaign.initial_state(), "Go to the Drowned Guildhall")
    assert place == "drowned_guildhall"
    assert facts.place.name == "the Drowned Guildhall"
    assert [t.name for t in facts.exits] == ["the Undercourt"]
    assert "Meret Alder" in facts.person_names()
    lines = [line for group in world_menu(facts, "Go to the Drowned Guildhall").values()
             for line in group]
    assert "Go to the Undercourt" in lines and "Look around the Drowned Guildhall" in lines
    assert not [line for line in lines if "Drowned Guildhall" in line and line.startswith("Go")]
    assert "Go to the Bell Chapel" not in lines  # the quay's way, not the Guildhall's
    # The Undercourt's prose names the Undercourt: still no way to where one stands.
    _, below = going_to(world, campaign.initial_state(), "Go to the Undercourt")
    assert [g for g in world_menu(below, "Go to the Undercourt")["move"]
            if "Undercourt" in g] == []
    assert going_to(world, campaign.initial_state(), "I look at the Drowned Guildhall") is None


def test_the_narrator_writes_the_menu_of_where_the_turn_left_the_player():
    stay, there = SceneFacts(), SceneFacts(place=Thing("the Bell Chapel", "place"))
    narrator = _RemoteNarrator(None, stay, None, ("bell_chapel", there))
    assert narrator._facts(NarrationContext("Go to the Bell Chapel", moved_to="bell_chapel")) is there
    assert narrator._facts(NarrationContext("Go to the Bell Chapel")) is stay  # the check failed
    assert _RemoteNarrator(None, stay)._facts(NarrationContext("I wait")) is stay


def test_a_places_features_are_neither_its_own_name_nor_someone_else(ebb):
    """A menu offers "Go to" a proper feature: never "Go to Chapel" in the Bell Chapel, nor
    "Go to the Bellkeepers" (a faction its tags name), nor "Go to Guildhall" from the
    Undercourt (the Drowned Guildhall is a place of its own, reached by its exit)."""
    _, world = ebb
    features = {pid: [f.name for f in place.features] for pid, place in world.places.items()}
    assert features["bell_chapel"] == ["the tide bell", "the Roll of Names", "Gull Hill"]
    assert "the Guildhall" not in features["drowned_guildhall"]
    assert features["undercourt"] == ["the quickmud"]
    assert features["brinehollow_quay"] == ["the quay", "the harbour", "Lantern Street",
                                            "the Gaff and Lantern"]


def test_a_feature_written_across_lines_is_named_on_one():
    body = "Eels hang in the drying\nsheds, and the north bank is mud."
    assert [f.name for f in _features(["drying_sheds"], body)] == ["the drying sheds"]

